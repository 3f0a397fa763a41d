"""Hub downloads, run for real against a local fake hub (``HF_ENDPOINT`` points at it; never the live hub).

In-process tests drive ``resolve_model_path`` directly; the last test runs a real ``xinference-local`` that
downloads a registered hub GGUF (the bundled SmolLM2 bytes, served by the fake hub), chats with it, and lists and
removes it through the CLI.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from click.testing import CliRunner

from tests.conftest import free_port, start_local_server
from tests.model.fake_hub import COMMIT, FakeHub
from xinference.errors import InvalidRequest, LaunchFailed, ModelNotFound
from xinference.model.cache import list_entries, remove_entry
from xinference.model.download import resolve_model_path, snapshot_files
from xinference.model.registry import ModelRegistry
from xinference.model.spec import ModelSpec

REPO = "fake-org/tiny-gguf"
GGUF_NAME = "tiny.Q4_0.gguf"
GGUF_BYTES = os.urandom(3 * 1024 * 1024 + 123)
GGUF_SPEC = ModelSpec.model_validate(
    {
        "model_format": "ggufv2",
        "model_size_in_billions": 1,
        "quantizations": ["Q4_0"],
        "model_id": REPO,
        "model_file_name_template": "tiny.{quantization}.gguf",
    }
)


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("XINFERENCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("XINFERENCE_MODEL_SRC", raising=False)
    with FakeHub() as fake:
        fake.add(REPO, GGUF_NAME, GGUF_BYTES)
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def _cache_file(tmp_path: Path) -> Path:
    return tmp_path / "home" / "cache" / "huggingface" / "fake-org--tiny-gguf" / "main" / GGUF_NAME


def test_gguf_lands_at_the_stable_path_with_progress(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int]] = []
    path = resolve_model_path(GGUF_SPEC, "Q4_0", lambda done, total: seen.append((done, total)), model_name="tiny")
    assert Path(path) == _cache_file(tmp_path).resolve()
    assert Path(path).read_bytes() == GGUF_BYTES
    fractions = [done / total for done, total in seen if total]
    assert len(fractions) >= 4 and fractions == sorted(fractions) and fractions[-1] == 1.0
    assert [r.filename for r in hub.requests if r.method == "GET"] == [GGUF_NAME]

    # cached: no hub traffic, and it works offline
    before = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model_path(GGUF_SPEC, "Q4_0") == path
    assert len(hub.requests) == before
    [entry] = list_entries()
    assert entry["id"] == "huggingface/fake-org--tiny-gguf/main" and entry["repo_id"] == REPO
    assert entry["commit"] == COMMIT and entry["model_names"] == ["tiny"] and entry["files"] == [GGUF_NAME]
    assert entry["size_bytes"] >= len(GGUF_BYTES) and entry["partial_bytes"] == 0


def test_interrupted_transfer_resumes_with_a_range_request(hub: FakeHub) -> None:
    hub.drop_after[GGUF_NAME] = 1024 * 1024
    path = resolve_model_path(GGUF_SPEC, "Q4_0")
    assert Path(path).read_bytes() == GGUF_BYTES
    first, second = hub.gets(GGUF_NAME)
    assert first.range is None and first.sent == 1024 * 1024
    assert second.range == f"bytes={1024 * 1024}-"
    assert second.sent == len(GGUF_BYTES) - 1024 * 1024


def test_cancel_stops_the_download_and_the_next_launch_resumes(hub: FakeHub, tmp_path: Path) -> None:
    hub.rate = 4 * 1024 * 1024
    cancel = threading.Event()

    def progress(done: int, total: int) -> None:
        if done >= 1024 * 1024:
            cancel.set()

    with pytest.raises(LaunchFailed, match="cancelled"):
        resolve_model_path(GGUF_SPEC, "Q4_0", progress, cancel)
    assert not _cache_file(tmp_path).exists()
    [entry] = list_entries()
    assert entry["partial_bytes"] >= 1024 * 1024

    hub.rate = None
    assert Path(resolve_model_path(GGUF_SPEC, "Q4_0")).read_bytes() == GGUF_BYTES
    resumed = hub.gets(GGUF_NAME)[-1]
    assert resumed.range is not None and resumed.sent < len(GGUF_BYTES)


def test_offline_without_cache_fails_fast(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(LaunchFailed, match="HF_HUB_OFFLINE"):
        resolve_model_path(GGUF_SPEC, "Q4_0")
    assert time.monotonic() - started < 5
    assert hub.requests == []


def test_unreachable_hub_fails_fast(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(LaunchFailed, match=r"cannot reach huggingface .* \(offline\?\)"):
        resolve_model_path(GGUF_SPEC, "Q4_0")
    assert time.monotonic() - started < 5


def test_missing_file_and_repo_say_not_found(hub: FakeHub) -> None:
    with pytest.raises(LaunchFailed, match="not found"):
        resolve_model_path(GGUF_SPEC, "Q8_0")
    other = GGUF_SPEC.model_copy(update={"model_id": "fake-org/nothing-here"})
    with pytest.raises(LaunchFailed, match="not found"):
        resolve_model_path(other, "Q4_0")


def test_snapshot_fetches_weights_config_and_tokenizer_only(hub: FakeHub, tmp_path: Path) -> None:
    repo = "fake-org/tiny-pytorch"
    wanted = {
        "config.json": b"{}",
        "model.safetensors": os.urandom(200_000),
        "tokenizer.json": b"{}",
        "1_Pooling/config.json": b"{}",
    }
    skipped = {"pytorch_model.bin": b"x", "onnx/model.onnx": b"x", "README.md": b"x", "onnx/config.json": b"{}"}
    for name, content in {**wanted, **skipped}.items():
        hub.add(repo, name, content)
    spec = ModelSpec.model_validate(
        {"model_format": "pytorch", "model_size_in_billions": 1, "quantizations": ["none"], "model_id": repo}
    )
    seen: list[tuple[int, int]] = []
    folder = Path(resolve_model_path(spec, "none", lambda d, t: seen.append((d, t))))
    assert folder == (tmp_path / "home" / "cache" / "huggingface" / "fake-org--tiny-pytorch" / "main").resolve()
    for name, content in wanted.items():
        assert (folder / name).read_bytes() == content
    assert {r.filename for r in hub.requests if r.method == "GET"} == set(wanted)
    assert seen[-1][0] == seen[-1][1] == sum(len(c) for c in wanted.values())
    before = len(hub.requests)
    assert Path(resolve_model_path(spec, "none")) == folder and len(hub.requests) == before


def test_snapshot_file_selection() -> None:
    names = ["a.bin", "b.safetensors", "config.json", "onnx/x.json", "README.md", "tokenizer.model"]
    assert snapshot_files(names) == ["b.safetensors", "config.json", "tokenizer.model"]
    assert snapshot_files(["pytorch_model.bin", "config.json"]) == ["pytorch_model.bin", "config.json"]


def test_model_path_overrides_the_hub(hub: FakeHub, tmp_path: Path) -> None:
    local = tmp_path / "weights"
    local.mkdir()
    (local / GGUF_NAME).write_bytes(b"GGUF")
    assert resolve_model_path(GGUF_SPEC, "Q4_0", model_path=str(local)) == str(local / GGUF_NAME)
    assert resolve_model_path(GGUF_SPEC, "Q4_0", model_path=str(local / GGUF_NAME)) == str(local / GGUF_NAME)
    with pytest.raises(LaunchFailed, match="does not exist"):
        resolve_model_path(GGUF_SPEC, "Q4_0", model_path=str(tmp_path / "nope"))
    with pytest.raises(LaunchFailed, match="absolute"):
        resolve_model_path(GGUF_SPEC, "Q4_0", model_path="relative/x.gguf")
    assert hub.requests == []


def test_remove_entry_stays_inside_the_cache(hub: FakeHub, tmp_path: Path) -> None:
    resolve_model_path(GGUF_SPEC, "Q4_0")
    victim = tmp_path / "home" / "keep.txt"
    victim.write_text("x")
    for bad in (
        "../keep.txt",
        "huggingface/../../keep.txt",
        "huggingface/fake-org--tiny-gguf",
        "huggingface/a/b/c",
        "/etc/passwd",
        "other/a/b",
        "huggingface/fake-org--tiny-gguf/..",
    ):
        with pytest.raises(InvalidRequest):
            remove_entry(bad)
    with pytest.raises(ModelNotFound):
        remove_entry("huggingface/fake-org--nothing/main")
    removed = remove_entry("huggingface/fake-org--tiny-gguf/main")
    assert removed["freed_bytes"] >= len(GGUF_BYTES)
    assert list_entries() == [] and victim.exists()
    assert not (tmp_path / "home" / "cache" / "huggingface" / "fake-org--tiny-gguf").exists()


# -- through a real server: launch with progress, chat, list, remove, cancel ------------------------------------
def _cli(*args: str) -> object:
    from xinference.cli.main import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_server_downloads_lists_removes_and_cancels(tmp_path: Path) -> None:
    bundled = Path(resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1"))
    family = {
        "model_name": "tiny-hub-chat",
        "model_ability": ["chat", "generate"],
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
    with FakeHub() as hub:
        hub.add(REPO, "tiny.Q4_1.gguf", bundled)
        hub.rate = 40 * 1024 * 1024  # ~2.5 s for the 98 MB file: long enough to watch the progress
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "XINFERENCE_MODEL_SRC": ""}
        server = start_local_server(tmp_path, env=env)
        try:
            _run_server_scenario(server.endpoint, family, hub)
        finally:
            children = server.descendants()
            server.stop()
            for proc in psutil.wait_procs(children, timeout=15)[1]:
                proc.kill()


def _run_server_scenario(endpoint: str, family: dict[str, object], hub: FakeHub) -> None:
    import json

    api = f"{endpoint}/v1"
    response = httpx.post(f"{api}/model_registrations/LLM", json={"model": json.dumps(family)}, timeout=30)
    assert response.status_code == 200, response.text

    result = _cli("launch", "-e", endpoint, "-n", "tiny-hub-chat", "-en", "llama.cpp", "--n_ctx", "2048")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert "Downloading [" in result.stderr and "100.0%" in result.stderr  # type: ignore[attr-defined]
    assert "Model uid: tiny-hub-chat" in result.stdout  # type: ignore[attr-defined]
    assert httpx.get(f"{api}/models/tiny-hub-chat/progress", timeout=10).json()["progress"] == 1.0

    chat = httpx.post(
        f"{api}/chat/completions",
        timeout=60,
        json={"model": "tiny-hub-chat", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4},
    )
    assert chat.status_code == 200, chat.text

    listed = _cli("cached", "-e", endpoint)
    assert REPO in listed.stdout and "tiny-hub-chat" in listed.stdout  # type: ignore[attr-defined]
    assert httpx.delete(f"{api}/models/tiny-hub-chat", timeout=60).status_code == 200
    entry = "huggingface/fake-org--tiny-gguf/main"
    removed = _cli("remove-cache", "-e", endpoint, "--entry", entry, "-y")
    assert removed.exit_code == 0 and f"Removed {entry}" in removed.stdout  # type: ignore[attr-defined]
    assert REPO not in _cli("cached", "-e", endpoint).stdout  # type: ignore[attr-defined]

    # cancel: the cache is empty again, so this launch downloads; stop it half-way
    hub.rate = 8 * 1024 * 1024
    assert (
        httpx.post(
            f"{api}/models",
            params={"wait_ready": "false"},
            timeout=30,
            json={"model_name": "tiny-hub-chat", "model_engine": "llama.cpp"},
        ).status_code
        == 200
    )
    deadline = time.monotonic() + 30
    progress = 0.0
    while progress <= 0.0 and time.monotonic() < deadline:
        progress = httpx.get(f"{api}/models/tiny-hub-chat/progress", timeout=10).json()["progress"]
        time.sleep(0.2)
    assert 0.0 < progress < 1.0
    assert httpx.post(f"{api}/models/tiny-hub-chat/cancel", timeout=10).status_code == 200
    while time.monotonic() < deadline:
        if httpx.get(f"{api}/models/tiny-hub-chat", timeout=10).status_code == 404:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the cancelled launch did not go away")
    [partial] = httpx.get(f"{api}/cache/models", timeout=10).json()["list"]
    assert 0 < partial["partial_bytes"] and "tiny.Q4_1.gguf" not in partial["files"]


def test_hub_choice_and_modelscope_hint(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    both = GGUF_SPEC.model_copy(update={"model_hub_ids": {"modelscope": "ms-org/tiny-gguf"}})
    assert importlib.util.find_spec("modelscope") is None  # an optional extra, not installed here
    with pytest.raises(LaunchFailed, match=r"xinference\[modelscope\]"):
        resolve_model_path(both, "Q4_0", download_hub="modelscope")
    monkeypatch.setenv("XINFERENCE_MODEL_SRC", "modelscope")
    with pytest.raises(LaunchFailed, match=r"xinference\[modelscope\]"):
        resolve_model_path(both, "Q4_0")
    # the spec names no ModelScope repository: XINFERENCE_MODEL_SRC falls back to Hugging Face
    assert Path(resolve_model_path(GGUF_SPEC, "Q4_0")).read_bytes() == GGUF_BYTES
    with pytest.raises(LaunchFailed, match="no modelscope repository"):
        resolve_model_path(GGUF_SPEC, "Q4_0", download_hub="modelscope")


def test_launch_request_carries_model_path_and_hub() -> None:
    from pydantic import ValidationError

    from xinference.api.admin.models.protocol import LaunchModelRequest

    launch = LaunchModelRequest.model_validate(
        {"model_name": "x", "model_path": "/weights/x", "download_hub": "modelscope", "n_ctx": 1}
    ).to_launch()
    assert launch["model_path"] == "/weights/x" and launch["download_hub"] == "modelscope"
    assert launch["engine_kwargs"] == {"n_ctx": 1}
    for bad in ({"model_path": "rel/x"}, {"model_path": "/a\x00b"}, {"download_hub": "elsewhere"}):
        with pytest.raises(ValidationError):
            LaunchModelRequest.model_validate({"model_name": "x", **bad})
