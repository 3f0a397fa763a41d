"""The OpenAI Responses API translated into chat completions, which every engine already serves.

A request becomes chat-completions parameters (:func:`responses_to_chat`), given the chat messages of the
conversation it continues (``previous_response_id``, looked up by the service): input items become chat messages
(``function_call`` items become assistant ``tool_calls``, ``function_call_output`` items ``tool`` messages,
``reasoning`` items ``reasoning_content``), function tools become chat tools, ``text.format`` becomes
``response_format``. Items are checked one by one so that a malformed request is a 400 naming the item
(``input[3]``). The request model (:mod:`.protocol`) only holds the shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from pydantic import ValidationError

from xinference.api.errors import validation_message
from xinference.api.openai.chat.protocol import ChatCompletionRequest
from xinference.api.openai.chat.tools import check_parameters_schema, check_tool_name, function_tool
from xinference.api.openai.responses.mcp import ResponsesMcp, input_item, parse_mcp_tool
from xinference.errors import InvalidRequest, UnsupportedOption

if TYPE_CHECKING:
    from xinference.api.openai.responses.protocol import ResponsesRequest

__all__ = ["ResponsesTranslation", "responses_to_chat"]

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class ResponsesTranslation:
    """What a Responses request becomes: chat parameters; the chat messages this request adds to the conversation
    (kept for ``previous_response_id``); where each image of this request is (``input[0].content[1]``), in the
    order of the chat messages' image parts (the caller checks vision and names a bad image by its part)."""

    params: dict[str, Any]
    added: list[dict[str, Any]] = field(default_factory=list)
    image_params: list[str] = field(default_factory=list)
    #: the request's ``mcp`` tools and MCP input items (falsy when it has none)
    mcp: ResponsesMcp = field(default_factory=ResponsesMcp)
    #: with MCP tools: the system message of ``instructions`` (not part of the conversation kept), and the
    #: ``tool_choice`` of the first turn in chat form (an MCP tool's is resolved once the tools are listed)
    prefix: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None


class _Items:
    """Builds chat messages from input items, checking each one and the function_call pairing."""

    def __init__(self, history: list[dict[str, Any]], mcp: ResponsesMcp) -> None:
        self.messages: list[dict[str, Any]] = []
        self.image_params: list[str] = []
        self.call_ids = {c.get("id") for m in history for c in m.get("tool_calls") or ()}
        self.mcp = mcp

    def add(self, n: int, item: object) -> None:
        at = f"input[{n}]"
        if not isinstance(item, dict):
            raise InvalidRequest("an input item must be an object", param=at)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            self._message(item, at)
        elif kind == "function_call":
            self._function_call(item, at)
        elif kind == "function_call_output":
            self._function_output(item, at)
        elif kind == "reasoning":
            self._reasoning(item, at)
        elif kind in ("mcp_list_tools", "mcp_call", "mcp_approval_request", "mcp_approval_response"):
            self.messages += input_item(self.mcp, self._assistant, item, at)
        elif isinstance(kind, str):
            raise UnsupportedOption(
                f"input item type {kind[:60]!r} is not supported: send messages, function_call, "
                "function_call_output, reasoning and MCP (mcp_list_tools, mcp_call, mcp_approval_request, "
                "mcp_approval_response) items",
                param=f"{at}.type",
            )
        else:
            raise InvalidRequest("an input item needs a 'type' (or a 'role' for a message)", param=at)

    def _assistant(self) -> dict[str, Any]:
        """The assistant message the next output-side item belongs to (a new one after any other role)."""
        if not self.messages or self.messages[-1]["role"] != "assistant":
            self.messages.append({"role": "assistant", "content": ""})
        return self.messages[-1]

    def _message(self, item: dict[str, Any], at: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise InvalidRequest(
                f"unknown role {str(role)[:40]!r}: use user, system, developer or assistant", param=f"{at}.role"
            )
        content = self._content(item.get("content"), f"{at}.content", assistant=role == "assistant")
        if role == "assistant":
            last = self._assistant()
            if last["content"] or last.get("tool_calls"):
                self.messages.append(last := {"role": "assistant", "content": ""})
            last["content"] = content if isinstance(content, str) else "".join(p["text"] for p in content)
        else:
            self.messages.append({"role": _ROLES[role], "content": content})

    def _content(self, raw: object, at: str, assistant: bool = False) -> Union[str, list[dict[str, Any]]]:
        if isinstance(raw, str):
            return raw
        if not isinstance(raw, list):
            raise InvalidRequest("message content must be a string or a list of content parts", param=at)
        parts: list[dict[str, Any]] = []
        for i, part in enumerate(raw):
            where = f"{at}[{i}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "refusal" and isinstance(part.get("refusal"), str):
                parts.append({"type": "text", "text": part["refusal"]})
            elif kind == "input_image" and not assistant:
                parts.append(self._image(part, where))
            elif kind in ("input_file", "input_audio"):
                raise UnsupportedOption(f"content part type {kind!r} is not supported", param=where)
            else:
                raise InvalidRequest(
                    f"invalid content part {str(kind)[:40]!r}: use input_text (output_text for "
                    "assistant messages) with a 'text', or input_image",
                    param=where,
                )
        if all(p["type"] == "text" for p in parts):
            return "\n".join(p["text"] for p in parts)
        return parts

    def _image(self, part: dict[str, Any], at: str) -> dict[str, Any]:
        url = part.get("image_url")
        if part.get("file_id") and not url:
            raise UnsupportedOption(
                "images by file_id are not supported; send image_url (a URL or a data URL)", param=f"{at}.file_id"
            )
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "data:image/")):
            raise InvalidRequest(
                "input_image needs an image_url (http(s) or a data:image/... URL)", param=f"{at}.image_url"
            )
        self.image_params.append(at)
        image: dict[str, Any] = {"url": url}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}

    def _function_call(self, item: dict[str, Any], at: str) -> None:
        call_id, arguments = item.get("call_id"), item.get("arguments")
        name = check_tool_name(item.get("name"), f"{at}.name")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidRequest("a function_call item needs its call_id", param=f"{at}.call_id")
        if not isinstance(arguments, str):
            raise InvalidRequest("a function_call item's arguments must be a JSON string", param=f"{at}.arguments")
        if call_id in self.call_ids:
            raise InvalidRequest(f"call_id {call_id!r} is used twice", param=f"{at}.call_id")
        self.call_ids.add(call_id)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        self._assistant().setdefault("tool_calls", []).append(call)

    def _function_output(self, item: dict[str, Any], at: str) -> None:
        call_id, output = item.get("call_id"), item.get("output")
        if call_id not in self.call_ids:
            raise InvalidRequest(
                f"no function_call with call_id {str(call_id)[:80]!r} precedes this "
                "function_call_output (in this input or the previous response)",
                param=f"{at}.call_id",
            )
        content = output if isinstance(output, str) else self._content(output, f"{at}.output")
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def _reasoning(self, item: dict[str, Any], at: str) -> None:
        texts = []
        for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
            for i, part in enumerate(item.get(key) or []):
                if not isinstance(part, dict) or part.get("type") != part_type or not isinstance(part.get("text"), str):
                    raise InvalidRequest(
                        f"reasoning {key} parts are {part_type} objects with a 'text'", param=f"{at}.{key}[{i}]"
                    )
                texts.append(part["text"])
            if texts:
                break  # the full reasoning text when present, else its summary
        last = self._assistant()
        if last["content"] or last.get("tool_calls"):
            self.messages.append(last := {"role": "assistant", "content": ""})
        last["reasoning_content"] = "\n".join(texts)


def _refuse_unsupported(request: ResponsesRequest) -> None:
    if request.background:
        raise UnsupportedOption("background responses are not supported; stream instead", param="background")
    if request.truncation == "auto":
        raise UnsupportedOption(
            "truncation 'auto' is not supported: a conversation that does not fit the model's context is a 400",
            param="truncation",
        )
    if request.top_logprobs:
        raise UnsupportedOption("top_logprobs is not supported on /v1/responses", param="top_logprobs")
    for name in ("conversation", "prompt"):
        if (request.model_extra or {}).get(name) is not None:
            raise UnsupportedOption(f"{name} is not supported; use previous_response_id", param=name)


def _chat_tools(request: ResponsesRequest, mcp: ResponsesMcp) -> tuple[list[dict[str, Any]] | None, Any]:
    tools, names = [], set()
    for n, tool in enumerate(request.tools or []):
        at = f"tools[{n}]"
        if tool.get("type") == "mcp":
            mcp.specs.append(parse_mcp_tool(tool, at))
            continue
        if tool.get("type") != "function":
            raise UnsupportedOption(
                f"tool type {str(tool.get('type'))[:60]!r} is not supported: define function tools or mcp tools",
                param=f"{at}.type",
            )
        name = check_tool_name(tool.get("name"), f"{at}.name")
        if name in names:
            raise InvalidRequest(f"tool name {name!r} is defined twice", param=f"{at}.name")
        names.add(name)
        raw = tool.get("parameters")
        schema = _EMPTY_SCHEMA if raw is None else check_parameters_schema(raw, f"{at}.parameters")
        strict = tool.get("strict")
        tools.append(function_tool(name, tool.get("description"), schema, strict if strict is not None else None))
    return tools or None, _chat_tool_choice(request, names, mcp)


def _chat_tool_choice(request: ResponsesRequest, names: set[str], mcp: ResponsesMcp) -> Any:
    choice = request.tool_choice
    if choice is None or choice in ("auto", "none"):
        return choice if names or mcp.specs else None
    if choice == "required":
        if not names and not mcp.specs:
            raise InvalidRequest("tool_choice 'required' needs tools", param="tool_choice")
        return choice
    if isinstance(choice, dict) and choice.get("type") == "mcp":
        if not isinstance(choice.get("server_label"), str) or (
            choice.get("name") is not None and not isinstance(choice.get("name"), str)
        ):
            raise InvalidRequest("an mcp tool_choice is {'type': 'mcp', 'server_label', 'name'}", param="tool_choice")
        mcp.choice = choice
        return "required"  # narrowed to the named tool once the server's tools are listed
    if isinstance(choice, dict) and choice.get("type") == "function":
        if choice.get("name") not in names:
            raise InvalidRequest(
                f"tool_choice names function {str(choice.get('name'))[:80]!r}, which is not in 'tools'",
                param="tool_choice.name",
            )
        return {"type": "function", "function": {"name": choice["name"]}}
    raise UnsupportedOption(
        "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name'}", param="tool_choice"
    )


def _response_format(request: ResponsesRequest) -> dict[str, Any] | None:
    fmt = (request.text or {}).get("format")
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") != "json_schema":
        raise InvalidRequest(
            f"unknown text.format type {str(fmt.get('type'))[:40]!r}: use text, json_object or json_schema",
            param="text.format.type",
        )
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not name:
        raise InvalidRequest("a json_schema text.format needs a 'name'", param="text.format.name")
    if not isinstance(schema, dict):
        raise InvalidRequest("a json_schema text.format needs a 'schema' object", param="text.format.schema")
    spec: dict[str, Any] = {"name": name, "schema": schema}
    for key in ("strict", "description"):
        if fmt.get(key) is not None:
            spec[key] = fmt[key]
    return {"type": "json_schema", "json_schema": spec}


def _template_kwargs(request: ResponsesRequest) -> dict[str, Any] | None:
    effort = (request.reasoning or {}).get("effort")
    if effort is None:
        return None
    if effort not in ("none", "minimal", "low", "medium", "high", "xhigh"):
        raise InvalidRequest(f"unknown reasoning.effort {str(effort)[:40]!r}", param="reasoning.effort")
    return {"enable_thinking": effort != "none"}


def responses_to_chat(request: ResponsesRequest, history: list[dict[str, Any]]) -> ResponsesTranslation:
    """Chat parameters for this request after ``history`` (the chat messages of the previous response's
    conversation, without its instructions, which are not carried over)."""
    _refuse_unsupported(request)
    mcp = ResponsesMcp()
    tools, tool_choice = _chat_tools(request, mcp)
    items = _Items(history, mcp)
    raw = [{"role": "user", "content": request.input}] if isinstance(request.input, str) else request.input
    for n, item in enumerate(raw):
        items.add(n, item)
    messages = ([{"role": "system", "content": request.instructions}] if request.instructions else []) + history
    if not items.messages and not history and not mcp.resume:
        raise InvalidRequest("input is empty", param="input")
    mcp.check()
    if mcp.resume and not history:
        raise InvalidRequest(
            f"mcp_approval_response {mcp.resume[0].approval_request_id[:80]!r} answers a request of an earlier "
            "response: give its previous_response_id",
            param="previous_response_id",
        )
    # With MCP tools the chat rules are checked on the client's tools only; the MCP ones join them per turn.
    checked_choice = tool_choice if not mcp or (tools and not isinstance(request.tool_choice, dict)) else None
    fields: dict[str, Any] = dict(
        model=request.model,
        messages=messages + items.messages,
        tools=tools,
        tool_choice=checked_choice,
        parallel_tool_calls=request.parallel_tool_calls,
        response_format=_response_format(request),
        chat_template_kwargs=_template_kwargs(request),
        max_tokens=request.max_output_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        stream=request.stream,
    )
    if request.stream or mcp:  # a request with MCP tools runs its turns as streams, whether or not it streams
        fields["stream_options"] = {"include_usage": True}
        fields["stream"] = True
    try:
        chat = ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:  # the translation broke a chat rule: still the request's fault
        message, where = validation_message(list(exc.errors()))
        raise InvalidRequest(message, param=where) from None
    prefix = messages[: len(messages) - len(history)]
    return ResponsesTranslation(chat.to_engine_params(), items.messages, items.image_params, mcp, prefix, tool_choice)
