"""Turning typed launch options into a server's command-line flags (shared by the vLLM, SGLang and MLX configs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["flag", "option_args"]


def flag(name: str) -> str:
    """``max_model_len`` → ``--max-model-len``."""
    return "--" + name.replace("_", "-")


def option_args(
    options: Any,
    valued: Iterable[str] = (),
    switches: Iterable[str] = (),
    toggles: Iterable[str] = (),
    unless_auto: Iterable[str] = (),
) -> list[str]:
    """Flags for the named fields of ``options``: ``valued`` ones as ``--name value`` when set, ``switches`` as a
    bare ``--name`` when true, ``toggles`` as ``--name`` / ``--no-name`` when set, ``unless_auto`` as
    ``--name value`` unless ``"auto"``."""
    args: list[str] = []
    for name in valued:
        value = getattr(options, name)
        if value is not None:
            args += [flag(name), f"{value:g}" if isinstance(value, float) else str(value)]
    for name in unless_auto:
        value = getattr(options, name)
        if value != "auto":
            args += [flag(name), str(value)]
    args += [flag(name) for name in switches if getattr(options, name)]
    for name in toggles:
        value = getattr(options, name)
        if value is not None:
            args.append(flag(name) if value else flag(name).replace("--", "--no-", 1))
    return args
