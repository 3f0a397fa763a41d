"""The audio, image and original-Xinference parts of ``results/latest.md``: their verdicts and their sections.

Pure like :mod:`benchmark.report`: each function takes the :func:`benchmark.run_all.run` report (or its part) and
returns verdict inputs or markdown lines, empty when the part is absent. The parts are the results of
:mod:`benchmark.compare_stt` (``report["audio"]["stt"]``), :mod:`benchmark.compare_tts` (``report["audio"]["tts"]``),
:mod:`benchmark.compare_images` (``report["images"]``) and :mod:`benchmark.compare_original`
(``report["original"]``); a part that failed is ``{"error": ...}`` and is shown with its error.

Every speed figure here is ours ÷ raw per round (how fast the platform is next to the raw engine called directly),
averaged on the log scale with its 95% interval (:mod:`benchmark.intervals`), and held against the same parity
target as the LLM engines (>= 0.98).

Besides these, any benchmark may add figures without touching the report code: ``report["figures"]`` is a list of
``{"name", "value", "unit", "target", "bound", "direction" ("min"/"max"), "estimate" (an Estimate dict, optional),
"detail" (optional), "strict" (optional)}``, each judged and listed with the targets (:func:`generic_figures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmark._md import n, table
from benchmark.intervals import Estimate, format_estimate, ratio_estimate

__all__ = [
    "FigureSpec",
    "audio_section",
    "generic_figures",
    "images_section",
    "media_figures",
    "original_section",
    "stt_speed_rounds",
    "tts_speed_rounds",
]

STT_RAW, STT_OURS = "raw faster-whisper", "platform"
TTS_RAW, TTS_OURS = "raw piper", "platform"
IMAGE_RAW, IMAGE_OURS = "raw diffusers", "platform"

#: (name, point value, estimate dict or None, unit, detail): a figure judged against the parity ratio
FigureSpec = tuple[str, float | None, dict[str, Any] | None, str, str]


def _levels(result: dict[str, Any], side: str) -> list[str]:
    rounds = result.get("rounds") or []
    return list(rounds[0][side]) if rounds else []


def stt_speed_rounds(result: dict[str, Any], level: str) -> list[float]:
    """Per round, requests/s ours ÷ raw at ``level`` (the same clips on both sides, so also raw RTF ÷ our RTF)."""
    return [
        r[STT_OURS][level]["rps"] / r[STT_RAW][level]["rps"]
        for r in result.get("rounds", [])
        if r[STT_RAW][level].get("rps") and r[STT_OURS][level].get("rps")
    ]


def tts_speed_rounds(result: dict[str, Any], level: str, raw: str = TTS_RAW) -> list[float]:
    """Per round, audio seconds made per wall second ours ÷ raw at ``level``: raw RTF ÷ our RTF."""
    return [
        r[raw][level]["rtf"] / r[TTS_OURS][level]["rtf"]
        for r in result.get("rounds", [])
        if r[raw][level].get("rtf") and r[TTS_OURS][level].get("rtf")
    ]


def _spec(name: str, values: Sequence[float], unit: str, detail: str) -> FigureSpec:
    estimate = ratio_estimate(values)
    return (
        name,
        None if estimate is None else estimate.value,
        None if estimate is None else estimate.to_dict(),
        unit,
        detail,
    )


def media_figures(report: dict[str, Any]) -> list[FigureSpec]:
    """The parity figures of the audio and image comparisons present in ``report``; an errored part gives one
    unmeasured figure that carries its error."""
    specs: list[FigureSpec] = []
    audio = report.get("audio") or {}
    stt, tts = audio.get("stt"), audio.get("tts")
    if stt is not None:
        if "error" in stt:
            specs.append(("speech to text req/s ours/raw faster-whisper", None, None, "x", str(stt["error"])[:200]))
        for level in _levels(stt, STT_OURS):
            specs.append(
                _spec(
                    f"speech to text req/s ours/raw faster-whisper, {level}",
                    stt_speed_rounds(stt, level),
                    "x",
                    "same clips both sides: also raw RTF ÷ our RTF",
                )
            )
    if tts is not None:
        if "error" in tts:
            specs.append(("text to speech audio/s ours/raw piper", None, None, "x", str(tts["error"])[:200]))
        for level in _levels(tts, TTS_OURS):
            specs.append(
                _spec(
                    f"text to speech audio/s ours/raw piper, {level}",
                    tts_speed_rounds(tts, level),
                    "x",
                    "raw RTF ÷ our RTF; raw = piper's default session",
                )
            )
    images = report.get("images")
    if images is not None:
        name = "images/s ours/raw diffusers (tiny pipeline)"
        if "error" in images:
            specs.append((name, None, None, "x", str(images["error"])[:200]))
        else:
            estimate = (images.get("summary") or {}).get("images_per_second_ratio")
            added = (images.get("summary") or {}).get("added_ms_per_image")
            detail = "platform overhead on a tiny random pipeline, not model speed"
            if added:
                detail += f"; {added['value']:+.1f} ms per image"
            specs.append((name, None if estimate is None else estimate["value"], estimate, "x", detail))
    return specs


def generic_figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """``report["figures"]``: figures added by any benchmark, each a dict as the module docstring says; entries
    without a name, bound or direction are skipped."""
    found = []
    for figure in report.get("figures") or []:
        if (
            isinstance(figure, dict)
            and figure.get("name")
            and "bound" in figure
            and figure.get("direction")
            in (
                "min",
                "max",
            )
        ):
            found.append(figure)
    return found


def _error_lines(title: str, part: dict[str, Any]) -> list[str]:
    return [f"## {title}", "", f"Not measured: {part['error']}", ""]


def _estimate_cell(values: Sequence[float], digits: int = 3) -> str:
    return format_estimate(ratio_estimate(values), digits)


def audio_section(audio: dict[str, Any] | None) -> list[str]:
    """Speech to text and text to speech against their raw engines, per level."""
    if not audio:
        return []
    lines: list[str] = []
    stt, tts = audio.get("stt"), audio.get("tts")
    if stt is not None and "error" in stt:
        lines += _error_lines("Speech to text vs raw faster-whisper", stt)
    elif stt is not None:
        cond = stt["conditions"]
        summary = stt["summary"]
        lines += [
            "## Speech to text vs raw faster-whisper",
            "",
            f"{cond['model']}; {', '.join(f'{k} {v}' for k, v in cond['settings'].items())}; {cond['requests']} "
            f"fresh clips per round (piper speech, about {n(cond.get('words_per_round'), 0)} words), "
            f"{cond['rounds']} interleaved rounds. Raw: {cond['raw']}; ours: `POST /v1/audio/transcriptions`. "
            "RTF: wall seconds ÷ audio seconds (medians over rounds).",
            "",
        ]
        rows = [
            [
                level,
                f"{n(summary[STT_RAW][level]['rtf'], 3)} / {n(summary[STT_OURS][level]['rtf'], 3)}",
                f"{n(summary[STT_RAW][level]['latency_ms'], 0)} / {n(summary[STT_OURS][level]['latency_ms'], 0)}",
                _estimate_cell(stt_speed_rounds(stt, level)),
            ]
            for level in summary[STT_OURS]
        ]
        lines += table(["level", "RTF raw / ours", "latency ms raw / ours", "req/s ours ÷ raw [95%]"], rows)
        if stt.get("agreement") is not None:
            lines += ["", f"Same transcript on both sides: {stt['agreement']:.0%} of requests."]
        lines.append("")
    if tts is not None and "error" in tts:
        lines += _error_lines("Text to speech vs raw piper", tts)
    elif tts is not None:
        cond = tts["conditions"]
        summary = tts["summary"]
        raws = [side for side in summary if side != TTS_OURS]
        lines += [
            "## Text to speech vs raw piper",
            "",
            f"{cond['voice']}; {cond['texts']} texts ({cond['words']} words) per level, {cond['rounds']} interleaved "
            f"rounds. Ours: {cond['platform_engine']}, `POST /v1/audio/speech` streamed pcm. Raw: {cond['raw']}; "
            "`raw piper 1 thread` uses the platform's session setting (isolates the platform's own cost). TTFA: time "
            "to first audio (median).",
            "",
        ]
        rows = []
        for raw in raws:
            for level in summary[raw]:
                rows.append(
                    [
                        raw,
                        level,
                        f"{n(summary[raw][level]['rtf'], 3)} / {n(summary[TTS_OURS][level]['rtf'], 3)}",
                        f"{n(summary[raw][level]['ttfa_ms'], 0)} / {n(summary[TTS_OURS][level]['ttfa_ms'], 0)}",
                        _estimate_cell(tts_speed_rounds(tts, level, raw)),
                    ]
                )
        lines += table(["raw side", "level", "RTF raw / ours", "TTFA ms raw / ours", "audio/s ours ÷ raw [95%]"], rows)
        lines.append("")
    return lines


def images_section(images: dict[str, Any] | None) -> list[str]:
    """Seconds per image through ``/v1/images/generations`` against the pipeline called in-process."""
    if not images:
        return []
    title = "Image generation vs the raw diffusers pipeline"
    if "error" in images:
        return _error_lines(title, images)
    cond, summary = images["conditions"], images["summary"]
    seconds = summary["seconds_per_image"]
    cpu = summary.get("cpu_seconds_per_image") or {}
    ratio, added = summary.get("images_per_second_ratio"), summary.get("added_ms_per_image")
    same = summary.get("same_image_share")
    return [
        f"## {title}",
        "",
        "No real diffusion model ships here: both sides run a tiny Stable Diffusion pipeline with random weights "
        f"({cond['pipeline']}), so this measures **the platform's overhead per image** (HTTP, the actor hop, "
        "base64), not a model's speed; a real model's seconds per image make the same overhead a far smaller share. "
        f"{cond['size']}x{cond['size']}, {cond['steps']} steps, guidance {cond['guidance_scale']:g}, float32, "
        f"{cond['threads']} torch threads both sides, PNG on both; {cond['images']} images per side per round, "
        f"{cond['rounds']} interleaved rounds, fresh prompts. CPU: this process for raw, the platform's API and model "
        "processes for ours (what a busy shared machine changes least).",
        "",
        *table(
            [
                "s/image raw / ours",
                "CPU s/image raw / ours",
                "images/s ours ÷ raw [95%]",
                "ms added per image [95%]",
                "same image",
            ],
            [
                [
                    f"{n(seconds[IMAGE_RAW], 3)} / {n(seconds[IMAGE_OURS], 3)}",
                    f"{n(cpu.get(IMAGE_RAW), 3)} / {n(cpu.get(IMAGE_OURS), 3)}",
                    format_estimate(None if ratio is None else Estimate.from_dict(ratio), 3),
                    format_estimate(None if added is None else Estimate.from_dict(added), 1, sign=True),
                    "-" if same is None else f"{same:.0%}",
                ]
            ],
        ),
        "",
    ]


def original_section(original: dict[str, Any] | None) -> list[str]:
    """The side-by-side with the original Xinference (``benchmark/compare_original.py``), when it ran."""
    if not original:
        return []
    title = "Against the original Xinference"
    if "error" in original:
        version = (original.get("conditions") or {}).get("version", "?")
        return [f"## {title}", "", f"`xinference=={version}` not measured: {original['error']}", ""]
    from benchmark.compare_original import render_markdown

    body = render_markdown(original).splitlines()
    return [f"## {title}", *body[1:], ""]
