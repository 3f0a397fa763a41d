"""With ``XINFERENCE_API_KEYS`` set: /ui/ itself loads without a key, asks for one, shows a wrong key's 401
message, then works with the right key (sent as a Bearer token and kept in the browser)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer, start_local_server
from tests.ui.conftest import VIEWPORT, screenshot, watch

KEY = "sk-ui-test-key"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = start_local_server(tmp_path_factory.mktemp("ui-keys-home"), env={"XINFERENCE_API_KEYS": KEY})
    try:
        yield server
    finally:
        server.stop_and_reap()


def test_key_prompt_wrong_key_then_a_working_session(browser: Any, keyed_server: LocalServer) -> None:
    assert httpx.get(f"{keyed_server.endpoint}/ui/", timeout=10).status_code == 200  # the page needs no key
    assert httpx.get(f"{keyed_server.api}/models", timeout=10).status_code == 401  # its API calls do
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        problems = watch(page)
        page.goto(f"{keyed_server.endpoint}/ui/")
        prompt = page.locator("[data-testid=key-prompt]")
        prompt.wait_for()
        screenshot(page, "key-prompt")
        assert page.locator(".model-card").count() == 0  # nothing behind the prompt is loaded without a key

        page.fill("[data-testid=key-prompt] input", "wrong-key")
        page.click("[data-testid=key-prompt] button")
        alert = prompt.locator("[role=alert]")
        alert.wait_for()
        expected = httpx.get(
            f"{keyed_server.api}/models", headers={"Authorization": "Bearer wrong-key"}, timeout=10
        ).json()["error"]["message"]
        assert alert.inner_text() == expected
        # The only failure on the page is that deliberate 401.
        assert [r for r in problems.requests if "/v1/models" not in r] == []
        problems.clear()

        page.fill("[data-testid=key-prompt] input", KEY)
        page.click("[data-testid=key-prompt] button")
        prompt.wait_for(state="detached")
        page.locator(".model-card").first.wait_for()
        assert page.locator("[data-testid=version]").inner_text().startswith("v")
        assert page.evaluate("localStorage.getItem('xinference.apiKey')") == KEY

        # The key is remembered: a reload goes straight to the pages.
        page.reload()
        page.locator(".model-card").first.wait_for()
        assert page.locator("[data-testid=key-prompt]").count() == 0
        page.goto(f"{keyed_server.endpoint}/ui/#/cluster")
        page.locator(".worker").first.wait_for()
        assert problems.all() == []

        # A key that stops working (rotated on the server) brings the prompt back with the server's message.
        page.evaluate("localStorage.setItem('xinference.apiKey', 'revoked')")
        page.goto(f"{keyed_server.endpoint}/ui/#/running")
        page.reload()
        prompt.wait_for()
        assert "API key" in prompt.locator("[role=alert]").inner_text()
    finally:
        context.close()
