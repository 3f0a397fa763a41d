"""Turning typed launch options into a server's command-line flags (shared by the vLLM, SGLang and MLX configs)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field

__all__ = ["MediaLimits", "flag", "json_args", "option_args"]

#: How many items of each modality one request may carry (``{"image": 4}``): vLLM's ``--limit-mm-per-prompt`` and
#: SGLang's ``--limit-mm-data-per-request`` take this JSON. Servers size their multimodal buffers from it, so a
#: lower limit also saves memory; 0 turns a modality off.
MediaLimits = dict[Literal["image", "video", "audio"], Annotated[int, Field(ge=0, le=1024)]]


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


def json_args(options: Any, names: Iterable[str]) -> list[str]:
    """``--name <compact JSON>`` for each named field of ``options`` that is set (dicts such as :data:`MediaLimits`)."""
    args: list[str] = []
    for name in names:
        value = getattr(options, name)
        if value is not None:
            args += [flag(name), json.dumps(value, separators=(",", ":"), sort_keys=True)]
    return args
