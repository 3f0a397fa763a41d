"""What a batching engine's sequences turn into (Transformers, MLX): OpenAI responses and chunks.

Sinks run on the scheduler thread and only hand data over (a ChunkStream push, a future resolved on the actor's
loop). A request with ``n`` choices has one sequence and one sink per choice; the stream ends when the last one ends.
Chat output goes through :class:`~xinference.model.parsers.postprocess.ChatOutputParser` when the family declares
reasoning tags or the request has tools, so streamed and whole responses carry ``reasoning_content`` and
``tool_calls`` the same way.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from xinference.engines.base import ChunkStream
from xinference.engines.continuous.loop import Sequence
from xinference.errors import XinferenceError
from xinference.model.parsers.postprocess import ChunkRewriter

__all__ = ["CollectSink", "StreamGroup", "StreamSink", "chat_logprobs", "completion_logprobs", "usage"]


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _token_entry(tokenizer: Any, token: int, logprob: float) -> dict[str, Any]:
    text = tokenizer.decode([token])
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def chat_logprobs(tokenizer: Any, entries: list[tuple[int, float, list[tuple[int, float]]]]) -> dict[str, Any]:
    """OpenAI's chat ``logprobs`` object for some generated tokens."""
    content = []
    for token, logprob, top in entries:
        item = _token_entry(tokenizer, token, logprob)
        item["top_logprobs"] = [_token_entry(tokenizer, t, lp) for t, lp in top]
        content.append(item)
    return {"content": content}


def completion_logprobs(
    tokenizer: Any, entries: list[tuple[int, float, list[tuple[int, float]]]], offset: int = 0
) -> dict[str, Any]:
    """The legacy completions ``logprobs`` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    tokens, values, tops, offsets = [], [], [], []
    for token, logprob, top in entries:
        text = tokenizer.decode([token])
        tokens.append(text)
        values.append(logprob)
        tops.append({tokenizer.decode([t]): lp for t, lp in top})
        offsets.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


class StreamGroup:
    """The shared end of one streamed request's choices: chunk ids, the rewriter, the usage chunk."""

    def __init__(
        self,
        stream: ChunkStream,
        kind: str,
        uid: str,
        prompt_tokens: int,
        choices: int,
        include_usage: bool,
        rewriter: ChunkRewriter | None,
        tokenizer: Any,
    ) -> None:
        self.stream = stream
        self.kind = kind
        self.uid = uid
        self.prompt_tokens = prompt_tokens
        self.include_usage = include_usage
        self.rewriter = rewriter
        self.tokenizer = tokenizer
        self.open = choices
        self.completion_tokens = 0
        self.id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": self.id, "object": obj, "created": self.created, "model": self.uid, "choices": choices}

    def push(self, chunk: dict[str, Any]) -> None:
        for out in self.rewriter.process(chunk) if self.rewriter is not None else [chunk]:
            self.stream.push(out)

    def start(self, choices: int) -> None:
        if self.kind == "chat":
            for index in range(choices):
                self.push(
                    self.chunk([{"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
                )

    def ended(self, generated: int) -> None:
        self.completion_tokens += generated
        self.open -= 1
        if self.open > 0:
            return
        if self.include_usage:
            last = self.chunk([])
            last["usage"] = usage(self.prompt_tokens, self.completion_tokens)
            self.stream.push(last)
        self.stream.finish()


class StreamSink:
    """One streamed choice (runs on the scheduler thread)."""

    def __init__(self, group: StreamGroup, index: int) -> None:
        self.group = group
        self.index = index
        self.sent_logprobs = 0
        self.text_offset = 0

    @property
    def cancelled(self) -> bool:
        return self.group.stream.cancelled

    def _choice(self, seq: Sequence, text: str | None, finish: str | None) -> dict[str, Any]:
        group = self.group
        entries = seq.token_logprobs[self.sent_logprobs :] if seq.params.logprobs else []
        self.sent_logprobs += len(entries)
        if group.kind == "chat":
            choice: dict[str, Any] = {
                "index": self.index,
                "delta": {} if text is None else {"content": text},
                "finish_reason": finish,
            }
            if entries:
                choice["logprobs"] = chat_logprobs(group.tokenizer, entries)
            return choice
        logprobs = completion_logprobs(group.tokenizer, entries, self.text_offset) if entries else None
        self.text_offset += len(text or "")
        return {"index": self.index, "text": text or "", "logprobs": logprobs, "finish_reason": finish}

    def on_text(self, seq: Sequence, text: str) -> None:
        self.group.push(self.group.chunk([self._choice(seq, text, None)]))

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.group.push(self.group.chunk([self._choice(seq, None, reason)]))
        self.group.ended(len(seq.generated))

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.group.stream.finish(error)


class CollectSink:
    """Collects a whole completion and resolves a future on the actor's loop (runs on the scheduler thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[str] = loop.create_future()
        self.parts: list[str] = []
        self.cancelled = False

    def on_text(self, seq: Sequence, text: str) -> None:
        self.parts.append(text)

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.loop.call_soon_threadsafe(_resolve, self.future, "".join(self.parts), None)

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.loop.call_soon_threadsafe(_resolve, self.future, None, error)


def _resolve(future: asyncio.Future[str], value: str | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value or "")
