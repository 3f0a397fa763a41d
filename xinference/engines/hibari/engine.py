"""hibari's voices through ``hibari-tts``: a 24 kHz English model whose default voice (``heart``) ships inside the
package.

hibari's other voices are separate ONNX files it downloads on first use; offline only the ones already present
(bundled, or in hibari's cache) are offered, so a listed voice never needs the network. ``speed`` is hibari's own
(1.0 is the voice's pace). hibari splits the text into sentences and synthesizes one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.speech.config import SpeechConfig
from xinference.engines.speech.engine import SpeechEngine, Voice

if TYPE_CHECKING:
    import numpy as np

__all__ = ["HibariEngine"]


class HibariEngine(SpeechEngine):
    """hibari's English voices on the CPU (onnxruntime + numpy)."""

    name: ClassVar[str] = "hibari"
    architecture: ClassVar[str] = "Hibari"

    _models: dict[str, Any]
    _available: list[Voice]

    def _load_backend(self) -> None:
        from hibari import Hibari
        from hibari.voices import DEFAULT, VOICES, voice_path

        assert isinstance(self.config, SpeechConfig)
        available: list[Voice] = []
        for name in sorted(VOICES, key=lambda n: (n != DEFAULT, n)):
            try:
                voice_path(name, download_missing=False)
            except FileNotFoundError:
                continue
            info = VOICES[name]
            available.append(
                {"id": name, "name": name, "language": info.get("language", ""), "gender": info.get("gender", "")}
            )
        if not available:
            raise FileNotFoundError("hibari has no voice file on this machine (its default voice ships in the wheel)")
        # The model path is the default voice's file; the launch loads it, and other present voices on first use.
        threads = self.config.threads or 1  # hibari's own default
        self._models = {available[0]["id"]: Hibari(voice=available[0]["id"], model=self.model_path, threads=threads)}
        self._available = available
        self._hibari = Hibari

    def _voices(self) -> list[Voice]:
        return list(self._available)

    def _model(self, voice: str) -> Any:
        model = self._models.get(voice)
        if model is None:
            assert isinstance(self.config, SpeechConfig)
            model = self._models[voice] = self._hibari(voice=voice, threads=self.config.threads or 1)
        return model

    def _sample_rate(self, voice: str) -> int:
        return int(self._model(voice).sample_rate)

    def _sentences(self, text: str, voice: str, speed: float) -> Iterator[np.ndarray]:
        yield from self._model(voice).stream(text, speed=speed)
