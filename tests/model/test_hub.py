"""The hub package: the registry, HubDownload driving any adapter, and ModelScope against a local fake package.

Hugging Face transfers run against the fake HTTP hub in ``test_download.py``; here ModelScope's optional package is
replaced by a fake one in ``sys.modules`` (it is not installed), and a dict-backed adapter shows that HubDownload
needs nothing but the :class:`Hub` protocol.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from xinference.errors import LaunchFailed
from xinference.model import hub
from xinference.model.download import snapshot_files
from xinference.model.hub import HUB_FACTORIES, HUBS, HubDownload, RemoteFile, get_hub
from xinference.model.hub.registry import HUB_FACTORIES as REGISTRY


def test_registry_names_every_hub_once_in_fallback_order() -> None:
    assert HUBS == ("huggingface", "modelscope")
    assert HUB_FACTORIES is REGISTRY
    for name in HUBS:
        adapter = get_hub(name)
        assert adapter.name == name
        for method in ("check_online", "list_files", "resolve", "fetch"):
            assert callable(getattr(adapter, method))
    with pytest.raises(LaunchFailed, match="unknown download hub 'civitai'; use one of huggingface, modelscope"):
        get_hub("civitai")


def test_public_names_stay_importable_from_the_package() -> None:
    for name in (
        "HUBS",
        "META_DIR",
        "HubDownload",
        "FileProgressCallback",
        "ProgressCallback",
        "hf_endpoint",
        "hub_offline",
        "repo_folder",
        "revision_folder",
    ):
        assert name in hub.__all__ and hasattr(hub, name)
    assert hub.repo_folder("org/name") == "org--name"
    with pytest.raises(LaunchFailed):
        hub.repo_folder("../escape")


class DictHub:
    """A hub adapter serving files from a dict, counting what it was asked."""

    name = "huggingface"  # borrows a registered name, so the cache folder is a real one

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.fetched: list[str] = []

    def check_online(self, job: HubDownload) -> None:
        pass

    def list_files(self, repo_id: str, revision: str | None) -> dict[str, int | None]:
        return {name: len(data) for name, data in self.files.items()}

    def resolve(self, repo_id: str, revision: str | None, filename: str) -> RemoteFile:
        return RemoteFile(filename, etag=f"e-{filename}", size=len(self.files[filename]), commit="c0ffee")

    def fetch(self, job: HubDownload, remote: RemoteFile) -> None:
        job.check_cancel()
        path = job.path_of(remote.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.files[remote.name])
        job.advanced(remote.name, len(self.files[remote.name]), remote.size)
        self.fetched.append(remote.name)


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_hub_download_drives_any_adapter_and_then_serves_from_cache(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = DictHub(
        {"config.json": b"{}", "model.safetensors": b"x" * 1000, "sub/tokenizer.json": b"[]", "README.md": b"hi"}
    )
    monkeypatch.setitem(HUB_FACTORIES, "huggingface", lambda: adapter)
    seen: list[tuple[int, int]] = []
    folder = Path(
        HubDownload("huggingface", "org/repo", progress=lambda d, t: seen.append((d, t))).snapshot(snapshot_files)
    )
    assert folder == home / "cache" / "huggingface" / "org--repo" / "main"
    assert sorted(adapter.fetched) == ["config.json", "model.safetensors", "sub/tokenizer.json"]
    assert (folder / "sub" / "tokenizer.json").read_bytes() == b"[]"
    assert seen[-1] == (1004, 1004) and all(done <= total for done, total in seen)
    adapter.fetched.clear()
    HubDownload("huggingface", "org/repo").snapshot(snapshot_files)
    assert adapter.fetched == []  # every file cached with its size: the hub is not asked again


def test_a_file_name_leaving_the_cache_is_refused(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = DictHub({"../../evil.json": b"{}"})
    monkeypatch.setitem(HUB_FACTORIES, "huggingface", lambda: adapter)
    with pytest.raises(LaunchFailed, match="refusing the repository file name"):
        HubDownload("huggingface", "org/repo").snapshot(snapshot_files)
    assert adapter.fetched == []


# -- ModelScope, with a fake ``modelscope`` package ------------------------------------------------------------


class FakeModelScope:
    """Stands in for ``modelscope.hub.api.HubApi`` and ``modelscope.hub.file_download``."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.downloads: list[tuple[str, str, str]] = []
        self.fail: Exception | None = None
        self.on_download: Any = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = self
        package, hub_module = types.ModuleType("modelscope"), types.ModuleType("modelscope.hub")
        api, file_download = types.ModuleType("modelscope.hub.api"), types.ModuleType("modelscope.hub.file_download")

        class HubApi:
            def get_model_files(self, repo_id: str, revision: str, recursive: bool) -> list[dict[str, Any]]:
                return [{"Path": "sub", "Type": "tree"}] + [
                    {"Path": name, "Type": "blob", "Size": len(data)} for name, data in fake.files.items()
                ]

        def model_file_download(repo_id: str, name: str, revision: str, local_dir: str) -> str:
            if fake.fail is not None:
                raise fake.fail
            fake.downloads.append((repo_id, name, revision))
            path = Path(local_dir) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(fake.files[name])
            if fake.on_download is not None:
                fake.on_download(name)
            return str(path)

        api.HubApi = HubApi  # type: ignore[attr-defined]
        file_download.model_file_download = model_file_download  # type: ignore[attr-defined]
        package.hub = hub_module  # type: ignore[attr-defined]
        hub_module.api, hub_module.file_download = api, file_download  # type: ignore[attr-defined]
        for module in (package, hub_module, api, file_download):
            monkeypatch.setitem(sys.modules, module.__name__, module)


@pytest.fixture()
def modelscope(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelScope]:
    fake = FakeModelScope(
        {"config.json": b"{}", "model.safetensors": b"w" * 500, "tokenizer.model": b"t" * 20, "image.png": b"no"}
    )
    fake.install(monkeypatch)
    yield fake


def test_modelscope_snapshot_fetches_the_picked_files_with_per_file_progress(
    modelscope: FakeModelScope, home: Path
) -> None:
    files: list[tuple[str, int, int | None]] = []
    folder = Path(
        HubDownload("modelscope", "ms/repo", file_progress=lambda n, d, s: files.append((n, d, s))).snapshot(
            snapshot_files
        )
    )
    assert folder == home / "cache" / "modelscope" / "ms--repo" / "main"
    assert sorted(n for _, n, _ in modelscope.downloads) == ["config.json", "model.safetensors", "tokenizer.model"]
    assert {rev for _, _, rev in modelscope.downloads} == {"master"}
    assert ("model.safetensors", 500, 500) in files
    modelscope.downloads.clear()
    HubDownload("modelscope", "ms/repo").snapshot(snapshot_files)
    assert modelscope.downloads == []


def test_modelscope_single_file_and_its_failure_text(modelscope: FakeModelScope) -> None:
    path = HubDownload("modelscope", "ms/repo", "v1").file("config.json")
    assert Path(path).read_bytes() == b"{}" and modelscope.downloads == [("ms/repo", "config.json", "v1")]
    modelscope.fail = ConnectionError("no route to host")
    with pytest.raises(LaunchFailed, match="'tokenizer.model' of 'ms/repo' from modelscope failed: ConnectionError"):
        HubDownload("modelscope", "ms/repo", "v1").file("tokenizer.model")


def test_modelscope_cancel_stops_between_files(modelscope: FakeModelScope) -> None:
    cancel = threading.Event()
    modelscope.on_download = lambda name: cancel.set()
    with pytest.raises(LaunchFailed, match="was cancelled"):
        HubDownload("modelscope", "ms/repo", cancel=cancel).snapshot(snapshot_files)
    assert len(modelscope.downloads) == 1
