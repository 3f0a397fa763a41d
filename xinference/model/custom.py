"""Custom model registrations persisted under ``XINFERENCE_HOME/registrations/<type>/<name>.json``.

Files are written atomically (a temporary file, fsync, rename), so a crash never leaves half a registration, and
they are reloaded when the supervisor starts. A file that no longer validates is skipped with a warning rather
than stopping the server.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["RegistrationStore"]

logger = logging.getLogger(__name__)


class RegistrationStore:
    """The folder of persisted registrations."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, model_type: str, model_name: str) -> Path:
        # Both parts are validated names: no separator, no "..", so the path stays under root.
        validate_model_name(model_name)
        return self.root / model_type.lower() / f"{model_name}.json"

    def load(self) -> list[ModelFamily]:
        families = []
        for path in sorted(self.root.glob("*/*.json")):
            try:
                families.append(ModelFamily.model_validate_json(path.read_text(encoding="utf-8")))
            except (OSError, ValidationError, ValueError) as exc:
                logger.warning("skipping the unreadable registration %s: %s", path.name, exc)
        return families

    def save(self, family: ModelFamily) -> None:
        path = self._path(family.model_type, family.model_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(family.model_dump(mode="json", exclude_defaults=True), indent=2)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def delete(self, model_type: str, model_name: str) -> None:
        self._path(model_type, model_name).unlink(missing_ok=True)
