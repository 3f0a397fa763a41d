"""What the text-to-speech engines share: audio encoding (:mod:`.encode`) and the sentence loop (:mod:`.engine`)."""

from __future__ import annotations

__all__: list[str] = []
