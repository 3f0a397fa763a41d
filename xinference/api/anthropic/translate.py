"""The Anthropic Messages API translated into chat completions, which every engine already serves.

The system prompt becomes a system message, ``tool_use`` blocks become assistant ``tool_calls``, ``tool_result``
blocks become ``tool`` messages, ``thinking`` blocks become ``reasoning_content``, images become ``image_url`` parts.
No engine learns this API. Blocks are checked here one by one so that a malformed request is a 400 naming the block
(``messages[2].content[0]``), in Anthropic's error shape. The request models (:mod:`.protocol`) only hold the
shapes; the service (:mod:`.serving`) calls :func:`messages_to_chat` and :func:`count_tokens_to_chat`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from xinference.api.anthropic.mcp import McpServerSpec, parse_mcp_servers
from xinference.api.errors import validation_message
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.api.openai.chat.tools import check_parameters_schema, check_tool_name, function_tool
from xinference.errors import InvalidRequest, UnsupportedOption

if TYPE_CHECKING:
    from xinference.api.anthropic.protocol import (
        AnthropicMessage,
        CountTokensRequest,
        MessagesInput,
        MessagesRequest,
    )

__all__ = ["ChatTranslation", "count_tokens_to_chat", "messages_to_chat"]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
#: Block types of Anthropic's API that have no meaning for a self-hosted model.
_UNSUPPORTED_BLOCKS = frozenset(
    {
        "document",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "container_upload",
    }
)


@dataclass
class ChatTranslation:
    """What a Messages request becomes: chat parameters, and where each of its images is in the request
    (``messages[0].content[1]``), in the order of the chat messages' image parts: the caller checks the model's
    vision ability, which the protocol layer cannot see, and names a bad image by its block."""

    params: dict[str, Any]
    image_params: list[str] = field(default_factory=list)
    #: the MCP connector's servers, and then the first turn's ``tool_choice`` in chat form (an MCP tool's name is
    #: resolved once the servers' tools are listed)
    mcp: list[McpServerSpec] = field(default_factory=list)
    tool_choice: Any = None


class _Conversation:
    """Builds chat messages from Anthropic turns, checking each block and the tool_use/tool_result pairing."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.image_params: list[str] = []
        self.pending_calls: dict[str, str] = {}  # tool_use ids of the previous assistant turn → where they were

    def add(self, index: int, message: AnthropicMessage, last: bool) -> None:
        where = f"messages[{index}]"
        blocks = [{"type": "text", "text": message.content}] if isinstance(message.content, str) else message.content
        if not blocks and not (last and message.role == "assistant"):
            raise InvalidRequest(f"{where}.content is empty: send at least one content block", param=where)
        if message.role == "user":
            self._user(where, blocks)
        else:
            self._assistant(where, blocks, last)

    def finish(self) -> None:
        self._require_results(None)

    def _require_results(self, answered: set[str] | None) -> None:
        missing = [i for i in self.pending_calls if answered is None or i not in answered]
        if missing and answered is not None:
            where = self.pending_calls[missing[0]]
            raise InvalidRequest(
                f"tool_use id {missing[0]!r} ({where}) has no tool_result block in the next user message; answer "
                "every tool_use with a tool_result",
                param=where,
            )
        self.pending_calls = {}

    def _user(self, where: str, blocks: list[dict[str, Any]]) -> None:
        parts: list[dict[str, Any]] = []
        answered: set[str] = set()
        tool_messages: list[dict[str, Any]] = []
        # images of tool results and of the user's own parts, kept apart: the tool messages come first in chat
        tool_images: list[str] = []
        images: list[str] = []
        for n, block in enumerate(blocks):
            at = f"{where}.content[{n}]"
            kind = _block_type(block, at)
            if kind == "tool_result":
                tool_messages.append(self._tool_result(block, at, answered, tool_images))
            elif kind in ("text", "image"):
                parts.append(self._part(block, kind, at, images))
            else:
                _refuse_block(kind, at, "user")
        self._require_results(answered)
        self.image_params += tool_images + images
        self.messages.extend(tool_messages)
        if parts:
            content: Any = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
            self.messages.append({"role": "user", "content": content})

    def _tool_result(self, block: dict[str, Any], at: str, answered: set[str], images: list[str]) -> dict[str, Any]:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidRequest("a tool_result block needs the tool_use_id it answers", param=f"{at}.tool_use_id")
        if call_id not in self.pending_calls:
            raise InvalidRequest(
                f"tool_result for tool_use_id {call_id!r} has no matching tool_use block in the previous assistant "
                "message",
                param=f"{at}.tool_use_id",
            )
        if call_id in answered:
            raise InvalidRequest(f"tool_use_id {call_id!r} is answered twice", param=f"{at}.tool_use_id")
        answered.add(call_id)
        raw = block.get("content")
        if raw is None:
            text: Any = ""
        elif isinstance(raw, str):
            text = raw
        elif isinstance(raw, list):
            inner = [
                self._part(b, _block_type(b, f"{at}.content[{i}]"), f"{at}.content[{i}]", images)
                for i, b in enumerate(raw)
            ]
            text = inner if any(p["type"] != "text" for p in inner) else "\n".join(p["text"] for p in inner)
        else:
            raise InvalidRequest(
                "tool_result content must be a string or a list of text and image blocks", param=f"{at}.content"
            )
        if block.get("is_error") and isinstance(text, str):
            text = f"Error: {text}"
        return {"role": "tool", "tool_call_id": call_id, "content": text}

    def _part(self, block: dict[str, Any], kind: str, at: str, images: list[str] | None = None) -> dict[str, Any]:
        """The chat part of a text or image block; an image's place ``at`` is appended to ``images``."""
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise InvalidRequest("a text block needs a 'text' string", param=f"{at}.text")
            return {"type": "text", "text": text}
        if kind != "image":
            raise InvalidRequest(f"a {kind!r} block cannot appear here; use text or image blocks", param=at)
        if images is not None:
            images.append(at)
        return {"type": "image_url", "image_url": {"url": _image_url(block.get("source"), f"{at}.source")}}

    def _assistant(self, where: str, blocks: list[dict[str, Any]], last: bool) -> None:
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        flushed = False
        self._require_results(set())  # two assistant turns in a row: the first one's calls were never answered
        for n, block in enumerate(blocks):
            at = f"{where}.content[{n}]"
            kind = _block_type(block, at)
            if kind == "text":
                texts.append(self._part(block, "text", at)["text"])
            elif kind == "thinking":
                value = block.get("thinking")
                if not isinstance(value, str):
                    raise InvalidRequest("a thinking block needs a 'thinking' string", param=f"{at}.thinking")
                thinking.append(value)
            elif kind == "redacted_thinking":
                continue  # opaque data of Anthropic's own models; nothing a local model can read
            elif kind == "tool_use":
                calls.append(self._tool_use(block, at, last))
            elif kind == "mcp_tool_use":
                calls.append(_mcp_call(block, at))
            elif kind == "mcp_tool_result":
                # the platform ran the call: the assistant turn so far, then its result, and the turn goes on
                self._flush(texts, thinking, calls)
                texts, thinking, calls, flushed = [], [], [], True
                self.messages.append(_mcp_result(block, at))
            else:
                _refuse_block(kind, at, "assistant")
        if texts or thinking or calls or not flushed:
            self._flush(texts, thinking, calls)

    def _flush(self, texts: list[str], thinking: list[str], calls: list[dict[str, Any]]) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
        if thinking:
            message["reasoning_content"] = "".join(thinking)
        if calls:
            message["tool_calls"] = calls
        self.messages.append(message)

    def _tool_use(self, block: dict[str, Any], at: str, last: bool) -> dict[str, Any]:
        if last:
            raise InvalidRequest("the last message cannot end with a tool_use block: send its tool_result", param=at)
        call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidRequest("a tool_use block needs an 'id'", param=f"{at}.id")
        if call_id in self.pending_calls:
            raise InvalidRequest(f"tool_use id {call_id!r} is used twice", param=f"{at}.id")
        check_tool_name(name, f"{at}.name")
        if not isinstance(arguments, dict):
            raise InvalidRequest("a tool_use block's 'input' must be an object", param=f"{at}.input")
        self.pending_calls[call_id] = at
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }


def _mcp_call(block: dict[str, Any], at: str) -> dict[str, Any]:
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise InvalidRequest("an mcp_tool_use block needs an 'id' and a 'name'", param=at)
    if not isinstance(arguments, dict):
        raise InvalidRequest("an mcp_tool_use block's 'input' must be an object", param=f"{at}.input")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _mcp_result(block: dict[str, Any], at: str) -> dict[str, Any]:
    call_id, content = block.get("tool_use_id"), block.get("content")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest("an mcp_tool_result block needs its tool_use_id", param=f"{at}.tool_use_id")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise InvalidRequest("an mcp_tool_result's content is a string or text blocks", param=f"{at}.content")
    if block.get("is_error"):
        content = f"Error: {content}"
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _block_type(block: object, at: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise InvalidRequest("a content block must be an object with a 'type'", param=at)
    kind: str = block["type"]
    return kind


def _refuse_block(kind: str, at: str, role: str) -> None:
    if kind in _UNSUPPORTED_BLOCKS:
        raise UnsupportedOption(f"content block type {kind!r} is not supported by this server", param=at)
    allowed = "text, image and tool_result" if role == "user" else "text, thinking and tool_use"
    raise InvalidRequest(
        f"content block type {kind[:40]!r} cannot appear in a {role} message ({allowed} can)", param=at
    )


def _image_url(source: object, at: str) -> str:
    if not isinstance(source, dict):
        raise InvalidRequest("an image block needs a 'source' object", param=at)
    kind = source.get("type")
    if kind == "base64":
        media, data = source.get("media_type"), source.get("data")
        if media not in _IMAGE_TYPES:
            raise InvalidRequest(
                f"image media_type must be one of {', '.join(sorted(_IMAGE_TYPES))}", param=f"{at}.media_type"
            )
        if not isinstance(data, str) or not data:
            raise InvalidRequest("a base64 image source needs its 'data'", param=f"{at}.data")
        return f"data:{media};base64,{data}"
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidRequest("a url image source needs an http(s) 'url'", param=f"{at}.url")
        return url
    raise InvalidRequest(
        f"image source type {str(kind)[:40]!r} is not supported: use 'base64' or 'url'", param=f"{at}.type"
    )


def _system_text(request: MessagesInput) -> str | None:
    if request.system is None or isinstance(request.system, str):
        return request.system or None
    texts = []
    for n, block in enumerate(request.system):
        if _block_type(block, f"system[{n}]") != "text" or not isinstance(block.get("text"), str):
            raise InvalidRequest("system blocks must be text blocks with a 'text' string", param=f"system[{n}]")
        texts.append(block["text"])
    return "\n".join(texts) or None


def _chat_tools(request: MessagesInput) -> tuple[list[dict[str, Any]] | None, Any, bool | None]:
    """(chat tools, chat tool_choice, parallel_tool_calls)."""
    tools, names = [], set()
    for n, tool in enumerate(request.tools or []):
        at = f"tools[{n}]"
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise UnsupportedOption(
                f"tool type {str(kind)[:60]!r} (a tool Anthropic runs on its servers) is not supported; define "
                "custom tools with name, description and input_schema",
                param=f"{at}.type",
            )
        name = check_tool_name(tool.get("name"), f"{at}.name")
        if name in names:
            raise InvalidRequest(f"tool name {name!r} is defined twice", param=f"{at}.name")
        names.add(name)
        if "input_schema" not in tool:
            raise InvalidRequest("a tool needs an 'input_schema'", param=f"{at}.input_schema")
        schema = check_parameters_schema(tool["input_schema"], f"{at}.input_schema")
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidRequest("a tool's description must be a string", param=f"{at}.description")
        tools.append(function_tool(name, description, schema))
    choice, parallel = _chat_tool_choice(request, names, _has_mcp(request))
    return tools or None, choice, parallel


def _has_mcp(request: MessagesInput) -> bool:
    return bool(getattr(request, "mcp_servers", None))


def _chat_tool_choice(request: MessagesInput, names: set[str], mcp: bool = False) -> tuple[Any, bool | None]:
    """The chat ``tool_choice``; with MCP servers, ``any`` and ``tool`` may aim at their tools (a named MCP tool is
    checked once they are listed)."""
    if request.tool_choice is None:
        return None, None
    kind = request.tool_choice.get("type")
    parallel = False if request.tool_choice.get("disable_parallel_tool_use") else None
    if kind in ("any", "tool") and not names and not mcp:
        raise InvalidRequest(f"tool_choice {kind!r} needs tools", param="tool_choice")
    if kind == "auto":
        return ("auto" if names or mcp else None), parallel
    if kind == "none":
        return ("none" if names or mcp else None), None
    if kind == "any":
        return "required", parallel
    if kind == "tool":
        name = request.tool_choice.get("name")
        if mcp and isinstance(name, str) and name not in names:
            return {"type": "function", "function": {"name": name}}, parallel
        if name not in names:
            raise InvalidRequest(
                f"tool_choice names tool {str(name)[:80]!r}, which is not in 'tools'", param="tool_choice.name"
            )
        return {"type": "function", "function": {"name": name}}, parallel
    raise InvalidRequest(
        f"unknown tool_choice type {str(kind)[:40]!r}: use auto, any, tool or none", param="tool_choice.type"
    )


def _template_kwargs(request: MessagesInput) -> dict[str, Any] | None:
    if request.thinking is None:
        return None
    kind = request.thinking.get("type")
    if kind in ("enabled", "adaptive"):
        budget = request.thinking.get("budget_tokens")
        if kind == "enabled" and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise InvalidRequest("thinking.budget_tokens must be a positive integer", param="thinking.budget_tokens")
        return {"enable_thinking": True}
    if kind == "disabled":
        return {"enable_thinking": False}
    raise InvalidRequest(f"unknown thinking type {str(kind)[:40]!r}: use enabled or disabled", param="thinking.type")


def _conversation(request: MessagesInput) -> _Conversation:
    conversation = _Conversation()
    system = _system_text(request)
    if system is not None:
        conversation.messages.append({"role": "system", "content": system})
    last = len(request.messages) - 1
    for index, message in enumerate(request.messages):
        conversation.add(index, message, index == last)
    conversation.finish()
    return conversation


def _chat_request(request: MessagesInput, **sampling: Any) -> ChatTranslation:
    conversation = _conversation(request)
    tools, tool_choice, parallel = _chat_tools(request)
    mcp = parse_mcp_servers(getattr(request, "mcp_servers", None))
    if mcp:  # the turns run as streams; the MCP tools join the client's per turn
        sampling = {**sampling, "stream": True, "stream_options": {"include_usage": True}}
    try:
        chat = ChatCompletionRequest.model_validate(
            dict(
                model=request.model,
                messages=conversation.messages,
                tools=tools,
                tool_choice=tool_choice if not mcp or (tools and not isinstance(tool_choice, dict)) else None,
                parallel_tool_calls=parallel,
                chat_template_kwargs=_template_kwargs(request),
                **sampling,
            )
        )
    except ValidationError as exc:  # our translation broke a chat rule: still the request's fault
        message, field = validation_message(list(exc.errors()))
        raise InvalidRequest(message, param=field) from None
    return ChatTranslation(chat.to_engine_params(), conversation.image_params, mcp, tool_choice)


def messages_to_chat(request: MessagesRequest) -> ChatTranslation:
    """The chat-completions parameters of this request (usage always reported on streams)."""
    if (
        request.thinking
        and isinstance(request.thinking.get("budget_tokens"), int)
        and request.thinking["budget_tokens"] >= request.max_tokens
    ):
        raise InvalidRequest("thinking.budget_tokens must be less than max_tokens", param="thinking.budget_tokens")
    sampling: dict[str, Any] = {"max_tokens": request.max_tokens, "stream": request.stream}
    for ours, theirs in (
        ("stop_sequences", "stop"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
    ):
        value = getattr(request, ours)
        if value is not None:
            sampling[theirs] = value
    if request.stream:
        sampling["stream_options"] = {"include_usage": True}
    response_format = _response_format(request)
    if response_format is not None:
        sampling["response_format"] = response_format
    return _chat_request(request, **sampling)


def _response_format(request: MessagesRequest) -> dict[str, Any] | None:
    """``output_config.format`` (structured output) as chat's ``response_format``; ``effort`` is a hint that
    local models have no use for."""
    fmt = (request.output_config or {}).get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise InvalidRequest(
            "output_config.format must be {'type': 'json_schema', 'schema': {...}}", param="output_config.format"
        )
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"], "strict": True}}


def count_tokens_to_chat(request: CountTokensRequest) -> ChatTranslation:
    """The chat-completions parameters of a ``count_tokens`` request: the same conversation, without sampling."""
    return _chat_request(request)
