"""Chat templates: found in the family JSON, the tokenizer config or the GGUF metadata.

Engines that build prompts themselves (Transformers, MLX, ...) call :func:`find_chat_template` once at load; the
template is rendered per request by :mod:`xinference.model.prompt_render`, the platform's one sandboxed, bounded
renderer.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, BinaryIO

from xinference.model.spec import ModelFamily

__all__ = ["find_chat_template", "gguf_metadata_string"]

GGUF_TEMPLATE_KEY = "tokenizer.chat_template"


def find_chat_template(family: ModelFamily, model_path: str | None = None) -> str | None:
    """The template to use: the family JSON's, else the tokenizer config's (a model folder), else the GGUF's."""
    if family.chat_template:
        return family.chat_template
    if not model_path:
        return None
    if os.path.isdir(model_path):
        return _folder_template(model_path)
    if model_path.lower().endswith(".gguf") and os.path.isfile(model_path):
        return gguf_metadata_string(model_path, GGUF_TEMPLATE_KEY)
    return None


def _folder_template(folder: str) -> str | None:
    standalone = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(standalone):
        with open(standalone, encoding="utf-8") as handle:
            return handle.read()
    for name in ("tokenizer_config.json", "chat_template.json"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                value = json.load(handle).get("chat_template")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, list):  # named templates: [{"name": "default", "template": "..."}, ...]
            named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
            value = named.get("default") or next(iter(named.values()), None)
        if isinstance(value, str) and value:
            return value
    return None


# -- a minimal GGUF metadata reader (header key/values only; tensors are never touched) -------------------------
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(handle: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return struct.unpack(fmt, data)[0]


def _read_string(handle: BinaryIO) -> bytes:
    length = _read(handle, "<Q")
    data = handle.read(length)
    if len(data) != length:
        raise ValueError("truncated GGUF string")
    return data


def _skip_value(handle: BinaryIO, kind: int) -> None:
    if kind in _SCALARS:
        handle.seek(struct.calcsize(_SCALARS[kind]), os.SEEK_CUR)
    elif kind == _STRING:
        handle.seek(_read(handle, "<Q"), os.SEEK_CUR)
    elif kind == _ARRAY:
        item_kind, count = _read(handle, "<I"), _read(handle, "<Q")
        if item_kind in _SCALARS:
            handle.seek(struct.calcsize(_SCALARS[item_kind]) * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(handle, item_kind)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata_string(path: str, key: str) -> str | None:
    """The string value of ``key`` in a GGUF file's metadata (v2/v3), or None when absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF" or _read(handle, "<I") < 2:
                return None
            _read(handle, "<Q")  # tensor count
            for _ in range(_read(handle, "<Q")):
                name = _read_string(handle).decode("utf-8", "replace")
                kind = _read(handle, "<I")
                if name == key and kind == _STRING:
                    return _read_string(handle).decode("utf-8")
                _skip_value(handle, kind)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return None
