"""The :class:`Call` every client request is, and the small readers the call modules share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Literal, TypeVar, Union
from urllib.parse import quote

__all__ = ["Call", "Message", "NGpu", "T", "as_dict", "as_list", "nothing", "quoted", "present", "unchanged"]

T = TypeVar("T")

#: One chat message, OpenAI style: ``{"role": "user", "content": "Hi"}``.
Message = Mapping[str, Any]
#: How many GPUs a model gets: ``"auto"``, ``None`` (CPU only) or a count.
NGpu = Union[int, Literal["auto"], None]


def unchanged(body: Any) -> Any:
    return body


def nothing(body: Any) -> None:
    return None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    ``parse`` turns the decoded JSON (the text, with ``text=True``) into the method's result. ``stream``: the
    answer is server-sent events, read chunk by chunk (``parse`` is then unused). ``unbounded_read``: the server
    may take as long as it needs (a launch downloads weights), so no read timeout applies.
    """

    method: str
    path: str
    parse: Callable[[Any], T] = field(default=unchanged)
    json: Any = None
    params: Mapping[str, Any] | None = None
    stream: bool = False
    unbounded_read: bool = False
    text: bool = False
    each: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: a multipart form: its fields (``data``) and files (``files``, httpx's ``[(field, (name, bytes, type))]``)
    data: Mapping[str, Any] | None = None
    files: Sequence[tuple[str, tuple[str, bytes, str]]] | None = None
    #: the answer is bytes (audio), given to ``parse`` as they are; streamed: an iterator of byte chunks
    binary: bool = False


def quoted(model_uid: str) -> str:
    """A model uid as one path segment (a uid is user-chosen: ``/`` or ``?`` must not change the route)."""
    return quote(model_uid, safe="")


def present(**values: Any) -> dict[str, Any]:
    """The values that are not None (query parameters and optional body fields)."""
    return {k: v for k, v in values.items() if v is not None}


def as_dict(body: Any) -> dict[str, Any]:
    return body if isinstance(body, dict) else {}


def as_list(body: Any) -> list[dict[str, Any]]:
    return body if isinstance(body, list) else []
