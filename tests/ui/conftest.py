"""Browser tests of the web UI: Playwright for Python driving Debian's Chromium (``/usr/bin/chromium``).

Never a browser download: ``make test`` installs the ``chromium`` package when it is missing. When Chromium
cannot start, the tests fail (they do not skip): a UI nobody can test is a broken UI.

Screenshots land in ``tests/ui/artifacts/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LocalServer, start_local_server

CHROMIUM = os.environ.get("XINFERENCE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module; fails the module when it cannot start."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - the dev extras install it
        pytest.fail(f"playwright is not installed ({exc}); run `make dev`")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing; `make test` installs it (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        except Exception as exc:  # noqa: BLE001 - any launch failure fails the tests, with its message
            pytest.fail(f"Chromium ({CHROMIUM}) did not start: {exc}")
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def browser_page(browser: Any) -> Iterator[Any]:
    """A page in a browser context of its own at the suite's viewport, with a 30 s wait limit; closed after."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A fresh page for one test (a module that keeps one page across its tests defines its own)."""
    with browser_page(browser) as fresh:
        yield fresh


def stop_server(server: LocalServer) -> None:
    server.stop_and_reap()


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """This module's own ``xinference-local``, nothing launched."""
    server = start_local_server(tmp_path_factory.mktemp("ui-home"))
    try:
        yield server
    finally:
        server.stop_and_reap()


@dataclass
class PageProblems:
    """Everything that went wrong in a page: console errors, uncaught exceptions, failed or 4xx/5xx requests."""

    console: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return self.console + self.exceptions + self.requests

    def clear(self) -> None:
        self.console.clear()
        self.exceptions.clear()
        self.requests.clear()


def watch(page: Any) -> PageProblems:
    """Record the page's problems from now on."""
    problems = PageProblems()
    page.on("console", lambda m: m.type == "error" and problems.console.append(m.text))
    page.on("pageerror", lambda e: problems.exceptions.append(str(e)))

    def failed(request: Any) -> None:
        # A stream the page itself aborted (the Stop button) is not a failure.
        if request.failure and "ERR_ABORTED" in request.failure:
            return
        problems.requests.append(f"{request.method} {request.url}: {request.failure}")

    page.on("requestfailed", failed)
    page.on("response", lambda r: r.status >= 400 and problems.requests.append(f"{r.status} {r.url}"))
    return problems


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
