"""Image models in a real headless Chromium against a real ``xinference-local`` (offline), with the tiny random
Stable Diffusion pipeline registered and launched: the Launch page lists the catalog's image models (and says why a
GPU-only one cannot run here), the Images page draws the images asked for (size, count, steps, seed) into a gallery
with downloads, the same seed draws the same images again, a bad size shows the server's 400, and Stop aborts a
long generation."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer, start_local_server
from tests.diffusion_models import build_tiny_sd, launched_tiny_sd
from tests.ui.conftest import browser_page, screenshot, watch

pytestmark = pytest.mark.slow

MODEL = "tiny-sd-ui"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    pytest.importorskip("diffusers", reason="the image extra is not installed (pip install 'xinference[image]')")
    server = start_local_server(tmp_path_factory.mktemp("ui-images-home"), env={"HF_HUB_OFFLINE": "1"})
    try:
        yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="module")
def tiny_model(server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = build_tiny_sd(tmp_path_factory.mktemp("diffusion") / "tiny-sd")
    with launched_tiny_sd(server, MODEL, path, num_inference_steps=2):
        yield MODEL


@pytest.fixture(scope="module")
def page(browser: Any, server: LocalServer) -> Iterator[Any]:
    with browser_page(browser) as shared:
        yield shared


def test_the_launch_page_lists_image_models(page: Any, server: LocalServer, tiny_model: str) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.locator(".model-card").first.wait_for()
    page.get_by_label("Model type").select_option("image")
    page.locator(".model-card[data-model='sd-turbo']").wait_for()
    types = page.locator(".model-card .badge").all_inner_texts()
    assert set(types) - {"cached", "bundled", "custom"} == {"image"}
    assert "text2image" in page.locator(".model-card[data-model='FLUX.1-dev'] .tag").all_inner_texts()
    page.locator(".model-card[data-model='FLUX.1-dev']").get_by_role("button", name="Launch").click()
    reason = page.locator("label.engine[data-engine=diffusers] .reason")
    reason.wait_for()
    assert "needs a CUDA GPU" in reason.inner_text()
    page.locator(".modal-head button[aria-label=Close]").click()
    assert problems.all() == []


def _gallery_sizes(page: Any) -> list[list[int]]:
    return page.locator("[data-testid=gallery-image]").evaluate_all(  # type: ignore[no-any-return]
        "imgs => imgs.map(i => [i.naturalWidth, i.naturalHeight])"
    )


def test_draw_on_the_images_page(page: Any, server: LocalServer, tiny_model: str) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/images/{tiny_model}")
    page.fill("[data-testid=image-prompt]", "a small red house")
    page.fill("[data-testid=image-size]", "96x64")
    page.fill("[data-testid=image-n]", "2")
    page.fill("[data-testid=image-steps]", "2")
    page.fill("[data-testid=image-seed]", "42")
    page.click("[data-testid=generate]")
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=gallery-image]').length === 2", timeout=120_000
    )
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=gallery-image]')].every(i => i.complete)")
    assert _gallery_sizes(page) == [[96, 64], [96, 64]]
    first = page.locator("[data-testid=gallery-image]").evaluate_all("imgs => imgs.map(i => i.src)")
    download = page.locator("[data-testid=image-download]").first
    assert download.get_attribute("download") == "image-42-0.png"
    href = download.get_attribute("href") or ""
    assert href.startswith("data:image/png;base64,") and base64.b64decode(href.split(",", 1)[1])[:4] == b"\x89PNG"
    assert "seed 42" in page.locator(".gallery-item figcaption").first.inner_text()

    # the same seed again: the same two images, now first in the gallery
    page.click("[data-testid=generate]")
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=gallery-image]').length === 4", timeout=120_000
    )
    again = page.locator("[data-testid=gallery-image]").evaluate_all("imgs => imgs.map(i => i.src)")
    assert again[:2] == first
    screenshot(page, "images-gallery")
    assert problems.all() == []


def test_a_bad_size_shows_the_servers_message(page: Any, server: LocalServer, tiny_model: str) -> None:
    expected = httpx.post(
        f"{server.api}/images/generations", json={"model": tiny_model, "prompt": "x", "size": "65x64"}, timeout=30
    )
    assert expected.status_code == 400
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/images/{tiny_model}")
    page.reload()
    page.fill("[data-testid=image-size]", "65x64")
    page.click("[data-testid=generate]")
    box = page.locator("[data-testid=image-form] .error-box")
    box.wait_for(timeout=30_000)
    assert box.inner_text() == expected.json()["error"]["message"]
    assert [r for r in problems.requests if "/v1/images/generations" not in r] == []
    assert [c for c in problems.console if "status of 400" not in c] == [] and problems.exceptions == []


def test_stop_aborts_a_long_generation(page: Any, server: LocalServer, tiny_model: str) -> None:
    problems = watch(page)
    page.goto(f"{server.endpoint}/ui/#/images/{tiny_model}")
    page.reload()
    page.fill("[data-testid=image-size]", "128x128")
    page.fill("[data-testid=image-steps]", "200")
    page.click("[data-testid=generate]")
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=image-progress]'); return p && p.value > 0; }",
        timeout=120_000,
    )
    page.click("[data-testid=stop-generation]")
    box = page.locator("[data-testid=image-form] .error-box")
    box.wait_for(timeout=60_000)
    assert "aborted" in box.inner_text()
    assert page.locator("[data-testid=generate]").is_enabled()
    assert page.locator("[data-testid=gallery-image]").count() == 0
    assert [c for c in problems.console if "status of 409" not in c] == [] and problems.exceptions == []
