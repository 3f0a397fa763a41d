"""Request models of ``/v1/chat/completions`` and ``/v1/completions``.

Fields follow OpenAI's documented order; our extensions (llama.cpp-style sampling knobs) are grouped at the end.
Each request converts itself into the engine's plain-dict parameters with ``to_engine_params``.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.errors import InvalidRequest, UnsupportedOption

__all__ = [
    "ChatCompletion",
    "McpCall",
    "ChatCompletionRequest",
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "StreamOptions",
    "Usage",
]


_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatMessage(BaseModel):
    """One message; content parts are passed through to the engine's chat template."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Union[str, list[dict[str, Any]], None] = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class _SamplingRequest(OpenAIRequest):
    model: str = Field(min_length=1)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | int | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    n: int | None = Field(default=None, ge=1)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    user: str | None = None
    # -- extensions (llama.cpp / vLLM sampling) ----------------------------------------------------------------
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repeat_penalty: float | None = Field(default=None, gt=0.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, description="vLLM's name of repeat_penalty")
    ignore_eos: bool | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None
    # -- extension (Xinference): the id ``POST /v1/models/{uid}/requests/{request_id}/abort`` stops the request by
    request_id: str | None = Field(default=None, min_length=1, max_length=256)

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: str | list[str] | None) -> list[str] | None:
        if value is None:
            return None
        stops = [value] if isinstance(value, str) else value
        if len(stops) > 16:
            raise ValueError("at most 16 stop sequences")
        return stops

    def _common_params(self, include: tuple[str, ...]) -> dict[str, Any]:
        # ``n`` reaches the engine only when it asks for several choices: an engine that cannot make them answers a
        # 400 naming ``n`` (engines never see a field they could drop silently).
        params = self.model_dump(include=set(include), exclude_none=True)
        if self.n is not None and self.n > 1:
            params["n"] = self.n
        if self.repetition_penalty is not None:
            if self.repeat_penalty is not None and self.repeat_penalty != self.repetition_penalty:
                raise UnsupportedOption("give repeat_penalty or repetition_penalty, not both", param="repeat_penalty")
            params["repeat_penalty"] = self.repetition_penalty
        if self.stream_options is not None:
            params["stream_options"] = {"include_usage": self.stream_options.include_usage}
        return params


_COMMON = (
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_tokens",
    "presence_penalty",
    "seed",
    "stop",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "ignore_eos",
)


#: chat's ``reasoning_effort``; ``none`` and ``minimal`` ask for an answer without thinking, the others for thinking
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
_NO_THINKING = ("none", "minimal")
#: ``chat_template_kwargs`` keys that already say whether to think (:func:`thinking_enabled` reads them)
_THINKING_KWARGS = ("enable_thinking", "thinking")


class ChatCompletionRequest(_SamplingRequest):
    """``POST /v1/chat/completions``.

    Besides the fields engines use: ``reasoning_effort`` becomes ``enable_thinking`` when the request does not set
    that itself; the deprecated ``functions``/``function_call`` become ``tools``/``tool_choice`` (answers come in
    the tools form); ``audio``, ``modalities`` beyond text and ``prediction`` are a 400 naming the field, since no
    engine here can honour them; ``store``, ``metadata``, ``service_tier``, ``prompt_cache_key`` and
    ``safety_identifier`` are accepted and have nothing to do on a local server.
    """

    messages: list[ChatMessage] = Field(min_length=1)
    audio: Any = None
    function_call: str | dict[str, Any] | None = Field(default=None, description="deprecated: use tool_choice")
    functions: list[dict[str, Any]] | None = Field(default=None, description="deprecated: use tools")
    max_completion_tokens: int | None = Field(default=None, ge=1)
    metadata: dict[str, Any] | None = None
    modalities: list[str] | None = None
    parallel_tool_calls: bool | None = None
    prediction: Any = None
    prompt_cache_key: str | None = None
    reasoning_effort: ReasoningEffort | None = None
    response_format: dict[str, Any] | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    tool_choice: str | dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    # -- extensions --------------------------------------------------------------------------------------------
    chat_template_kwargs: dict[str, Any] | None = None
    #: reasoning models: think first (default) or answer at once; also read from ``chat_template_kwargs``
    enable_thinking: bool | None = None
    #: MCP (doc/mcp.md): configured servers whose tools the model may call, run by the platform ("*": all of them)
    mcp_servers: Union[list[str], Literal["*"], None] = Field(default=None, description='server names, or "*"')
    #: MCP: rounds of tool calls the platform runs before the model must answer (default 8)
    max_tool_rounds: int | None = Field(default=None, ge=1, le=64)

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_servers(cls, value: Union[list[str], str, None]) -> Union[list[str], str, None]:
        if isinstance(value, list):
            if len(value) > 64:
                raise ValueError("at most 64 MCP servers")
            for name in value:
                if not _SERVER_NAME.match(name):
                    raise ValueError(f"invalid MCP server name {name[:80]!r}: use 1-64 letters, digits, '_' or '-'")
        return value

    def to_engine_params(self) -> dict[str, Any]:
        self._refuse_other_outputs()
        params = self._common_params(
            _COMMON
            + ("top_logprobs", "response_format", "parallel_tool_calls", "chat_template_kwargs", "enable_thinking")
        )
        params["messages"] = _tools_form([m.model_dump(exclude_none=True) for m in self.messages])
        tools, tool_choice = self._tools()
        if tools is not None:
            params["tools"] = tools
        if tool_choice is not None:
            params["tool_choice"] = tool_choice
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
            kwargs = self.chat_template_kwargs or {}
            if self.enable_thinking is None and not any(key in kwargs for key in _THINKING_KWARGS):
                params["enable_thinking"] = self.reasoning_effort not in _NO_THINKING
        if self.max_completion_tokens is not None and self.max_tokens is None:
            params["max_tokens"] = self.max_completion_tokens
        return params

    def _refuse_other_outputs(self) -> None:
        """Audio output and predicted outputs exist on OpenAI only; an answer without them would look like
        success, so they are refused."""
        if self.audio is not None:
            raise UnsupportedOption(
                "audio output is not supported: the models served here answer in text; remove 'audio'", param="audio"
            )
        if self.modalities is not None and any(mode != "text" for mode in self.modalities):
            raise UnsupportedOption(
                f"modalities {self.modalities!r} are not supported: the models served here "
                "answer in text only; send ['text'] or leave it out",
                param="modalities",
            )
        if self.prediction is not None:
            raise UnsupportedOption(
                "predicted outputs ('prediction') are not supported by any engine here; remove 'prediction'",
                param="prediction",
            )

    def _tools(self) -> tuple[list[dict[str, Any]] | None, str | dict[str, Any] | None]:
        """``tools``/``tool_choice``, or the deprecated ``functions``/``function_call`` in that form."""
        tools, choice = self.tools, self.tool_choice
        if self.functions is not None:
            if tools is not None:
                raise InvalidRequest("give tools or the deprecated functions, not both", param="functions")
            for n, function in enumerate(self.functions):
                if not isinstance(function.get("name"), str) or not function["name"]:
                    raise InvalidRequest("each function needs a name", param=f"functions[{n}].name")
            tools = [{"type": "function", "function": dict(function)} for function in self.functions]
        if self.function_call is not None:
            if choice is not None:
                raise InvalidRequest(
                    "give tool_choice or the deprecated function_call, not both", param="function_call"
                )
            call = self.function_call
            if call in ("none", "auto"):
                choice = call
            elif isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"]:
                if not tools:
                    raise InvalidRequest(
                        "function_call names a function, but no functions were given", param="function_call"
                    )
                choice = {"type": "function", "function": {"name": call["name"]}}
            else:
                raise InvalidRequest("function_call must be 'none', 'auto' or {'name': ...}", param="function_call")
        return tools, choice


def _tools_form(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deprecated function-calling turns rewritten as tool turns, which every engine and template knows: an
    assistant ``function_call`` becomes a one-entry ``tool_calls``, and a ``function`` message the ``tool`` message
    answering the latest call of that name. Other messages are returned as they are."""
    out: list[dict[str, Any]] = []
    open_calls: dict[str, str] = {}
    for n, message in enumerate(messages):
        call = message.get("function_call")
        if message["role"] == "assistant" and isinstance(call, dict) and not message.get("tool_calls"):
            name = str(call.get("name") or "")
            call_id = open_calls[name] = f"call_fn{n}"
            message = {key: value for key, value in message.items() if key != "function_call"}
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": call.get("arguments") or "{}"},
                }
            ]
        elif message["role"] == "function":
            name = str(message.get("name") or "")
            call_id = open_calls.pop(name, f"call_fn{n}")
            message = {"role": "tool", "tool_call_id": call_id, "name": name, "content": message.get("content") or ""}
        out.append(message)
    return out


class CompletionRequest(_SamplingRequest):
    """``POST /v1/completions`` (one prompt string per request)."""

    prompt: str | list[str]
    best_of: int | None = Field(default=None, ge=1)
    echo: bool | None = None
    suffix: str | None = None

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, value: str | list[str]) -> str:
        if isinstance(value, list):
            if len(value) != 1:
                raise ValueError("send one prompt per request (a list must hold exactly one string)")
            value = value[0]
        return value

    def to_engine_params(self) -> dict[str, Any]:
        if self.echo:
            raise UnsupportedOption("echo is not supported", param="echo")
        if self.suffix:
            raise UnsupportedOption("suffix (fill-in-the-middle) is not supported", param="suffix")
        if self.best_of is not None and self.best_of > 1:
            raise UnsupportedOption(
                "best_of > 1 (several candidates, the best returned) is not supported; use n and pick", param="best_of"
            )
        params = self._common_params(_COMMON)
        params["prompt"] = self.prompt
        return params


# -- responses (non-streamed; a stream sends ``chat.completion.chunk`` / ``text_completion`` frames) -------------------
class Usage(ResponseBody):
    """Token counts of one request."""

    prompt_tokens: int
    completion_tokens: int = 0
    total_tokens: int


class ToolCallFunction(ResponseBody):
    name: str
    arguments: str = Field(description="the arguments as a JSON string, as the model wrote them")


class ToolCall(ResponseBody):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class AssistantMessage(ResponseBody):
    role: Literal["assistant"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    # -- extension: reasoning models' thinking, split from the answer (DeepSeek's name) -------------------------
    reasoning_content: str | None = None


class ChatChoice(ResponseBody):
    index: int
    message: AssistantMessage
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = Field(description="stop, length or tool_calls")


class McpCall(ResponseBody):
    """One MCP tool call the platform ran for the model (extension; in a stream, the ``mcp_call`` of a chunk)."""

    id: str
    server: str | None = Field(description="the MCP server; null for a call to a tool nobody offered")
    name: str
    arguments: str = Field(description="the arguments as a JSON string, as the model wrote them")
    output: str | None = None
    error: str | None = None
    status: Literal["in_progress", "completed", "failed"]


class ChatCompletion(ResponseBody):
    """The body of a non-streamed ``POST /v1/chat/completions``."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = None
    # -- extension: the MCP tool calls the platform ran (requests with mcp_servers, or a model launched with them)
    mcp_calls: list[McpCall] | None = None


class CompletionChoice(ResponseBody):
    index: int
    text: str
    logprobs: dict[str, Any] | None = None
    finish_reason: str | None = Field(description="stop or length")


class Completion(ResponseBody):
    """The body of a non-streamed ``POST /v1/completions``."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
