"""Chat templates: found in the family JSON, the tokenizer config or the GGUF metadata, rendered in a sandbox.

Engines that build prompts themselves (Transformers, ...) call :func:`find_chat_template` once at load and
:func:`render` per request. Templates are Jinja2 run in an :class:`ImmutableSandboxedEnvironment`: they can read
the messages and the variables handed in, but not reach Python internals (``__class__``, ``__globals__``, ...) or
change the objects they are given. Any attempt stops rendering with :class:`UnsafeTemplate`; a template's own
``raise_exception("...")`` and its syntax errors are an :class:`InvalidRequest` carrying the template's message.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from datetime import datetime
from typing import Any, BinaryIO, NoReturn

from jinja2 import TemplateError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from xinference.errors import InvalidRequest
from xinference.model.spec import ModelFamily

__all__ = ["UnsafeTemplate", "find_chat_template", "gguf_metadata_string", "render"]

GGUF_TEMPLATE_KEY = "tokenizer.chat_template"


class UnsafeTemplate(InvalidRequest):
    """Raised when a chat template tries to reach Python internals or mutate its inputs (chained SecurityError)."""

    code = "unsafe_chat_template"


class _TemplateRaised(Exception):
    """A template called ``raise_exception(message)``."""


class _Sandbox(ImmutableSandboxedEnvironment):
    """Unsafe attribute access fails at once (the stock sandbox returns an undefined that may render as '')."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> NoReturn:
        raise SecurityError(f"a chat template may not access {attribute!r} of a {type(obj).__name__} object")


def _raise_exception(message: str) -> NoReturn:
    raise _TemplateRaised(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=1)
def _environment() -> _Sandbox:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    env.filters["tojson"] = _tojson
    return env


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> Any:
    try:
        return _environment().from_string(template)
    except TemplateError as exc:
        raise InvalidRequest(f"the chat template does not compile: {exc}") from exc


def render(
    template: str, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **variables: Any
) -> str:
    """The prompt ``template`` makes of ``messages`` (plus ``tools``, ``bos_token``, ... given as variables)."""
    compiled = _compile(template)
    try:
        return str(compiled.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables))
    except SecurityError as exc:
        raise UnsafeTemplate(f"the chat template was stopped: {exc}") from exc
    except _TemplateRaised as exc:
        raise InvalidRequest(f"the chat template refused the request: {exc}") from exc
    except (TemplateError, OverflowError, TypeError, ValueError, KeyError, IndexError) as exc:
        raise InvalidRequest(f"the chat template failed: {type(exc).__name__}: {exc}") from exc


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
