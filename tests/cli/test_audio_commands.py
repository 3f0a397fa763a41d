"""``xinference speak`` and ``xinference transcribe`` against the shared server with the bundled piper voice and
whisper-tiny.en: the spoken file transcribes back to its words; a wrong suffix or a chat model is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.audio_speech import MISHEARD, SENTENCE, heard
from tests.conftest import DEFAULT_MODEL, LocalServer
from xinference.cli.main import main

pytestmark = pytest.mark.slow


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_speak_then_transcribe(
    local_server: LocalServer, piper_voice_uid: str, whisper_uid: str, tmp_path: Path
) -> None:
    out = tmp_path / "said.mp3"
    # piper adds random noise to each synthesis: at this pace (tests/audio_speech.py's) Whisper tiny.en misses at
    # most MISHEARD words, at the voice's default pace more ("The Quit Brown Fox")
    spoken = run(
        "speak", "-e", local_server.endpoint, "-u", piper_voice_uid, SENTENCE, "-o", str(out), "--speed", "0.87"
    )
    assert spoken.exit_code == 0, spoken.output
    assert out.stat().st_size > 5_000 and "wrote" in spoken.output
    transcribed = run("transcribe", "-e", local_server.endpoint, "-u", whisper_uid, str(out))
    assert transcribed.exit_code == 0, transcribed.output
    assert heard(transcribed.output, MISHEARD), transcribed.output
    verbose = run("transcribe", "-e", local_server.endpoint, "-u", whisper_uid, str(out), "-f", "verbose_json")
    assert json.loads(verbose.output)["segments"]
    srt = run("transcribe", "-e", local_server.endpoint, "-u", whisper_uid, str(out), "-f", "srt")
    assert srt.output.startswith("1\n00:00:")


def test_refusals(local_server: LocalServer, piper_voice_uid: str, tmp_path: Path) -> None:
    bad_suffix = run("speak", "-e", local_server.endpoint, "-u", piper_voice_uid, "Hi.", "-o", str(tmp_path / "a.xyz"))
    assert bad_suffix.exit_code == 2 and ".mp3" in bad_suffix.output
    not_audio = run("speak", "-e", local_server.endpoint, "-u", DEFAULT_MODEL, "Hi.", "-o", str(tmp_path / "a.wav"))
    assert not_audio.exit_code == 2 and "not an audio model" in not_audio.output
