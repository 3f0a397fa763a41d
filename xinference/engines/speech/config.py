"""Launch options shared by the CPU text-to-speech engines (piper, hibari)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SpeechConfig"]


class SpeechConfig(BaseModel):
    """``xinference launch --model-type audio ... --max_concurrent 2``; unknown names are a 400."""

    model_config = ConfigDict(extra="forbid")

    max_concurrent: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="requests synthesized at once (each on its own thread, one ONNX session shared); "
        "default: the cores this process may use, at most 4",
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="onnxruntime threads per synthesis; default: piper synthesizes a request running alone with "
        "a thread per core and overlapping requests with one each, hibari with one",
    )
