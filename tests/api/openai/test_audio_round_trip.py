"""Issue 21's round trip with only the README's install and no network: the openai SDK speaks a text with the bundled
piper voice and transcribes that audio with the bundled whisper-tiny.en, through one server; the words come back,
in every transcript format that carries them (json, text, srt, vtt, verbose_json)."""

from __future__ import annotations

import re

import openai
import pytest

pytest.importorskip("piper")

from tests.audio_speech import MISHEARD, SENTENCE, heard  # noqa: E402
from tests.conftest import LocalServer  # noqa: E402

pytestmark = pytest.mark.slow


def _heard(text: str) -> bool:
    return heard(text, MISHEARD)


@pytest.mark.parametrize("audio_format", ["wav", "mp3", "flac"])
def test_spoken_text_comes_back_as_words(
    local_server: LocalServer, piper_voice_uid: str, whisper_uid: str, audio_format: str
) -> None:
    client = openai.OpenAI(base_url=local_server.api, api_key="none", max_retries=0, timeout=120)
    spoken = client.audio.speech.create(
        model=piper_voice_uid, input=SENTENCE, voice="joe", response_format=audio_format, speed=0.87
    )
    audio = spoken.read()
    assert len(audio) > 10_000
    upload = (f"speech.{audio_format}", audio)
    transcript = client.audio.transcriptions.create(model=whisper_uid, file=upload)
    assert _heard(transcript.text), transcript.text
    if audio_format != "wav":
        return
    text = client.audio.transcriptions.create(model=whisper_uid, file=upload, response_format="text")
    assert _heard(str(text))
    srt = str(client.audio.transcriptions.create(model=whisper_uid, file=upload, response_format="srt"))
    assert re.search(r"^1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n", srt) and _heard(srt)
    vtt = str(client.audio.transcriptions.create(model=whisper_uid, file=upload, response_format="vtt"))
    assert vtt.startswith("WEBVTT") and re.search(r"00:\d\d\.\d{3} --> ", vtt) and _heard(vtt)
    verbose = client.audio.transcriptions.create(
        model=whisper_uid, file=upload, response_format="verbose_json", timestamp_granularities=["segment", "word"]
    )
    assert _heard(verbose.text) and verbose.segments and verbose.words
    assert 2.0 < verbose.duration < 15.0
