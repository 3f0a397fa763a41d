"""Pure parts of benchmark/bench_control_plane.py: the import profile's parser and the timed starts' environment."""

from __future__ import annotations

from pathlib import Path

from benchmark.bench_control_plane import bytecode_env, parse_importtime

REPORT = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:       500 |     900000 | xinference.deploy.local
import time:     10000 |     300000 |   xoscar
import time:      2000 |     150000 |     numpy
import time:      3000 |     200000 |   xinference.api.app
import time:      1000 |     120000 |       xinference.api.anthropic.router
import time:       800 |      90000 |         xinference.api.anthropic.protocol
not an importtime line
"""


def test_parse_importtime_ranks_top_packages_and_shallow_xinference_modules() -> None:
    rows = parse_importtime(REPORT, top=10)
    names = [row["module"] for row in rows]
    assert names == [
        "xinference.deploy.local",
        "xoscar",
        "xinference.api.app",
        "xinference.api.anthropic.router",
        "_io",
    ]  # numpy is inside a package (depth 2), the protocol module is too deep (4)
    assert rows[0] == {"module": "xinference.deploy.local", "depth": 0, "self_ms": 0.5, "cumulative_ms": 900.0}
    assert parse_importtime(REPORT, top=2)[1]["module"] == "xoscar"


def test_timed_starts_write_bytecode_to_the_run_folder(tmp_path: Path) -> None:
    env = bytecode_env(tmp_path)
    assert env["PYTHONDONTWRITEBYTECODE"] == ""  # empty: Python writes caches again
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
