"""llama.cpp's own parameters (xllamacpp's ``CommonParams`` tree), settable at launch by dotted name.

Why: the original Xinference lets users set any field of llama.cpp's ``common_params`` as a launch option, nested
fields with dots (``sampling.top_k``, ``speculative.draft.n_max``), and its users' scripts rely on that. Here every
such option is checked against the tree of the xllamacpp that is installed before anything starts: an unknown path
is a 400 naming it and the closest real paths, a value of the wrong type is a 400 saying what the field takes, and
the fields the platform manages itself (the model file, llama.cpp's private HTTP port and its key) are refused.

The tree is read from a default ``CommonParams()`` by walking its attributes; each leaf's type comes from the
binding's own annotation (``CommonParams.n_ctx: int``), so a new xllamacpp brings its new fields with it.

Values are normalised to plain JSON (enum members become their short lower-case names: ``ngram_simple``), so the
options travel inside launch plans and show up readable in the model's resolved ``engine_config``.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xinference.errors import InvalidRequest

__all__ = [
    "MANAGED_PATHS",
    "TYPED_PATHS",
    "Leaf",
    "ParamTree",
    "flatten_options",
    "load_tree",
]

#: Paths the platform owns: the weights it resolved, and llama.cpp's HTTP port, which must stay on loopback behind
#: a key nobody else knows. A prefix ending in ``.`` covers a whole subtree.
MANAGED_PATHS: tuple[str, ...] = (
    "model.",
    "mmproj.",
    "model_alias",
    "model_tags",
    "hostnames",
    "port",
    "reuse_port",
    "api_keys",
    "api_prefix",
    "ssl_file_cert",
    "ssl_file_key",
    "endpoint_metrics",
    "endpoint_props",
    "endpoint_slots",
    "cors_",
    "public_path",
    "ui",
    "ui_config_json",
    "ui_mcp_proxy",
    "mcp_servers_config",
    "mcp_servers_json",
    "server_tools",
    "server_tools_runtime",
    "models_dir",
    "models_preset",
    "models_preset_hf",
    "models_autoload",
    "models_max",
    "hf_token",
    "offline",
    "n_threads_http",
    "timeout_read",
    "timeout_write",
    "slot_save_path",
    "path_prompts_log_dir",
    "logits_file",
    "logits_output_dir",
    "out_file",
    "prompt_file",
    "path_prompt_cache",
    "sleep_idle_seconds",
)

#: Tree paths that the typed launch options already set; the option to use instead is named in the 400.
TYPED_PATHS: dict[str, str] = {
    "cpuparams.n_threads": "n_threads",
    "cpuparams_batch.n_threads": "n_threads_batch",
    "flash_attn_type": "flash_attn",
    "mmproj.path": "multimodal_projector",  # the projector file is fetched beside the weights (model/projector.py)
}

#: Paths of older xllamacpp releases that moved; used only when the old path is not in the installed tree.
_MOVED: tuple[tuple[str, str], ...] = (
    ("speculative.model.", "speculative.draft.mparams."),
    ("speculative.mparams.", "speculative.draft.mparams."),
    ("speculative.type", "speculative.types"),
)

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
_SCALAR_KINDS = {"bool": bool, "int": int, "uint32_t": int, "float": float, "str": str}
_LIST = re.compile(r"^(list|set)\[(?P<inner>[\w.]+)\]$")


@dataclass(frozen=True)
class Leaf:
    """One settable field: its dotted path, the binding's annotation, and what it holds by default."""

    path: str
    annotation: str
    default: Any
    doc: str = ""
    #: the enum class for enum fields (and lists of them); None otherwise
    enum: Any = None

    @property
    def container(self) -> str | None:
        match = _LIST.match(self.annotation)
        return match.group(1) if match else None

    @property
    def item(self) -> str:
        match = _LIST.match(self.annotation)
        return match.group("inner") if match else self.annotation

    @property
    def settable(self) -> bool:
        if self.annotation == "dict":
            return True
        item = self.item.removeprefix("xllamacpp.")
        return item in _SCALAR_KINDS or self.enum is not None


def _annotation(owner: type, name: str) -> tuple[str, str]:
    """(type, description) from a binding's docstring ``Owner.name: type\\n\\ndescription``."""
    text = getattr(getattr(owner, name, None), "__doc__", None) or ""
    head, _, rest = text.partition("\n")
    annotation = head.split(": ", 1)[1].strip() if ": " in head else ""
    return annotation, " ".join(rest.split())


def _is_struct(value: Any) -> bool:
    kind = type(value)
    return (
        kind.__module__.startswith("xllamacpp")
        and not hasattr(kind, "__members__")
        and not isinstance(value, (bool, int, float, str, list, set, dict))
    )


def _walk(xllamacpp: Any, node: Any, prefix: str, leaves: dict[str, Leaf]) -> None:
    owner = type(node)
    for name in dir(node):
        if name.startswith("_"):
            continue
        try:
            value = getattr(node, name)
        except Exception:  # noqa: BLE001 - a field the binding cannot read is not settable either
            continue
        if callable(value):
            continue
        path = prefix + name
        if _is_struct(value):
            _walk(xllamacpp, value, path + ".", leaves)
            continue
        annotation, doc = _annotation(owner, name)
        if not annotation:
            annotation = type(value).__name__
        match = _LIST.match(annotation)
        item = match.group("inner") if match else annotation
        enum = getattr(xllamacpp, item.removeprefix("xllamacpp."), None)
        if not hasattr(enum, "__members__"):
            enum = None
        leaves[path] = Leaf(path, annotation, value, doc, enum)


def _enum_name(member: Any) -> str:
    """The short, lower-case name of an enum member: ``COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE`` -> ``ngram_simple``."""
    members = list(type(member).__members__)
    prefix = _common_prefix(members)
    return str(member.name)[len(prefix) :].lower()


def _common_prefix(names: list[str]) -> str:
    if len(names) < 2:
        return ""
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    return prefix[: prefix.rfind("_") + 1] if "_" in prefix else ""


class ParamTree:
    """Every settable path of one xllamacpp's ``CommonParams``; validates options and applies them."""

    def __init__(self, xllamacpp: Any) -> None:
        self._xllamacpp = xllamacpp
        leaves: dict[str, Leaf] = {}
        _walk(xllamacpp, xllamacpp.CommonParams(), "", leaves)
        self.leaves = leaves

    # -- validation ---------------------------------------------------------------------------------------------
    def resolve_path(self, path: str) -> str:
        """The installed tree's path for ``path`` (older spellings are mapped); InvalidRequest when unknown."""
        if path in self.leaves:
            return path
        for old, new in _MOVED:
            if path.startswith(old) and path.replace(old, new, 1) in self.leaves:
                return path.replace(old, new, 1)
        head, _, tail = path.partition(".")
        if head == "speculative" and f"speculative.draft.{tail}" in self.leaves:
            return f"speculative.draft.{tail}"
        close = difflib.get_close_matches(path, list(self.leaves), n=3, cutoff=0.6)
        if not close:
            # a typo in the last part of a real subtree: suggest that subtree's fields
            parent = path.rpartition(".")[0]
            close = (
                difflib.get_close_matches(path, [p for p in self.leaves if p.startswith(parent + ".")], n=3, cutoff=0.0)
                if parent and any(p.startswith(parent + ".") for p in self.leaves)
                else []
            )
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InvalidRequest(f"llama.cpp has no parameter {path!r}{hint}", param=path)

    def validate(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Check flattened ``{dotted path: value}`` options; return them under the installed tree's paths, with
        JSON-ready values (enum members by short name)."""
        result: dict[str, Any] = {}
        for given, value in options.items():
            path = self.resolve_path(given)
            if path in TYPED_PATHS:
                raise InvalidRequest(
                    f"set llama.cpp's {path!r} with the launch option {TYPED_PATHS[path]!r}", param=given
                )
            if any(path == m or (m.endswith((".", "_")) and path.startswith(m)) for m in MANAGED_PATHS):
                raise InvalidRequest(f"llama.cpp's {path!r} is managed by the platform and cannot be set", param=given)
            leaf = self.leaves[path]
            if not leaf.settable:
                raise InvalidRequest(
                    f"llama.cpp's {path!r} ({leaf.annotation}) cannot be given as a launch option", param=given
                )
            result[path] = self._normalise(leaf, value, given)
        return result

    def _normalise(self, leaf: Leaf, value: Any, given: str) -> Any:
        if leaf.annotation == "dict":
            if isinstance(value, str):
                value = _json_or_fail(value, given, "a JSON object")
            if not isinstance(value, dict):
                raise _bad(given, "a JSON object", value)
            return value
        if leaf.container is not None:
            items = value
            if isinstance(value, str):
                stripped = value.strip()
                items = (
                    _json_or_fail(stripped, given, "a list")
                    if stripped.startswith("[")
                    else [part.strip() for part in re.split(r"[,;]", stripped) if part.strip()]
                )
            elif not isinstance(value, (list, tuple, set)):
                items = [value]
            return [self._scalar(leaf, item, given) for item in items]
        return self._scalar(leaf, value, given)

    def _scalar(self, leaf: Leaf, value: Any, given: str) -> Any:
        if leaf.enum is not None:
            return _enum_name(self._member(leaf, value, given))
        kind = leaf.item.removeprefix("xllamacpp.")
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = value.strip().lower() if isinstance(value, str) else None
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise _bad(given, "true or false", value)
        if kind in ("int", "uint32_t"):
            number = value
            if isinstance(value, str):
                try:
                    number = int(value.strip(), 0)
                except ValueError:
                    raise _bad(given, "an integer", value) from None
            if isinstance(number, float) and number.is_integer():
                number = int(number)
            if isinstance(number, bool) or not isinstance(number, int):
                raise _bad(given, "an integer", value)
            if kind == "uint32_t" and not 0 <= number < 1 << 32:
                raise _bad(given, "an integer from 0 to 4294967295", value)
            if not -(1 << 31) <= number < 1 << 32:
                raise _bad(given, "a 32-bit integer", value)
            return number
        if kind == "float":
            if isinstance(value, bool):
                raise _bad(given, "a number", value)
            try:
                return float(value)
            except (TypeError, ValueError):
                raise _bad(given, "a number", value) from None
        if isinstance(value, (dict, list)):
            raise _bad(given, "a string", value)
        return str(value)

    def _member(self, leaf: Leaf, value: Any, given: str) -> Any:
        members: dict[str, Any] = dict(leaf.enum.__members__)
        if isinstance(value, leaf.enum):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            for member in members.values():
                if int(member) == value:
                    return member
        if isinstance(value, str):
            wanted = value.strip().upper().replace("-", "_")
            prefix = _common_prefix(list(members))
            for name, member in members.items():
                if wanted in (name, name[len(prefix) :]):
                    return member
        names = ", ".join(n[len(_common_prefix(list(members))) :].lower() for n in members if not n.endswith("_COUNT"))
        raise InvalidRequest(f"llama.cpp's {given!r} takes one of: {names}; got {value!r}", param=given)

    # -- applying -----------------------------------------------------------------------------------------------
    def apply(self, params: Any, options: Mapping[str, Any]) -> None:
        """Set validated options (from :meth:`validate`) on a ``CommonParams``."""
        for path, value in options.items():
            leaf = self.leaves[path]
            *parents, name = path.split(".")
            node = params
            for part in parents:
                node = getattr(node, part)
            setattr(node, name, self._native(leaf, value))

    def read(self, params: Any, path: str) -> Any:
        """The current value at ``path`` of a ``CommonParams``, as JSON-ready as :meth:`validate` returns it."""
        node = params
        for part in path.split("."):
            node = getattr(node, part)
        if isinstance(node, (list, set, tuple)):
            return [_enum_name(v) if hasattr(type(v), "__members__") else v for v in node]
        return _enum_name(node) if hasattr(type(node), "__members__") else node

    def _native(self, leaf: Leaf, value: Any) -> Any:
        if leaf.enum is not None:
            prefix = _common_prefix(list(leaf.enum.__members__))
            if leaf.container is not None:
                return [getattr(leaf.enum, prefix + v.upper()) for v in value]
            return getattr(leaf.enum, prefix + str(value).upper())
        if leaf.container == "set":
            return set(value)
        return value


def _json_or_fail(text: str, given: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise _bad(given, what, text) from None


def _bad(given: str, expected: str, value: Any) -> InvalidRequest:
    shown = repr(value)
    return InvalidRequest(
        f"llama.cpp's {given!r} takes {expected}, got {shown[:80]}{'...' if len(shown) > 80 else ''}", param=given
    )


def flatten_options(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"speculative": {"draft": {"n_max": 8}}}`` and ``{"speculative.draft.n_max": 8}`` both become the latter.

    A dict is a subtree unless it sits at a path whose field is itself a dict (the caller's tree decides that:
    ``default_template_kwargs`` keeps its dict value).
    """
    flat: dict[str, Any] = {}
    for key, value in options.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in _DICT_FIELDS:
            flat.update(flatten_options(value, path + "."))
        else:
            flat[path] = value
    return flat


#: Fields whose value is a dict (not a subtree) in every xllamacpp release that has them.
_DICT_FIELDS = frozenset({"default_template_kwargs"})


@functools.lru_cache(maxsize=1)
def load_tree() -> ParamTree | None:
    """The tree of the installed xllamacpp, or None where it is not importable (then options are checked in the
    model process, which imports it)."""
    try:
        import xllamacpp
    except ImportError:
        return None
    return ParamTree(xllamacpp)
