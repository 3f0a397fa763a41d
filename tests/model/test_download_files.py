"""Per-file download progress (``file_progress``), against the local fake hub: what the launch progress lists."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model.fake_hub import FakeHub
from xinference.core.load_progress import LoadProgress
from xinference.model.download import resolve_model_path
from xinference.model.spec import ModelSpec

REPO = "fake-org/files-pytorch"
FILES = {"config.json": b"{}", "model.safetensors": os.urandom(300_000), "tokenizer.json": b'{"t": 1}'}


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path / "home"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "XINFERENCE_MODEL_SRC"):
        monkeypatch.delenv(name, raising=False)
    with FakeHub() as fake:
        for name, content in FILES.items():
            fake.add(REPO, name, content)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def test_every_file_reports_its_own_bytes(hub: FakeHub) -> None:
    spec = ModelSpec.model_validate(
        {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": REPO}
    )
    seen: dict[str, list[tuple[int, int | None]]] = {}
    resolve_model_path(
        spec, "none", file_progress=lambda name, done, size: seen.setdefault(name, []).append((done, size))
    )
    assert set(seen) == set(FILES)
    for name, content in FILES.items():
        assert seen[name][0] == (0, len(content))  # announced before its first byte
        assert seen[name][-1] == (len(content), len(content))
        assert [d for d, _ in seen[name]] == sorted(d for d, _ in seen[name])

    # The load status lists them, the most recent first, with what each has done.
    load = LoadProgress()
    for name, updates in seen.items():
        for done, size in updates:
            load.update_file(name, done, size)
    files = load.snapshot()["files"]
    assert [f["name"] for f in files] == list(reversed(list(seen)))
    assert all(f["done_bytes"] == f["total_bytes"] == len(FILES[f["name"]]) for f in files)
