"""What ``xinference-local`` loads before its first request: no heavy library it does not need.

Each check runs in a fresh interpreter (a subprocess), because this test process has long since imported
everything. The list holds libraries that cost start time and idle memory and that no part of the control plane or
the first request's path needs in the API process: a change that pulls one in again fails here, with the chain of
imports that did it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: Not to be imported by the platform process before a request needs them
HEAVY_MODULES = (
    "pandas",
    "scipy",
    "torch",
    "transformers",
    "sentence_transformers",
    "huggingface_hub",
    "xllamacpp",
    "numba",
    "sklearn",
    "PIL",
    "diffusers",
    "faster_whisper",
    "ctranslate2",
    "piper",
    "onnxruntime",
    "jinja2",
    # The MCP SDK (~0.4 s, ~23 MiB): the client hub loads it with its first connection (``api/mcp/link.py``), the
    # ``/mcp`` server with its first request (``api/mcp_server/http.py``)
    "mcp",
    "mcp_types",
    # Only a request with an image URL (``api/images.py``) or an MCP connection needs an HTTP client
    "httpx",
    "httpx2",
)

REPO_ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent(
    """
    import json, sys
    {statement}
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in {heavy!r})))
    """
)


def _imported_heavy(statement: str, heavy: tuple[str, ...] = HEAVY_MODULES, **env: str) -> list[str]:
    """Run ``statement`` in a fresh interpreter; the heavy modules (and their submodules) it left imported."""
    code = _PROBE.format(statement=statement, heavy=set(heavy))
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **env}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    imported: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return sorted({name.split(".")[0] for name in imported})


def _culprits(statement: str, module: str) -> str:
    """Which module first imported ``module``: the lines of ``-X importtime`` just before it (for the message)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
        check=False,
    )
    lines = done.stderr.splitlines()
    for index, line in enumerate(lines):
        if line.rstrip().endswith(f" {module}"):
            # importtime prints a module after its children: its importers follow it, indented less
            return "\n".join(lines[index : index + 12])
    return "(not found in -X importtime)"


@pytest.mark.parametrize(
    "statement",
    [
        "import xinference.deploy.local",
        "from xinference.api.app import create_app; create_app('127.0.0.1:1')",
    ],
    ids=["deploy.local", "create_app"],
)
def test_start_path_imports_no_heavy_library(statement: str) -> None:
    heavy = _imported_heavy(statement)
    details = "\n\n".join(f"{name}:\n{_culprits(statement, name)}" for name in heavy)
    assert heavy == [], f"heavy libraries imported at start: {heavy}\n{details}"


def test_mcp_loads_with_the_first_connection_not_at_start() -> None:
    """The hub and the ``/mcp`` runner exist without the SDK; the runner's first use loads it and runs the session
    manager until ``aclose()``."""
    statement = textwrap.dedent(
        """
        import asyncio
        from starlette.datastructures import State
        from xinference.api.mcp.manager import McpHub
        from xinference.api.mcp_server.http import McpServerRunner

        async def main():
            hub = McpHub()
            await hub.start()
            runner = McpServerRunner(State())
            assert "mcp" not in sys.modules and not runner.started
            manager = await runner.manager()
            assert runner.started and await runner.manager() is manager
            assert manager._task_group is not None  # its run() is entered
            await runner.aclose()
            assert manager._task_group is None  # and left again
            await hub.stop()

        asyncio.run(main())
        """
    )
    assert _imported_heavy(statement, heavy=("mcp",)) == ["mcp"]


def test_xoscar_still_serializes_and_pandas_still_imports_after_the_lean_start() -> None:
    """The placeholders only live while xoscar loads: its calls work, and a real pandas imports afterwards."""
    statement = textwrap.dedent(
        """
        import xinference.deploy.local
        import numpy
        from xoscar.serialization import deserialize, serialize
        value = {"a": [1, 2.5, "x", None], "b": numpy.arange(4), "c": (b"bytes",)}
        header, buffers = serialize(value)
        back = deserialize(header, buffers)
        assert back["a"] == value["a"] and list(back["b"]) == [0, 1, 2, 3] and back["c"] == (b"bytes",), back
        assert "pandas" not in sys.modules and "scipy" not in sys.modules
        import pandas, scipy.sparse
        assert hasattr(pandas, "DataFrame") and hasattr(scipy.sparse, "csr_matrix")
        header, buffers = serialize(scipy.sparse.eye(3, format="csr"))
        assert (deserialize(header, buffers) != scipy.sparse.eye(3, format="csr")).nnz == 0
        """
    )
    # The probe itself imports pandas and scipy at the end: both are real and usable
    assert _imported_heavy(statement, heavy=("pandas", "scipy")) == ["pandas", "scipy"]


def test_the_opt_out_gives_xoscar_its_usual_imports() -> None:
    """``XINFERENCE_XOSCAR_FULL_IMPORT=1``: xoscar loads pandas and scipy as it does on its own."""
    heavy = _imported_heavy("import xinference.deploy.local", XINFERENCE_XOSCAR_FULL_IMPORT="1")
    assert "pandas" in heavy and "scipy" in heavy


def test_httpx_loads_without_its_command_line_client() -> None:
    """httpx works as usual, minus ``httpx._main`` (rich, pygments): importable on request, and back in full with the
    opt-out."""
    statement = textwrap.dedent(
        """
        import xinference
        import httpx
        assert callable(httpx.get) and httpx.URL("http://a/b").host == "a"
        assert "httpx._main" not in sys.modules and "rich" not in sys.modules and "pygments" not in sys.modules
        import httpx._main  # the block was only for httpx's own __init__
        """
    )
    heavy = ("rich", "pygments", "httpx")
    assert _imported_heavy(statement, heavy=heavy) == ["httpx", "pygments", "rich"]
    # with the opt-out, httpx's __init__ imports its command-line client itself (rich is installed here)
    pytest.importorskip("rich")
    plain = "import xinference, httpx"
    assert _imported_heavy(plain, heavy=heavy) == ["httpx"]
    assert _imported_heavy(plain, heavy=heavy, XINFERENCE_HTTPX_FULL_IMPORT="1") == ["httpx", "pygments", "rich"]


_GC_PROBE = textwrap.dedent(
    """
    import gc, sys
    sys.argv[0] = {argv0!r}
    import xinference.deploy.local
    import xinference.deploy as deploy
    print(gc.isenabled(), deploy.gc_paused(), file=sys.stderr)
    deploy.resume_gc()
    deploy.resume_gc()  # the second call does nothing
    print(gc.isenabled(), deploy.gc_paused(), gc.get_freeze_count() > 0, file=sys.stderr)
    """
)


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("/venv/bin/xinference-local", ["False True", "True False True"]),
        ("/venv/bin/pytest", ["True False", "True False False"]),
    ],
    ids=["xinference-local", "imported"],
)
def test_the_collector_waits_for_xinference_local_only(argv0: str, expected: list[str]) -> None:
    """Started as ``xinference-local``, the collector is off until ``resume_gc`` (called once the server is ready);
    imported any other way, nothing changes."""
    done = subprocess.run(
        [sys.executable, "-c", _GC_PROBE.format(argv0=argv0)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-2:] == expected
