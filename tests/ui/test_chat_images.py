"""Images in the chat page, in a real headless Chromium against a real ``xinference-local`` with the tiny random
LLaVA (``tests/vision_models.py``) launched on the Transformers engine: a picture attached with the file picker is
shown in the composer, sent as an ``image_url`` part with a ``data:`` URI, answered (the usage counts its image
tokens), and shown as a thumbnail in the conversation; pasting and dropping an image attach it too, and a file
that is not an image is left out."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer, start_local_server
from tests.ui.conftest import browser_page, screenshot, watch
from tests.vision_models import IMAGE_TOKENS, build_tiny_llava, launched_vision_model

pytestmark = pytest.mark.slow

NAME = "tiny-llava-ui"


def png(colour: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    pytest.importorskip("transformers")
    folder: Path = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))
    server = start_local_server(tmp_path_factory.mktemp("ui-vision-home"), env={"HF_HUB_OFFLINE": "1"})
    try:
        with launched_vision_model(server, NAME, folder, model_engine="Transformers"):
            yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="module")
def page(browser: Any, server: LocalServer) -> Iterator[Any]:
    with browser_page(browser) as shared:
        yield shared


def test_attach_a_picture_send_it_and_see_it_in_the_conversation(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/chat/{NAME}")
    page.locator("[data-testid=attach-image]").wait_for()  # the model has the vision ability
    page.fill("[data-testid=temperature]", "0")
    page.fill("[data-testid=max-tokens]", "6")
    page.locator("[data-testid=image-file]").set_input_files(
        {"name": "red.png", "mimeType": "image/png", "buffer": png((220, 20, 20))}
    )
    composer = page.locator("[data-testid=attached-images] [data-testid=thumbnail]")
    composer.wait_for()
    picked = composer.get_attribute("src") or ""
    assert base64.b64decode(picked.removeprefix("data:image/png;base64,")) == png((220, 20, 20))  # the file itself
    page.fill("[data-testid=chat-input]", "What is in this image?")
    with page.expect_request("**/v1/chat/completions") as sent:
        page.click("[data-testid=send]")
    content = sent.value.post_data_json["messages"][-1]["content"]
    assert content[0] == {"type": "image_url", "image_url": {"url": picked}}
    assert content[1] == {"type": "text", "text": "What is in this image?"}

    answer = page.locator(".msg.assistant[data-done='1']")
    answer.wait_for(timeout=120_000)
    assert page.locator("[data-testid=attached-images]").count() == 0  # the composer is empty again
    shown = page.locator(".msg.user [data-testid=message-images] [data-testid=thumbnail]")
    assert shown.count() == 1 and shown.get_attribute("src") == picked
    assert shown.evaluate("img => img.complete && img.naturalWidth") == 64  # the picture itself, decoded
    assert answer.locator(".error-box").count() == 0
    stats = answer.locator("[data-testid=msg-stats]").inner_text()
    prompt_tokens = int(stats.split(" prompt")[0].split()[-1])
    text_only = httpx.post(
        f"{server.api}/chat/completions",
        json={
            "model": NAME,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this image?"}]}],
            "max_tokens": 1,
        },
        timeout=60,
    ).json()
    assert prompt_tokens - text_only["usage"]["prompt_tokens"] == IMAGE_TOKENS + 1  # "<image>\n" became 16 + 1
    screenshot(page, "chat-image")
    assert problems.all() == []


def test_paste_and_drop_attach_images(page: Any, server: LocalServer) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/chat/{NAME}")
    page.reload()
    page.locator("[data-testid=attach-image]").wait_for()
    # Chromium builds the clipboard and drop events from a DataTransfer holding a File, as a real paste
    # (a screenshot copied) and a real drop (a file dragged from the desktop) deliver them; a text file is ignored.
    page.evaluate(
        """async (encoded) => {
          const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
          const picture = new File([bytes], "pasted.png", { type: "image/png" });
          const pasted = new DataTransfer();
          pasted.items.add(picture);
          document.querySelector("[data-testid=chat-input]").dispatchEvent(
            new ClipboardEvent("paste", { clipboardData: pasted, bubbles: true, cancelable: true }));
          const dropped = new DataTransfer();
          dropped.items.add(new File([bytes], "dropped.png", { type: "image/png" }));
          dropped.items.add(new File(["just words"], "notes.txt", { type: "text/plain" }));
          document.querySelector("form.composer").dispatchEvent(
            new DragEvent("drop", { dataTransfer: dropped, bubbles: true, cancelable: true }));
        }""",
        base64.b64encode(png((10, 20, 230))).decode(),
    )
    thumbs = page.locator("[data-testid=attached-images] [data-testid=thumbnail]")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=attached-images] img').length === 2")
    assert thumbs.evaluate_all("imgs => imgs.map((i) => i.alt)") == ["pasted.png", "dropped.png"]
    page.get_by_role("button", name="Remove pasted.png").click()
    assert thumbs.evaluate_all("imgs => imgs.map((i) => i.alt)") == ["dropped.png"]
    # an image alone (no text) can be sent
    assert page.locator("[data-testid=send]").is_enabled()
    with page.expect_request("**/v1/chat/completions") as sent:
        page.click("[data-testid=send]")
    assert [p["type"] for p in sent.value.post_data_json["messages"][-1]["content"]] == ["image_url"]
    page.locator(".msg.assistant[data-done='1']").wait_for(timeout=120_000)
    assert page.locator(".msg.assistant .error-box").count() == 0
    assert problems.all() == []
