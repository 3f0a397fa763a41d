"""Shapes of the Anthropic Messages API (``POST /v1/messages`` and ``/v1/messages/count_tokens``): the request
models and the bodies of their answers.

A request's translation into the chat-completions parameters every engine already serves is
:mod:`xinference.api.anthropic.translate` (``to_chat`` hands the request to it); content blocks are checked there,
one by one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.anthropic.translate import ChatTranslation, count_tokens_to_chat, messages_to_chat
from xinference.api.protocol import OpenAIRequest, ResponseBody

__all__ = [
    "AnthropicMessage",
    "CountTokensRequest",
    "Message",
    "MessagesInput",
    "MessagesRequest",
    "TokenCount",
]


class AnthropicMessage(BaseModel):
    """One turn: ``user`` or ``assistant``, with a string or a list of content blocks (checked in ``to_chat``)."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: Union[str, list[dict[str, Any]]]

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value == "system":
            raise ValueError(
                "'system' is not a message role here: pass the system prompt in the top-level "
                "'system' field; roles are 'user' and 'assistant'"
            )
        if value not in ("user", "assistant"):
            raise ValueError(f"unknown role {value[:40]!r}: roles are 'user' and 'assistant'")
        return value


class MessagesInput(OpenAIRequest):
    """What both routes share: the conversation, the system prompt, tools and thinking."""

    model: str = Field(min_length=1)
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: Union[str, list[dict[str, Any]], None] = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None


class MessagesRequest(MessagesInput):
    """``POST /v1/messages``."""

    max_tokens: int = Field(ge=1)
    metadata: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    stop_sequences: list[str] | None = Field(default=None, max_length=16)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    #: the MCP connector: ``[{"type": "url", "url", "name", "authorization_token", "tool_configuration"}]``
    mcp_servers: list[dict[str, Any]] | None = None
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not isinstance(value.get("user_id", ""), (str, type(None))):
            raise ValueError("metadata.user_id must be a string")
        return value

    def to_chat(self) -> ChatTranslation:
        """The chat-completions parameters of this request (usage always reported on streams); the translation is
        :func:`xinference.api.anthropic.translate.messages_to_chat`."""
        return messages_to_chat(self)


class CountTokensRequest(MessagesInput):
    """``POST /v1/messages/count_tokens``: the same conversation, counted with the model's own template."""

    def to_chat(self) -> ChatTranslation:
        """The chat-completions parameters of this conversation (see :func:`.translate.count_tokens_to_chat`)."""
        return count_tokens_to_chat(self)


# -- responses (non-streamed; a stream sends the events listed in ``anthropic/stream.py``) -----------------------------
class TextBlock(ResponseBody):
    type: Literal["text"]
    text: str


class ThinkingBlock(ResponseBody):
    type: Literal["thinking"]
    thinking: str
    signature: str


class ToolUseBlock(ResponseBody):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class MessageUsage(ResponseBody):
    input_tokens: int
    output_tokens: int


ContentBlock = Annotated[Union[TextBlock, ThinkingBlock, ToolUseBlock], Field(discriminator="type")]


class Message(ResponseBody):
    """The body of a non-streamed ``POST /v1/messages``: thinking, then text, then tool_use blocks."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal"] | None
    stop_sequence: str | None = None
    usage: MessageUsage


class TokenCount(ResponseBody):
    """The body of ``POST /v1/messages/count_tokens``."""

    input_tokens: int
