"""The streamed-answer reader of the managed engines against a tiny HTTP/1.1 server on a loopback socket (a stand-in
for vLLM's and SGLang's servers: chunked SSE, a JSON error body, a connection dropped mid-answer, a client that
closes first). The real servers are exercised in ``test_vllm.py`` and ``test_sglang.py``."""

from __future__ import annotations

import asyncio
import json

import pytest

from xinference.engines.managed.sse import open_sse


def _chunked(parts: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


async def _serve(answer: bytes, seen: list[bytes], closed: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        seen.append(head + await reader.readexactly(length))
        writer.write(answer)
        await writer.drain()
        if closed is not None:  # keep the answer open until the client goes away
            await reader.read()
            closed.set()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_chunked_events_split_anywhere() -> None:
    events = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\ndata: {"n"', b": 3}\n\n", b"data: [DONE]\n\n"]
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(
        events
    )

    async def run() -> tuple[list[bytes], list[bytes]]:
        seen: list[bytes] = []
        server, port = await _serve(answer, seen)
        async with server:
            response = await open_sse(
                "127.0.0.1",
                port,
                "/v1/chat/completions",
                {"Authorization": "Bearer k"},
                json.dumps({"stream": True}).encode(),
            )
            assert response.status == 200
            got = [payload async for payload in response.events()]
            response.close()
        return got, seen

    got, seen = asyncio.run(run())
    assert got == [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}', b"[DONE]"]
    request = seen[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer k\r\n" in request and request.endswith(b'{"stream": true}')


def test_error_body_with_content_length() -> None:
    body = b'{"error": {"message": "bad temperature", "code": 400}}'
    answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def run() -> tuple[int, bytes]:
        server, port = await _serve(answer, [])
        async with server:
            response = await open_sse("127.0.0.1", port, "/x", {}, b"{}")
            status, got = response.status, await response.read_body()
            response.close()
        return status, got

    assert asyncio.run(run()) == (400, body)


def test_a_dropped_connection_is_an_error_not_an_end() -> None:
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b'10\r\ndata: {"n": 1}\n\n\r\n'

    async def run() -> None:
        server, port = await _serve(answer, [])
        async with server:
            response = await open_sse("127.0.0.1", port, "/x", {}, b"{}")
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                async for _ in response.events():
                    pass
            response.close()

    asyncio.run(run())


def test_closing_the_response_reaches_the_server() -> None:
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b'10\r\ndata: {"n": 1}\n\n\r\n'

    async def run() -> None:
        closed = asyncio.Event()
        server, port = await _serve(answer, [], closed)
        async with server:
            response = await open_sse("127.0.0.1", port, "/x", {}, b"{}")
            events = response.events()
            assert await events.__anext__() == b'{"n": 1}'
            response.close()  # what cancelling a stream does: the server sees the connection end
            await asyncio.wait_for(closed.wait(), timeout=5)

    asyncio.run(run())


def test_unreachable_server_raises_oserror() -> None:
    from tests.conftest import free_port

    with pytest.raises(OSError):
        asyncio.run(open_sse("127.0.0.1", free_port(), "/x", {}, b"{}"))
