"""``/v1/audio/translations`` (and transcriptions with ``language``) on a multilingual Whisper of RANDOM weights:
plumbing and response shapes only, NOT a quality test. The model's words are noise.

No multilingual Whisper ships on PyPI, so ``tests/random_whisper.py`` builds one at test time in Transformers'
format; it is registered as a custom audio model (Xinference's JSON, ``multilingual: true``), converted by the
faster_whisper engine like any pytorch checkpoint, launched on the shared server and called with the ``openai`` SDK.
That the request ran with the translate task is shown by its tokens: they equal those faster-whisper produces
in-process from the server's own conversion with ``task="translate"``, and differ from ``task="transcribe"`` (the
model is deterministic and its output depends on the task token)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import httpx
import numpy as np
import openai
import pytest

from tests.audio_speech import speak
from tests.conftest import LocalServer
from tests.random_whisper import build_multilingual_whisper
from xinference.api.openai.audio_files import decode_audio

pytestmark = [
    pytest.mark.slow,
    # openai's SDK flags its translations call deprecated; the route is still part of OpenAI's API, and clients use it
    pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning"),
]

pytest.importorskip("faster_whisper")
NAME = "random-multilingual-whisper"


@pytest.fixture(scope="module")
def wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return speak(tmp_path_factory.mktemp("speech") / "speech.wav")


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_multilingual_whisper(tmp_path_factory.mktemp("random-whisper") / "weights")


@pytest.fixture(scope="module")
def uid(local_server: LocalServer, weights: Path) -> Iterator[str]:
    """The random model registered in Xinference's audio JSON and launched (greedy, one worker)."""
    family = {
        "version": 2,
        "model_name": NAME,
        "model_family": "whisper",
        "model_id": None,
        "model_revision": None,
        "model_uri": str(weights),
        "model_format": "pytorch",
        "multilingual": True,
        "model_ability": ["audio2text"],
    }
    api = local_server.api
    registered = httpx.post(f"{api}/model_registrations/audio", json={"model": family}, timeout=30)
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(
            f"{api}/models",
            json={"model_name": NAME, "model_type": "audio", "beam_size": 1, "num_workers": 1},
            timeout=300,
        )
        assert launched.status_code == 200, launched.text
        assert launched.json()["model_engine"] == "faster_whisper"
        yield NAME
    finally:
        httpx.delete(f"{api}/models/{NAME}", timeout=60)
        httpx.delete(f"{api}/model_registrations/audio/{NAME}", timeout=30)


@pytest.fixture(scope="module")
def raw(local_server: LocalServer, weights: Path, uid: str) -> Any:
    """faster-whisper in this process on the server's own CTranslate2 conversion of the random model, loaded as the
    engine loads it on a CPU (int8)."""
    from faster_whisper import WhisperModel

    from xinference.engines.faster_whisper.engine import conversion_dir

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XINFERENCE_HOME", str(local_server.home))
        converted = conversion_dir(str(weights))
    assert (converted / "model.bin").is_file(), f"the server did not convert the checkpoint into {converted}"
    model = WhisperModel(str(converted), device="cpu", compute_type="int8", cpu_threads=1, local_files_only=True)
    assert model.model.is_multilingual
    return model


@pytest.fixture(scope="module")
def samples(wav: Path) -> Any:
    return np.frombuffer(decode_audio(wav.read_bytes(), wav.name).samples, dtype="<f4")


@pytest.fixture(scope="module")
def client(local_server: LocalServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=local_server.api, api_key="none", max_retries=0, timeout=300)


def _reference(raw: Any, samples: Any, **options: Any) -> tuple[list[int], str]:
    """The tokens faster-whisper decodes in-process, greedily as the launch asked, and the language it used."""
    segments, info = raw.transcribe(samples, beam_size=1, vad_filter=False, **options)
    return [t for s in segments for t in s.tokens], info.language


def _tokens(verbose: Any) -> list[int]:
    return [t for s in verbose.segments for t in s.tokens]


def _form(local_server: LocalServer, path: str, wav: Path, **fields: str) -> httpx.Response:
    with wav.open("rb") as handle:
        return httpx.post(
            f"{local_server.api}/audio/{path}",
            data={"model": NAME, **fields},
            files={"file": ("speech.wav", handle, "audio/wav")},
            timeout=300,
        )


def test_translation_runs_the_translate_task_in_every_format(
    client: openai.OpenAI, uid: str, wav: Path, raw: Any, samples: Any
) -> None:
    translated, detected = _reference(raw, samples, task="translate")
    transcribed, _ = _reference(raw, samples, task="transcribe")
    assert translated and translated != transcribed, "the random model must tell the two tasks apart"

    verbose = client.audio.translations.create(model=uid, file=wav, response_format="verbose_json")
    assert verbose.task == "translate" and verbose.language == "english"  # OpenAI: the language written
    assert 3.0 < verbose.duration < 8.0 and verbose.segments
    assert all(0.0 <= s.start <= s.end for s in verbose.segments)
    assert [s.id for s in verbose.segments] == list(range(len(verbose.segments)))  # OpenAI counts from 0
    assert _tokens(verbose) == translated and _tokens(verbose) != transcribed

    plain = client.audio.translations.create(model=uid, file=wav)
    assert plain.text == verbose.text
    text = client.audio.translations.create(model=uid, file=wav, response_format="text")
    assert isinstance(text, str) and text == verbose.text + "\n"
    srt = client.audio.translations.create(model=uid, file=wav, response_format="srt")
    cues = re.findall(r"^(\d+)\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}$", srt, re.MULTILINE)
    assert cues == [str(n) for n in range(1, len(verbose.segments) + 1)], srt
    vtt = client.audio.translations.create(model=uid, file=wav, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n")
    assert len(re.findall(r"^\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}$", vtt, re.MULTILINE)) == len(
        verbose.segments
    )
    # the detected language is the one faster-whisper detects in-process: the request went through detection
    transcription = client.audio.transcriptions.create(model=uid, file=wav, response_format="verbose_json")
    assert transcription.language == detected and _tokens(transcription) == transcribed


def test_translation_takes_the_spoken_language_as_a_hint(local_server: LocalServer, uid: str, wav: Path) -> None:
    """Xinference's client sends ``language`` with a translation: it is checked like a transcription's, not
    dropped (the answer still says the text is English)."""
    hinted = _form(local_server, "translations", wav, language="de", response_format="verbose_json")
    assert hinted.status_code == 200, hinted.text
    assert hinted.json()["task"] == "translate" and hinted.json()["language"] == "english"
    unknown = _form(local_server, "translations", wav, language="xx")
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "language", unknown.text


def test_transcription_with_a_language_uses_it(
    client: openai.OpenAI, uid: str, wav: Path, raw: Any, samples: Any
) -> None:
    expected, used = _reference(raw, samples, task="transcribe", language="de")
    assert used == "de"
    result = client.audio.transcriptions.create(model=uid, file=wav, language="de", response_format="verbose_json")
    assert result.language == "de" and _tokens(result) == expected


def test_a_language_the_model_has_no_token_for_is_400(
    local_server: LocalServer, client: openai.OpenAI, uid: str, wav: Path
) -> None:
    """faster-whisper knows ``yue`` (large-v3's 100th language); this model, like Whisper before large-v3, has 99:
    the request is refused before it reaches the decoder, and the model keeps serving."""
    refused = _form(local_server, "transcriptions", wav, language="yue")
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "language" and "yue" in refused.json()["error"]["message"]
    assert client.audio.transcriptions.create(model=uid, file=wav, language="fr").text is not None
