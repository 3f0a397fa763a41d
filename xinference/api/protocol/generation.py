"""Request models of ``/v1/chat/completions`` and ``/v1/completions``.

Fields follow OpenAI's documented order; our extensions (llama.cpp-style sampling knobs) are grouped at the end.
Each request converts itself into the engine's plain-dict parameters with ``to_engine_params``.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.protocol.common import OpenAIRequest, ResponseBody
from xinference.errors import UnsupportedOption

__all__ = [
    "ChatCompletion", "ChatCompletionRequest", "ChatMessage", "Completion", "CompletionRequest", "StreamOptions",
    "Usage",
]


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
    "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "presence_penalty", "seed", "stop", "stream",
    "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "ignore_eos",
)


class ChatCompletionRequest(_SamplingRequest):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    # -- extensions --------------------------------------------------------------------------------------------
    chat_template_kwargs: dict[str, Any] | None = None
    #: reasoning models: think first (default) or answer at once; also read from ``chat_template_kwargs``
    enable_thinking: bool | None = None

    def to_engine_params(self) -> dict[str, Any]:
        params = self._common_params(
            _COMMON + ("top_logprobs", "response_format", "tools", "tool_choice", "parallel_tool_calls",
                       "chat_template_kwargs", "enable_thinking")
        )
        params["messages"] = [m.model_dump(exclude_none=True) for m in self.messages]
        if self.max_completion_tokens is not None and self.max_tokens is None:
            params["max_tokens"] = self.max_completion_tokens
        return params


class CompletionRequest(_SamplingRequest):
    """``POST /v1/completions`` (one prompt string per request)."""

    prompt: str | list[str]
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


class ChatCompletion(ResponseBody):
    """The body of a non-streamed ``POST /v1/chat/completions``."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = None


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
