"""The stream channel's wire and its door (``core/stream_channel.py``): what crosses it arrives unchanged, and
nothing gets in without the replica's token."""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

import pytest

from xinference.core.refs import Pulled
from xinference.core.stream_channel import ChannelClient, ChannelClosed, ChannelServer, decode_round, encode_round
from xinference.errors import ContextLengthExceeded, EngineError, ModelLoadTimeout, XinferenceError


def _split(frame: bytes) -> tuple[Any, bytes]:
    head_size, body_size = struct.unpack("!II", frame[:8])
    assert len(frame) == 8 + head_size + body_size
    return json.loads(frame[8 : 8 + head_size]), frame[8 + head_size :]


def test_a_round_crosses_the_wire_unchanged() -> None:
    text = b'{"choices":[{"delta":{"content":"h\xc3\xa9"}}],"model":"m"}'
    as_dict = {"choices": [{"delta": {"content": "wörld"}}], "usage": None}
    result: dict[str, Pulled] = {
        "s0": ([text, as_dict, text], False, None),
        "s1": ([], True, ContextLengthExceeded("too long", param="messages")),
        "s2": ([text], True, ModelLoadTimeout("loading", retry_after=7.0)),
        "s3": ([], True, None),
    }
    back = decode_round(*_split(encode_round(result)))
    assert list(back) == ["s0", "s1", "s2", "s3"]
    chunks, done, error = back["s0"]
    assert chunks == [text, as_dict, text] and isinstance(chunks[0], bytes) and isinstance(chunks[1], dict)
    assert done is False and error is None
    error = back["s1"][2]
    assert type(error) is ContextLengthExceeded and error.message == "too long" and error.param == "messages"
    assert back["s1"][:2] == ([], True)
    error = back["s2"][2]
    assert type(error) is ModelLoadTimeout and error.retry_after == 7.0 and back["s2"][0] == [text]
    assert back["s3"] == ([], True, None)


def test_an_error_class_this_side_does_not_know_arrives_as_an_engine_error() -> None:
    class NewerError(XinferenceError):
        pass

    header, body = _split(encode_round({"s0": ([], True, NewerError("from a newer version"))}))
    error = decode_round(header, body)["s0"][2]
    assert type(error) is EngineError and error.message == "from a newer version"
    header[0][2][0] = "ValueError"  # a name that exists but is no platform error is not built either
    assert type(decode_round(header, body)["s0"][2]) is EngineError


def test_a_chunk_that_is_not_json_ends_its_stream_with_an_error_and_not_the_round() -> None:
    failed: list[str] = []
    frame = encode_round({"s0": ([{"audio": object()}], False, None), "s1": ([b'{"a":1}'], False, None)}, failed)
    back = decode_round(*_split(frame))
    assert back["s0"][:2] == ([], True) and "not JSON" in str(back["s0"][2])
    assert back["s1"] == ([b'{"a":1}'], False, None)
    assert failed == ["s0"]  # the model side aborts it: the API will not pull it again


@pytest.mark.parametrize(
    "header,body",
    [
        ([["s0", False, None, "b", [5]]], b"abc"),  # sizes past the body
        ([["s0", False, None, "b", [2]]], b"abcd"),  # bytes left over
        ([["s0", False, None, "bb", [2]]], b"ab"),  # kinds and sizes disagree
        ([["s0", False]], b""),  # too few fields
        ({"s0": 1}, b""),  # not a list of entries
    ],
)
def test_a_malformed_round_is_refused(header: Any, body: bytes) -> None:
    with pytest.raises(ChannelClosed):
        decode_round(header, body)


async def _pulls(stream_ids: list[str], wait: float) -> dict[str, Pulled]:
    return {stream_id: ([f'"{stream_id}"'.encode()], False, None) for stream_id in stream_ids}


def test_rounds_are_answered_for_the_token_and_refused_without_it() -> None:
    async def scenario() -> None:
        server = ChannelServer(_pulls)
        await server.start()
        try:
            client = await ChannelClient.connect(server.path, server.token)
            assert await client.pull_many(["s1", "s2"], 0.1) == {
                "s1": ([b'"s1"'], False, None),
                "s2": ([b'"s2"'], False, None),
            }
            assert await client.pull_many([], 0.1) == {}
            client.close()
            with pytest.raises(ChannelClosed):
                await ChannelClient.connect(server.path, "0" * len(server.token))
            # a peer that sends a huge hello (before it proved anything) is cut off, not read
            reader, writer = await asyncio.open_unix_connection(server.path)
            writer.write(struct.pack("!II", 1 << 30, 0))
            assert await reader.read() == b""
            writer.close()
        finally:
            await server.close()
        with pytest.raises(FileNotFoundError):  # closed: the socket and its directory are gone
            await ChannelClient.connect(server.path, server.token)

    asyncio.run(scenario())


def test_the_socket_directory_is_private() -> None:
    async def scenario() -> None:
        server = ChannelServer(_pulls)
        await server.start()
        try:
            import os
            import stat

            mode = stat.S_IMODE(os.stat(os.path.dirname(server.path)).st_mode)
            assert mode == 0o700
        finally:
            await server.close()

    asyncio.run(scenario())
