"""``xinference transcribe`` and ``xinference speak``: a running audio model used from the shell.

``transcribe`` uploads an audio file to a speech-to-text model and prints the transcript (``--format`` text, json,
verbose_json, srt or vtt; ``--translate`` asks for English text); ``speak`` sends a text (an argument, or ``-`` for
stdin) to a text-to-speech model and writes the audio to ``--output``, in the format its suffix names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from xinference.cli.options import client_session, connection_options
from xinference.client import Client, RESTfulAudioModelHandle

__all__ = ["COMMANDS", "speak", "transcribe"]

_TRANSCRIPT_FORMATS = ("text", "json", "verbose_json", "srt", "vtt")
_SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")


def _audio_handle(client: Client, model_uid: str) -> RESTfulAudioModelHandle:
    handle = client.get_model(model_uid)
    if not isinstance(handle, RESTfulAudioModelHandle):
        raise click.UsageError(f"model {model_uid!r} is not an audio model")
    return handle


@click.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running speech-to-text model.")
@click.argument("audio", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--language", default=None, help="Spoken language (ISO-639-1); detected when left out.")
@click.option("--prompt", default=None, help="Text that guides the style or continues an earlier segment.")
@click.option(
    "-f", "--format", "response_format", type=click.Choice(_TRANSCRIPT_FORMATS), default="text", show_default=True
)
@click.option("--translate", is_flag=True, help="Translate into English instead (a multilingual model).")
@connection_options
def transcribe(
    model_uid: str,
    audio: Path,
    language: str | None,
    prompt: str | None,
    response_format: str,
    translate: bool,
    endpoint: str,
    api_key: str | None,
) -> None:
    """Print the words spoken in AUDIO (wav, mp3, m4a, ogg, webm or flac)."""
    with client_session(endpoint, api_key) as client:
        handle = _audio_handle(client, model_uid)
        call = handle.translations if translate else handle.transcriptions
        answer = call(audio.read_bytes(), language=language, prompt=prompt, response_format=response_format)
    if isinstance(answer, str):
        click.echo(answer.rstrip("\n"))
    elif response_format == "text":
        click.echo(answer.get("text", ""))
    else:
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False))


@click.command()
@click.option("-u", "--model-uid", required=True, help="Uid of the running text-to-speech model.")
@click.argument("text")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Audio file to write; its suffix picks the format (mp3, opus, aac, flac, wav, pcm).",
)
@click.option("--voice", default="", help="Voice to speak with (default: the model's own).")
@click.option("--speed", type=click.FloatRange(0.25, 4.0), default=1.0, show_default=True)
@connection_options
def speak(
    model_uid: str, text: str, output: Path, voice: str, speed: float, endpoint: str, api_key: str | None
) -> None:
    """Speak TEXT (`-` reads it from stdin) with a running text-to-speech model into an audio file."""
    if text == "-":
        text = sys.stdin.read()
    response_format = output.suffix.lstrip(".").lower()
    if response_format not in _SPEECH_FORMATS:
        raise click.BadParameter(
            f"the file name must end in one of {', '.join('.' + f for f in _SPEECH_FORMATS)}", param_hint="--output"
        )
    with client_session(endpoint, api_key) as client:
        handle = _audio_handle(client, model_uid)
        written = 0
        audio = handle.speech(text, voice=voice, response_format=response_format, speed=speed, stream=True)
        with output.open("wb") as out:
            for piece in [audio] if isinstance(audio, bytes) else audio:
                written += out.write(piece)
    click.echo(f"wrote {written} bytes of {response_format} to {output}")


COMMANDS = (transcribe, speak)
