"""Reading a replica's log for ``GET /v1/models/{uid}/logs``: bounded, followable, paths scrubbed."""

from __future__ import annotations

from pathlib import Path

import pytest

from xinference.core import logs
from xinference.core.logs import read_log


def test_tail_and_follow(tmp_path: Path) -> None:
    path = tmp_path / "m-0.log"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    first = read_log(path, tail=3)
    assert first["lines"] == ["line 7", "line 8", "line 9"] and first["truncated"] and not first["reset"]
    assert first["offset"] == path.stat().st_size
    with path.open("a") as handle:
        handle.write("line 10\npartial")
    more = read_log(path, tail=100, since=first["offset"])
    assert more["lines"] == ["line 10"] and not more["truncated"]  # the unfinished line waits for its end
    with path.open("a") as handle:
        handle.write(" done\n")
    assert read_log(path, since=more["offset"])["lines"] == ["partial done"]


def test_truncated_file_resets_the_follower(tmp_path: Path) -> None:
    path = tmp_path / "m-0.log"
    path.write_text("a\nb\nc\n")
    offset = read_log(path)["offset"]
    path.write_text("new\n")  # the replica restarted and its log began again
    again = read_log(path, since=offset)
    assert again["reset"] and again["lines"] == ["new"]


def test_reads_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m-0.log"
    path.write_text("".join(f"{i:06d} {'x' * 93}\n" for i in range(2000)))  # 200 kB of 100-byte lines
    monkeypatch.setattr(logs, "MAX_READ_BYTES", 10_000)
    piece = read_log(path, tail=5000)
    assert piece["truncated"] and 95 <= len(piece["lines"]) <= 100  # at most 10 kB, whole lines only
    assert piece["lines"][-1].startswith("001999")
    assert read_log(path, tail=0)["lines"] == []


def test_paths_are_scrubbed_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "m-0.log"
    path.write_text(f"loading {tmp_path}/weights/model.gguf\n")
    assert read_log(path)["lines"] == ["loading .../model.gguf"]
    assert read_log(tmp_path / "absent.log") == {
        "lines": [],
        "offset": 0,
        "size": 0,
        "truncated": False,
        "reset": False,
    }
