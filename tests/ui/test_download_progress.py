"""A launch that downloads, watched from the launch dialog: stage, bytes, speed and time left move while the
weights arrive from a local fake hub (``tests/model/fake_hub.py``, throttled), then Cancel stops it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer, start_local_server
from tests.model.fake_hub import FakeHub
from tests.ui.conftest import VIEWPORT, screenshot, watch
from xinference.model.download import resolve_model_path
from xinference.model.registry import ModelRegistry

pytestmark = pytest.mark.slow

REPO = "fake-org/ui-tiny-gguf"
FAMILY = {
    "model_name": "ui-hub-chat",
    "model_ability": ["chat"],
    "context_length": 2048,
    "model_specs": [
        {
            "model_format": "ggufv2",
            "model_size_in_billions": "0_135",
            "quantizations": ["Q4_1"],
            "model_id": REPO,
            "model_file_name_template": "tiny.{quantization}.gguf",
        }
    ],
}


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, FakeHub]]:
    weights = Path(resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1"))
    with FakeHub() as hub:
        hub.add(REPO, "tiny.Q4_1.gguf", weights)
        hub.rate = 4 * 1024 * 1024  # ~25 s for the ~100 MB file: time to watch it, then cancel
        server = start_local_server(
            tmp_path_factory.mktemp("ui-hub-home"),
            env={"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "XINFERENCE_MODEL_SRC": ""},
        )
        try:
            yield server, hub
        finally:
            server.stop_and_reap()


def test_download_progress_and_cancel_from_the_dialog(browser: Any, hub_server: tuple[LocalServer, FakeHub]) -> None:
    server, _ = hub_server
    registered = httpx.post(f"{server.api}/model_registrations/LLM", json={"model": json.dumps(FAMILY)}, timeout=30)
    assert registered.status_code == 200, registered.text
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        problems = watch(page)
        page.goto(f"{server.endpoint}/ui/#/launch")
        page.get_by_label("custom").check()
        page.locator(".model-card[data-model=ui-hub-chat]").get_by_role("button", name="Launch").click()
        page.locator("label.engine[data-engine='llama.cpp'] input").wait_for()
        page.click("[data-testid=launch-button]")
        stage = page.locator("[data-testid=stage]")
        page.wait_for_function(
            "() => document.querySelector('[data-testid=stage]')?.textContent.includes('downloading')", timeout=60_000
        )
        # Bytes, speed and time left appear once two samples a moment apart exist.
        page.wait_for_function(
            "() => /\\/s/.test(document.querySelector('[data-testid=download]')?.textContent || '')"
            " && /left/.test(document.querySelector('[data-testid=download]').textContent)",
            timeout=30_000,
        )
        line = page.locator("[data-testid=download]").inner_text()
        assert re.search(r"[\d.]+ MiB of [\d.]+ MiB · [\d.]+ MiB/s · \d+(m \d+)?s left", line), line
        first = float(re.findall(r"([\d.]+) MiB of", line)[0])
        page.wait_for_function(
            f"() => parseFloat(document.querySelector('[data-testid=download]').textContent) > {first}", timeout=30_000
        )
        api_view = httpx.get(f"{server.api}/models/ui-hub-chat/progress", timeout=10).json()
        assert api_view["stage"] == "downloading" and 0 < api_view["done_bytes"] < api_view["total_bytes"]
        assert "downloading" in stage.inner_text()
        [file] = api_view["files"]
        assert file["name"] == "tiny.Q4_1.gguf" and 0 < file["done_bytes"] < file["total_bytes"]
        row = page.locator("[data-testid=files] tbody tr")
        assert row.count() == 1 and row.locator("td").first.inner_text() == "tiny.Q4_1.gguf"
        assert re.search(r"MiB/s", row.inner_text())
        screenshot(page, "launch-downloading")
        # Another tab (or a reload) sees the same launch on the Running page.
        other = context.new_page()
        other.goto(f"{server.endpoint}/ui/#/running")
        other.wait_for_function(
            "() => document.querySelector('[data-testid=launch-stage]')?.textContent.includes('downloading')"
        )
        other.close()

        page.get_by_role("button", name="Cancel launch").click()
        page.get_by_text("was cancelled").wait_for(timeout=30_000)
        assert httpx.get(f"{server.api}/models/ui-hub-chat", timeout=10).status_code == 404
        # The only failed requests are the polls that found the cancelled launch gone (404).
        assert all(" 404 " in f" {r} " or r.startswith("404") for r in problems.requests), problems.requests
        assert problems.exceptions == []

        # The partial download is a cache entry: the Cluster page lists it and removes it.
        [entry] = httpx.get(f"{server.api}/cache/models", timeout=10).json()["list"]
        assert entry["partial_bytes"] > 0
        page.goto(f"{server.endpoint}/ui/#/cluster")
        row = page.locator("tr", has_text=entry["id"])
        row.get_by_role("button", name="Remove").click()
        row.wait_for(state="detached", timeout=15_000)
        assert httpx.get(f"{server.api}/cache/models", timeout=10).json()["list"] == []
    finally:
        context.close()
