"""Grammar-constrained decoding for the in-process engines (Transformers, MLX): JSON schema, JSON object and forced
tool calls, through llguidance.

Why llguidance (measured on this 2-core machine with SmolLM2's 49,152-token vocabulary, one 36-token JSON object):
a token's mask plus its commit costs 16 µs median / 88 µs p90 (xgrammar 0.2.9: 3 µs / 12 µs), a schema compiles in
2-3 ms (xgrammar 5-11 ms), a tokenizer is wrapped once in 0.5-0.7 s (xgrammar 0.15-0.2 s). Both are far below a
7 ms decode step. llguidance wins on what it needs: no dependency at all and a numpy bitmask API, while xgrammar's
wheel requires torch, transformers and triton, which the MLX engine's torch-free environment cannot take.

The pieces, framework-neutral (numpy only, imported when used, so the llama.cpp engine can build its forced-call
schemas from here without it; torch is used only by :func:`apply_bitmask_torch`)::

    tokenizer = GrammarTokenizer.from_hf(hf_tokenizer, vocab_size, stop_token_ids)   # once per model (~0.5 s)
    constraint = constraint_for(request, tool_format)        # None, or what to enforce (a 400 on a bad schema)
    matcher = constraint.matcher(tokenizer)                  # one per sequence
    mask = allocate_bitmask(1, tokenizer.vocab_size)
    matcher.fill_bitmask(mask[0])                            # before sampling each token
    allowed = bitmask_to_bool(mask[0], vocab)                # numpy bool[vocab]: apply to any framework's logits
    matcher.accept(token)                                    # after sampling; ``matcher.done`` once complete

A forced tool call (``tool_choice`` ``required`` or a named function) is a JSON object
``{"name": <one of the tools>, "arguments": <that tool's parameters schema>}``, wrapped in the family's own call
markers when it has them (Hermes ``<tool_call>...</tool_call>``, Mistral ``[TOOL_CALLS][...]``) so the output
parses with the family's parser; otherwise it is bare JSON parsed with ``BARE_JSON_CALLS``. Exactly one call is
made: that satisfies both ``required`` and a named choice whatever ``parallel_tool_calls`` says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from xinference.errors import InvalidRequest

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from xinference.model.parsers.tool_calls import ToolCallFormat

__all__ = [
    "Constraint",
    "GrammarMatcher",
    "GrammarTokenizer",
    "allocate_bitmask",
    "apply_bitmask_numpy",
    "apply_bitmask_torch",
    "bitmask_to_bool",
    "constraint_for",
    "forced_tool_choice",
    "forced_tool_schema",
]

_INSTALL_HINT = "pip install llguidance"
#: JSON written the way models write it: one space after ':' and ',', no free whitespace a small model could loop in
_JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def _llguidance() -> Any:
    try:
        import llguidance
    except ImportError as exc:  # pragma: no cover - the transformers extra installs it
        raise InvalidRequest(f"structured output needs the llguidance package ({_INSTALL_HINT})") from exc
    return llguidance


class GrammarTokenizer:
    """A model's vocabulary as llguidance sees it; build once per model (it costs ~0.5 s), share across requests."""

    def __init__(self, inner: Any, vocab_size: int) -> None:
        self.inner = inner
        self.vocab_size = vocab_size

    @classmethod
    def from_hf(cls, tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> GrammarTokenizer:
        """From a Hugging Face *fast* tokenizer; ``vocab_size`` is the model's logits width."""
        import llguidance.hf

        eos = sorted(stop_token_ids) or None
        return cls(llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos), vocab_size)

    @classmethod
    def from_file(cls, tokenizer_json: str, vocab_size: int, stop_token_ids: list[int]) -> GrammarTokenizer:
        """From a ``tokenizer.json`` file, without transformers (for engines whose environment lacks it)."""
        llg = _llguidance()
        return cls(
            llg.LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=sorted(stop_token_ids) or None), vocab_size
        )


@dataclass(frozen=True)
class Constraint:
    """What a request forces the output to be. ``grammar`` is llguidance's grammar text."""

    kind: Literal["json_object", "json_schema", "tool_call"]
    grammar: str
    #: for ``tool_call``: the format the output is written in, to parse it back into ``tool_calls``
    tool_format: ToolCallFormat | None = None
    param: str = "response_format"

    def matcher(self, tokenizer: GrammarTokenizer) -> GrammarMatcher:
        """A fresh matcher for one sequence; a schema llguidance cannot compile is a 400 naming the field."""
        llg = _llguidance()
        inner = llg.LLMatcher(tokenizer.inner, self.grammar, log_level=0)
        if inner.is_error():
            raise InvalidRequest(f"{self.param} cannot be enforced: {_first_line(inner.get_error())}", param=self.param)
        return GrammarMatcher(inner)


class GrammarMatcher:
    """One sequence's position in its grammar. Not thread-safe: one owner (the decoding loop)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def fill_bitmask(self, row: npt.NDArray[np.int32]) -> None:
        """Write the allowed next tokens into ``row`` (int32[ceil(vocab/32)], bit ``t`` set = token ``t`` allowed)."""
        if not row.flags["C_CONTIGUOUS"]:
            raise ValueError("the bitmask row must be contiguous")
        self._inner.unsafe_compute_mask_ptr(row.ctypes.data, row.size * row.itemsize)

    def accept(self, token: int) -> bool:
        """Advance past a sampled token; False if the grammar did not allow it (then the matcher is in error)."""
        return bool(self._inner.consume_token(token))

    @property
    def done(self) -> bool:
        """The output is complete: nothing but the end of the sequence may follow."""
        return bool(self._inner.is_stopped())

    @property
    def error(self) -> str | None:
        return str(self._inner.get_error()) if self._inner.is_error() else None


# -- bitmasks (numpy; any framework) -----------------------------------------------------------------------------
def allocate_bitmask(rows: int, vocab_size: int) -> npt.NDArray[np.int32]:
    """A zeroed bitmask for ``rows`` sequences."""
    import numpy as np

    return np.zeros((rows, (vocab_size + 31) // 32), dtype=np.int32)


def bitmask_to_bool(row: npt.NDArray[np.int32], vocab_size: int) -> npt.NDArray[np.bool_]:
    """The allowed tokens of a bitmask row as ``bool[vocab_size]`` (little-endian bits: bit ``t % 32`` of word
    ``t // 32``)."""
    import numpy as np

    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


def apply_bitmask_numpy(logits: npt.NDArray[np.floating[Any]], row: npt.NDArray[np.int32]) -> None:
    """Set the logits of disallowed tokens to ``-inf`` in place (``logits``: ``[vocab]``)."""
    import numpy as np

    allowed = bitmask_to_bool(row, logits.shape[-1])
    logits[~allowed] = -np.inf


def apply_bitmask_torch(logits: Any, row: npt.NDArray[np.int32]) -> Any:
    """``logits`` (a torch tensor ``[vocab]``) with disallowed tokens at ``-inf`` (a new tensor)."""
    import torch

    allowed = torch.from_numpy(bitmask_to_bool(row, logits.shape[-1])).to(logits.device)
    return logits.masked_fill(~allowed, float("-inf"))


# -- what a request asks for ---------------------------------------------------------------------------------------
def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "invalid grammar"


def _schema_grammar(schema: dict[str, Any]) -> str:
    llg = _llguidance()
    styled = {**schema, "x-guidance": {**_JSON_STYLE, **(schema.get("x-guidance") or {})}}
    return str(llg.LLMatcher.grammar_from_json_schema(styled))


def _tool_function(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise InvalidRequest("only tools of type 'function' are supported", param="tools")
    function = tool.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InvalidRequest("each tool needs function.name", param="tools")
    return function


def forced_tool_schema(tools: list[Any], name: str | None, argument_key: str = "arguments") -> dict[str, Any]:
    """The JSON schema of one call: to ``name``, or to any of ``tools`` when ``name`` is None."""
    functions = [_tool_function(tool) for tool in tools]
    if name is not None:
        functions = [f for f in functions if f["name"] == name]
        if not functions:
            raise InvalidRequest(f"tool_choice names the function {name!r}, which is not in tools", param="tool_choice")
    options = []
    for function in functions:
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise InvalidRequest(
                f"the parameters of tool {function['name']!r} must be a JSON schema object", param="tools"
            )
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, argument_key: parameters},
                "required": ["name", argument_key],
                "additionalProperties": False,
            }
        )
    return options[0] if len(options) == 1 else {"anyOf": options}


def forced_tool_choice(tool_choice: Any) -> tuple[bool, str | None]:
    """``(forced, function name)`` of a ``tool_choice``: ``required`` forces any call, a named function that one;
    anything else OpenAI does not define is a 400 naming ``tool_choice``."""
    if tool_choice == "required":
        return True, None
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if tool_choice.get("type") != "function" or not isinstance(name, str):
            raise InvalidRequest(
                'a named tool_choice is {"type": "function", "function": {"name": ...}}', param="tool_choice"
            )
        return True, name
    if tool_choice in (None, "auto", "none"):
        return False, None
    raise InvalidRequest(
        f"tool_choice must be none, auto, required or a named function, not {tool_choice!r}", param="tool_choice"
    )


def _response_format_schema(response_format: Any) -> tuple[str, dict[str, Any]] | None:
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise InvalidRequest("response_format must be an object", param="response_format")
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return "json_object", {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise InvalidRequest(
                "response_format.json_schema.schema must be a JSON schema object", param="response_format"
            )
        return "json_schema", schema
    raise InvalidRequest(
        f"response_format type {kind!r} is not one of text, json_object, json_schema", param="response_format"
    )


def constraint_for(request: dict[str, Any], tool_format: ToolCallFormat | None = None) -> Constraint | None:
    """What ``request`` forces (``response_format`` or a forced ``tool_choice``), or None. ``tool_format`` is the
    family's call format (its markers wrap a forced call). Raises InvalidRequest naming the field at fault."""
    from xinference.model.parsers.postprocess import BARE_JSON_CALLS

    forced, name = forced_tool_choice(request.get("tool_choice"))
    tools = request.get("tools") or []
    fmt = _response_format_schema(request.get("response_format"))
    if forced:
        if not tools:
            raise InvalidRequest("tool_choice forces a call but no tools were given", param="tool_choice")
        if fmt is not None:
            raise InvalidRequest("response_format cannot be combined with a forced tool_choice", param="tool_choice")
        call_format = tool_format if tool_format is not None and tool_format.call_prefix else BARE_JSON_CALLS
        key = call_format.argument_keys[0]
        call = _schema_grammar(forced_tool_schema(tools, name, key))
        if call_format.call_prefix:
            llg = _llguidance()
            body = json.loads(call)["grammars"][0]["json_schema"]
            lark = (
                f"start: {json.dumps(call_format.call_prefix)} call {json.dumps(call_format.call_suffix)}\n"
                f"call: %json {json.dumps(body)}\n"
            )
            call = str(llg.LLMatcher.grammar_from_lark(lark))
        return _checked(Constraint("tool_call", call, call_format, param="tool_choice"))
    if fmt is None:
        return None
    kind, schema = fmt
    return _checked(Constraint(kind, _schema_grammar(schema)))  # type: ignore[arg-type]


def _checked(constraint: Constraint) -> Constraint:
    """Refuse, before any token, a grammar llguidance cannot build (an unsupported keyword, a bad schema)."""
    llg = _llguidance()
    is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(constraint.grammar)
    if is_error:
        raise InvalidRequest(
            f"{constraint.param} cannot be enforced: {_first_line(messages[0])}", param=constraint.param
        )
    return constraint
