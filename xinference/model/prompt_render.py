"""The one chat-template renderer: every engine that builds a chat prompt in Python, and the template preview
route, render through :func:`render`.

Why one renderer: a chat template is a program. Templates come from model folders, GGUF files and registrations,
and their inputs (messages, tools, ``chat_template_kwargs``) from any API client; a template that loops or
multiplies without bound would otherwise exhaust the memory or hold a thread of a shared process. So rendering is

- **sandboxed**: Jinja's :class:`ImmutableSandboxedEnvironment` (no Python internals, no mutation of the inputs),
  with what Hugging Face templates expect (``raise_exception``, ``strftime_now``, ``tojson`` with HF's options,
  ``loopcontrols``, the ``{% generation %}`` tag as plain output);
- **bounded** by :class:`RenderLimits`, checked *before* each allocation that could exceed them: the prompt's size,
  every string and sequence built on the way (``*``, ``+``, ``~``, ``%``, ``**``, ``range``, string methods and
  filters that widen text), the nesting of calls (a recursive macro stops cleanly, long before Python's own
  recursion limit), the loop iterations of one render and its wall time. Threads cannot be killed, so the time
  limit is enforced from inside: every loop iteration, call, operator and piece of output checks the deadline;
  between two checks only one bounded operation runs.
- **strict about its own variables**: callers' template variables (``chat_template_kwargs``) cannot replace what the
  renderer sets (:data:`RESERVED_VARIABLES`); naming one is a 400 rather than a value silently ignored.

Every failure is a :class:`ChatTemplateError` (a 400): :class:`TemplateLimitExceeded` names the limit,
:class:`UnsafeTemplate` the sandbox's refusal. Compiled templates are cached by source (LRU, 64 entries).

The sandbox and its bounds are :mod:`xinference.model.template_sandbox`; this module decides the template's
variables (the messages as Hugging Face prepares them, the tools, the special tokens, the caller's kwargs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xinference.model.template_sandbox import (
    DEFAULT_LIMITS,
    SANDBOX_GLOBALS,
    ChatTemplateError,
    RenderLimits,
    TemplateLimitExceeded,
    UnsafeTemplate,
    run,
)

__all__ = [
    "DEFAULT_LIMITS",
    "RESERVED_VARIABLES",
    "SPECIAL_TOKEN_NAMES",
    "ChatTemplateError",
    "RenderLimits",
    "TemplateLimitExceeded",
    "UnsafeTemplate",
    "check_template_kwargs",
    "render",
    "special_tokens_of",
]

#: special tokens of a tokenizer handed to templates under these names (Hugging Face's ``special_tokens_map``)
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

#: Variables the renderer sets and callers cannot replace: the conversation and its switches (``messages``,
#: ``tools``, ``add_generation_prompt``: they come from the request's own fields, so a kwargs copy would be a
#: second, conflicting source), the tokenizer's special tokens (facts about the model: a prompt built with other
#: tokens is not one the model was trained on), and the template's helpers (``raise_exception``, ``range``, ...:
#: replacing one with data would break the template or lift a bound). ``documents`` is not reserved: the API has
#: no field for it, so ``chat_template_kwargs`` is how RAG templates get their documents.
RESERVED_VARIABLES: frozenset[str] = frozenset(
    {"messages", "tools", "add_generation_prompt", *SPECIAL_TOKEN_NAMES, *SANDBOX_GLOBALS}
)


def check_template_kwargs(kwargs: Mapping[str, Any] | None, param: str = "chat_template_kwargs") -> None:
    """Refuse caller-supplied template variables that name one of :data:`RESERVED_VARIABLES` (a 400 naming it)."""
    taken = sorted(set(kwargs or ()) & RESERVED_VARIABLES)
    if taken:
        raise ChatTemplateError(
            f"{param} may not set {', '.join(map(repr, taken))}: the platform sets "
            f"{'it' if len(taken) == 1 else 'them'} for the chat template",
            param=param,
        )


def special_tokens_of(tokenizer: Any) -> dict[str, str]:
    """A Hugging Face tokenizer's special tokens as template variables (``bos_token`` ...), as
    ``apply_chat_template`` passes them; absent ones are left out."""
    found = getattr(tokenizer, "special_tokens_map", None)
    tokens = dict(found) if isinstance(found, Mapping) else {}
    for name in SPECIAL_TOKEN_NAMES:
        value = getattr(tokenizer, name, None) if name not in tokens else tokens[name]
        if value is not None:
            tokens[name] = value
    return {name: str(tokens[name]) for name in SPECIAL_TOKEN_NAMES if tokens.get(name) is not None}


_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as Hugging Face hands them to templates: keys whose value is null dropped (templates test for
    missing keys), reasoning under each name templates read. New dicts: the caller's are not touched."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"messages[{index}] is not an object", param="messages")
        clean = {key: value for key, value in message.items() if value is not None}
        reasoning = next((clean[key] for key in _REASONING_FIELDS if key in clean), None)
        if reasoning is not None:
            clean = {"thinking": reasoning, **clean, "reasoning_content": reasoning}
        out.append(clean)
    return out


def render(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    tools: list[dict[str, Any]] | None = None,
    special_tokens: Mapping[str, str] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    limits: RenderLimits = DEFAULT_LIMITS,
) -> str:
    """The prompt ``template`` makes of ``messages``.

    ``tools`` (None when the request has none), ``special_tokens`` (the model's, see :func:`special_tokens_of`) and
    ``template_kwargs`` (the request's ``chat_template_kwargs``; reserved names are a 400) are the template's other
    variables. Raises :class:`ChatTemplateError` (a 400) for anything the template does, with
    :class:`TemplateLimitExceeded` naming the limit when one is reached.
    """
    check_template_kwargs(template_kwargs)
    variables: dict[str, Any] = {"documents": None, **(template_kwargs or {})}
    for name, value in (special_tokens or {}).items():
        if name in SPECIAL_TOKEN_NAMES:
            variables[name] = value
    variables.update(messages=_template_messages(messages), tools=tools, add_generation_prompt=add_generation_prompt)
    return run(template, variables, limits)
