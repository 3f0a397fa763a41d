"""The chat prompt SGLang would build for a request, rendered here so ``/v1/messages/count_tokens`` can count it.

Why here and not on the server: SGLang's ``/tokenize`` route takes text only (no chat form, unlike vLLM's), so the
prompt is rendered in the model process with the same template the server was given (the family's, else the model
folder's: :func:`find_chat_template`), by the platform's sandboxed, bounded renderer
(:mod:`xinference.model.prompt_render`), the way SGLang's chat route prepares a request:
string content for templates that print ``message.content`` (text parts joined by a space), part lists for
templates that loop over them, earlier tool calls' arguments as objects, the tokenizer's special tokens as template
variables, and tools as SGLang hands them to a template: only when ``tool_choice`` is not ``none`` (only the named
one for a named choice), each as its bare function (``{"description", "name", "parameters", "strict"}``), wrapped
as ``{"function": ...}`` when the template fails on that form. The server's own tokenizer then counts the text
(``add_special_tokens`` off: the template wrote them).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from xinference.engines.managed.engine import server_template_kwargs
from xinference.engines.managed.tools import forced_tool_call
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.model.chat_template import find_chat_template
from xinference.model.parsers.tool_prompt import history_for_template
from xinference.model.prompt_render import ChatTemplateError, RenderLimits, TemplateLimitExceeded, render
from xinference.model.spec import ModelFamily

__all__ = ["ChatPrompt", "special_tokens"]

#: a template that loops over a message's content parts takes them as a list (SGLang's "openai" content format)
_LOOPS_OVER_PARTS = re.compile(r"for\s+\w+\s+in\s+(?:message|msg|m)\s*(?:\[\s*['\"]content['\"]\s*\]|\.content)")
_SPECIALS = ("bos_token", "eos_token", "unk_token", "pad_token")


def special_tokens(model_path: str) -> dict[str, str]:
    """``bos_token`` and friends from the model folder's ``tokenizer_config.json`` (strings or ``{"content": ...}``
    objects); empty strings where absent, as Transformers passes them to templates."""
    found = dict.fromkeys(_SPECIALS, "")
    try:
        with open(os.path.join(model_path, "tokenizer_config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return found
    if not isinstance(config, dict):
        return found
    for name in _SPECIALS:
        value = config.get(name)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            found[name] = value
    return found


def _template_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools SGLang gives the template for ``request``: none for ``tool_choice: none``, the named one for a named
    choice, else all; each as its bare function, in the field order of SGLang's ``Function`` model."""
    choice = request.get("tool_choice")
    if choice == "none":
        return []
    named = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    tools = []
    for tool in request.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or (named is not None and function.get("name") != named):
            continue
        tools.append(
            {
                "description": function.get("description"),
                "name": function.get("name"),
                "parameters": function.get("parameters"),
                "strict": bool(function.get("strict", False)),
            }
        )
    return tools


class ChatPrompt:
    """Renders chat requests for one model; the template and special tokens are read once, on first use."""

    def __init__(self, family: ModelFamily, model_path: str, model_uid: str) -> None:
        self.family, self.model_path, self.model_uid = family, model_path, model_uid
        self._template: str | None = None
        self._specials: dict[str, str] = {}

    def render(self, request: dict[str, Any]) -> str:
        """The prompt text of chat ``request`` (a forced tool call counts with the prompt it is sent with)."""
        if self._template is None:
            self._template = find_chat_template(self.family, self.model_path) or ""
            self._specials = special_tokens(self.model_path)
        if not self._template:
            raise InvalidRequest(
                f"model {self.model_uid!r} has no chat template, so its chat prompt cannot be counted", param="messages"
            )
        forced = forced_tool_call(request)
        if forced is not None:
            request = forced.request
        keep_parts = bool(_LOOPS_OVER_PARTS.search(self._template))
        messages = history_for_template(
            [self._content(message, n, keep_parts) for n, message in enumerate(request["messages"])], renders_tools=True
        )
        kwargs = server_template_kwargs(request)  # a reserved name is a 400 there, as for the server's chat
        limits = RenderLimits.for_context(self.family.context_length)
        tools = _template_tools(request)
        if not tools:
            return render(
                self._template, messages, special_tokens=self._specials, template_kwargs=kwargs, limits=limits
            )
        try:
            return render(
                self._template,
                messages,
                tools=tools,
                special_tokens=self._specials,
                template_kwargs=kwargs,
                limits=limits,
            )
        except TemplateLimitExceeded:
            raise
        except ChatTemplateError:  # SGLang retries the same way when a template wants the OpenAI tool shape
            wrapped = [{"function": tool} for tool in tools]
            return render(
                self._template,
                messages,
                tools=wrapped,
                special_tokens=self._specials,
                template_kwargs=kwargs,
                limits=limits,
            )

    @staticmethod
    def _content(message: dict[str, Any], index: int, keep_parts: bool) -> dict[str, Any]:
        content = message.get("content")
        if not isinstance(content, list):
            return message
        kinds = {part.get("type") for part in content if isinstance(part, dict)}
        if kinds - {"text", "input_text"}:
            # requests with images are counted by the server (SGLangEngine.count_tokens), never rendered here
            raise UnsupportedOption(
                f"content parts of types {sorted(str(k) for k in kinds - {'text', 'input_text'})} cannot be "
                "rendered here; only text is",
                param=f"messages[{index}]",
            )
        if keep_parts:
            return message
        return {**message, "content": " ".join(str(part.get("text", "")) for part in content)}
