"""The store behind ``previous_response_id`` and ``GET /v1/responses/{id}``: bounded, in memory, with a TTL.

It lives in the API process: responses are lost when that process restarts, and a cluster keeps them where its
API runs (the supervisor). Each entry holds the response object and the chat messages of its whole conversation
(without the request's instructions), so that a follow-up request needs no other lookup. Entries expire
``ttl`` seconds after they were stored; past ``max_items`` entries or ``max_bytes`` of (estimated) size, the oldest
go first. A request with ``store: false`` keeps nothing here.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["ResponseStore", "StoredResponse"]


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    #: The chat messages of the conversation up to and including this response's output.
    messages: list[dict[str, Any]]
    expires: float
    size: int
    #: The request's own input items, with ids (``GET /v1/responses/{id}/input_items``).
    input_items: list[dict[str, Any]] = field(default_factory=list)
    #: The MCP servers whose tools the conversation listed (an ``mcp_list_tools`` item): not listed again.
    mcp_listed: frozenset[str] = frozenset()


class ResponseStore:
    """Responses by id, oldest evicted first; not thread-safe (used from the API's event loop only)."""

    def __init__(
        self,
        max_items: int = 1000,
        ttl: float = 3600.0,
        max_bytes: int = 64 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_items = max_items
        self.ttl = ttl
        self.max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def put(
        self,
        response: dict[str, Any],
        messages: list[dict[str, Any]],
        input_items: list[dict[str, Any]] | None = None,
        mcp_listed: frozenset[str] = frozenset(),
    ) -> None:
        items = input_items or []
        size = sum(len(json.dumps(part, default=str)) for part in (response, messages, items))
        self.delete(response["id"])
        if size > self.max_bytes:
            return  # larger than the whole store: keeping it would evict everything else
        self._entries[response["id"]] = StoredResponse(
            response, messages, self._clock() + self.ttl, size, items, mcp_listed
        )
        self._bytes += size
        self._expire()
        while self._entries and (len(self._entries) > self.max_items or self._bytes > self.max_bytes):
            self._pop_oldest()

    def get(self, response_id: str) -> StoredResponse | None:
        """The entry, or None when it was never stored, expired or was evicted."""
        self._expire()
        return self._entries.get(response_id)

    def delete(self, response_id: str) -> bool:
        entry = self._entries.pop(response_id, None)
        if entry is None:
            return False
        self._bytes -= entry.size
        return True

    def _pop_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)
        self._bytes -= entry.size

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.expires > now:  # entries are kept in storing order, and every one lives as long
                break
            self._pop_oldest()
