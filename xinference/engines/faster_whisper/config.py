"""Launch options of the faster-whisper engine (speech-to-text).

Users pass these as extra launch kwargs (``xinference launch --model-type audio -n whisper-tiny.en --beam_size 1``);
unknown names are a 400.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["COMPUTE_TYPES", "FasterWhisperConfig", "ResolvedFasterWhisperConfig"]

#: CTranslate2's compute types (the weights are converted to this type when the model loads).
COMPUTE_TYPES = (
    "auto",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


class FasterWhisperConfig(BaseModel):
    """What a launch may set; every field has a default that fits the worker."""

    model_config = ConfigDict(extra="forbid")

    compute_type: Literal[
        "auto", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"
    ] = Field(default="auto", description="auto: int8 on a CPU, float16 on a CUDA GPU")
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="auto: cuda when the worker has it")
    num_workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="transcriptions decoded at once (each on its own CTranslate2 worker; two more request threads "
        "compute the next requests' features meanwhile); more requests wait in the engine's queue. Default: half "
        "the cores on a CPU (at most 4), 4 on a GPU",
    )
    cpu_threads: int | None = Field(
        default=None, ge=1, le=256, description="CPU threads of each worker; default: the cores shared out"
    )
    beam_size: int = Field(default=5, ge=1, le=16, description="beam search width (1: greedy, fastest)")
    vad_filter: bool | Literal["auto"] = Field(
        default="auto",
        description="cut silence with Silero VAD and transcribe the speech chunks; auto: for audio longer than "
        "vad_min_seconds",
    )
    vad_min_seconds: float = Field(
        default=30.0, ge=0.0, description="with vad_filter=auto: the length that turns it on"
    )

    def resolve(self, cpu_count: int, gpu: bool) -> ResolvedFasterWhisperConfig:
        """The settings the model loads with on a worker with ``cpu_count`` usable cores (and a CUDA GPU or not)."""
        device = ("cuda" if gpu else "cpu") if self.device == "auto" else self.device
        compute = self.compute_type
        if compute == "auto":
            compute = "float16" if device == "cuda" else "int8"
        workers = self.num_workers or (4 if device == "cuda" else max(1, min(4, cpu_count // 2)))
        threads = self.cpu_threads or max(1, cpu_count // workers)
        return ResolvedFasterWhisperConfig(
            device=device,
            compute_type=compute,
            num_workers=workers,
            cpu_threads=threads,
            beam_size=self.beam_size,
            vad_filter=self.vad_filter,
            vad_min_seconds=self.vad_min_seconds,
        )


class ResolvedFasterWhisperConfig(BaseModel):
    """The launch options with every default settled for this worker (shown by ``describe`` as the engine's
    config)."""

    model_config = ConfigDict(frozen=True)

    device: str
    compute_type: str
    num_workers: int
    cpu_threads: int
    beam_size: int
    vad_filter: bool | Literal["auto"]
    vad_min_seconds: float
