"""Logging set-up of the platform's own processes: to stderr and to a file under ``XINFERENCE_HOME/logs``."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

__all__ = ["setup_logging"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: str, log_file: Path | None = None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        handlers.append(logging.handlers.RotatingFileHandler(log_file, maxBytes=20 << 20, backupCount=3))
    logging.basicConfig(level=level.upper(), format=_FORMAT, handlers=handlers, force=True)
