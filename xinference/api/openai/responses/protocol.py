"""Shapes of the OpenAI Responses API: the request of ``POST /v1/responses`` and the bodies of its routes' answers.

A request's translation into chat-completions parameters is :mod:`xinference.api.openai.responses.translate`
(``to_chat`` hands the request to it); input items are checked there, one by one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from xinference.api.openai.responses.translate import ResponsesTranslation, responses_to_chat
from xinference.api.protocol import OpenAIRequest, ResponseBody

__all__ = ["DeletedResponse", "InputItemList", "ResponseObject", "ResponsesRequest"]


class ResponsesRequest(OpenAIRequest):
    """``POST /v1/responses``. Fields follow OpenAI's documented order."""

    model: str = Field(min_length=1)
    input: Union[str, list[Any]]
    include: list[str] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool = True
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    text: dict[str, Any] | None = None
    tool_choice: Union[str, dict[str, Any], None] = None
    tools: list[dict[str, Any]] | None = None
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    background: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    # -- extension (Ollama): how long the model stays loaded after this request ("10m", seconds, -1, 0)
    keep_alive: str | int | float | None = None

    def to_chat(self, history: list[dict[str, Any]]) -> ResponsesTranslation:
        """Chat parameters for this request after ``history``; the translation is
        :func:`xinference.api.openai.responses.translate.responses_to_chat`."""
        return responses_to_chat(self, history)


# -- responses (non-streamed; a stream sends the events listed in ``openai/responses/stream.py``) ----------------------
class OutputText(ResponseBody):
    type: Literal["output_text"]
    text: str
    annotations: list[Any] = Field(default_factory=list)


class ReasoningText(ResponseBody):
    type: Literal["reasoning_text"]
    text: str


class MessageItem(ResponseBody):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: str
    content: list[OutputText]


class ReasoningItem(ResponseBody):
    id: str
    type: Literal["reasoning"]
    summary: list[Any] = Field(default_factory=list)
    content: list[ReasoningText]
    status: str


class FunctionCallItem(ResponseBody):
    id: str
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str = Field(description="the arguments as a JSON string, as the model wrote them")
    status: str


class ResponseUsage(ResponseBody):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: dict[str, int] | None = None
    output_tokens_details: dict[str, int] | None = None


OutputItem = Annotated[Union[MessageItem, ReasoningItem, FunctionCallItem], Field(discriminator="type")]


class ResponseObject(ResponseBody):
    """The body of a non-streamed ``POST /v1/responses`` and of ``GET /v1/responses/{id}``."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["completed", "incomplete", "failed", "in_progress"]
    model: str
    output: list[OutputItem]
    usage: ResponseUsage | None = None
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    previous_response_id: str | None = None
    store: bool = True


class InputItemList(ResponseBody):
    """The body of ``GET /v1/responses/{id}/input_items``: the stored input items, a page at a time."""

    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool


class DeletedResponse(ResponseBody):
    """The body of ``DELETE /v1/responses/{id}``."""

    id: str
    object: Literal["response"]
    deleted: bool
