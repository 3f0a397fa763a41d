"""Xinference's audio handle, from its official client and from ours (sync and async), on the shared server with
the bundled piper voice and whisper-tiny.en: speech comes back as audio bytes (whole or streamed), and that audio
transcribes to the words in every format the handle returns."""

from __future__ import annotations

import asyncio
import io

import av
import pytest

from tests.audio_speech import MISHEARD, SENTENCE, heard
from tests.conftest import LocalServer
from xinference.client import AsyncClient, Client, ClientError, RESTfulAudioModelHandle

pytestmark = pytest.mark.slow


#: piper's voice adds random noise to every synthesis, so its audio differs each time; at this pace (the one
#: ``tests/audio_speech.speak`` uses) Whisper tiny.en misses at most ``MISHEARD`` words, at the default pace more.
CLEAR = 1 / 1.15


def _seconds(audio: bytes) -> float:
    with av.open(io.BytesIO(audio)) as container:
        frames = list(container.decode(audio=0))
    return sum(frame.samples for frame in frames) / frames[0].sample_rate


def test_the_official_client_speaks_and_transcribes(
    local_server: LocalServer, piper_voice_uid: str, whisper_uid: str
) -> None:
    from xinference_client import RESTfulClient

    client = RESTfulClient(local_server.endpoint)
    audio = client.get_model(piper_voice_uid).speech(SENTENCE, voice="joe", response_format="wav", speed=CLEAR)
    assert 2.0 < _seconds(audio) < 15.0
    streamed = b"".join(client.get_model(piper_voice_uid).speech(SENTENCE, response_format="mp3", stream=True))
    assert _seconds(streamed) > 2.0
    transcript = client.get_model(whisper_uid).transcriptions(audio)
    assert heard(transcript["text"], MISHEARD), transcript


def test_our_handle_speaks_transcribes_and_lists_voices(
    local_server: LocalServer, piper_voice_uid: str, whisper_uid: str
) -> None:
    with Client(local_server.endpoint) as client:
        voice = client.get_model(piper_voice_uid)
        assert isinstance(voice, RESTfulAudioModelHandle)
        assert [v["id"] for v in voice.voices()] == ["joe"]
        audio = voice.speech(SENTENCE, response_format="wav", speed=CLEAR)
        assert isinstance(audio, bytes) and 2.0 < _seconds(audio) < 15.0
        pieces = list(voice.speech(SENTENCE, response_format="mp3", stream=True))
        assert pieces and _seconds(b"".join(pieces)) > 2.0
        whisper = client.get_model(whisper_uid)
        assert heard(whisper.transcriptions(audio)["text"], MISHEARD)
        srt = whisper.transcriptions(audio, response_format="srt")
        assert isinstance(srt, str) and srt.startswith("1\n00:00:") and heard(srt, MISHEARD)
        verbose = whisper.transcriptions(audio, response_format="verbose_json", timestamp_granularities=["word"])
        assert verbose["segments"] and heard(" ".join(w["word"] for w in verbose["words"]), MISHEARD)
        with pytest.raises(ClientError, match="voice") as refused:
            voice.speech("Hi.", voice="no-such-voice")
        assert refused.value.status_code == 400
        with pytest.raises(ClientError) as english_only:
            whisper.translations(audio)
        assert english_only.value.status_code == 400


def test_the_async_handle_streams_speech(local_server: LocalServer, piper_voice_uid: str, whisper_uid: str) -> None:
    async def run() -> tuple[bytes, str]:
        async with AsyncClient(local_server.endpoint) as client:
            voice = await client.get_model(piper_voice_uid)
            stream = await voice.speech(SENTENCE, response_format="wav", stream=True, speed=CLEAR)
            audio = b"".join([piece async for piece in stream])
            whisper = await client.get_model(whisper_uid)
            text = await whisper.transcriptions(audio, response_format="text")
            return audio, text

    audio, text = asyncio.run(run())
    assert _seconds(audio) > 2.0 and heard(text, MISHEARD)
