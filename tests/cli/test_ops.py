"""``xinference logs -f``'s follow loop (``xinference/cli/ops.py``) against a stand-in for the REST client: it
prints the tail, then only what was written after each answer's offset, and says when the log was truncated."""

from __future__ import annotations

from typing import Any

from xinference.cli.ops import follow_log


class _LogServer:
    """A test double for ``Client.get_model_logs``: a growing log, read by byte offset like the real endpoint."""

    def __init__(self) -> None:
        self.lines = ["one", "two", "three"]
        self.calls: list[dict[str, Any]] = []
        self.truncate_at_call: int | None = None

    def _size(self) -> int:
        return sum(len(line) + 1 for line in self.lines)

    def get_model_logs(
        self, model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
    ) -> dict[str, Any]:
        self.calls.append({"uid": model_uid, "replica": replica, "tail": tail, "since": since})
        if self.truncate_at_call == len(self.calls):
            self.lines = ["restarted"]
        elif len(self.calls) > 1:
            self.lines.append(f"line {len(self.calls)}")
        size = self._size()
        reset = since is not None and since > size
        if since is None or reset:
            lines = self.lines[-tail:] if tail else []
        else:
            text = "".join(line + "\n" for line in self.lines)[since:]
            lines = text.splitlines()
        return {
            "model_uid": model_uid,
            "replica_uid": f"{model_uid}-0",
            "lines": lines,
            "offset": size,
            "size": size,
            "truncated": False,
            "reset": reset,
        }


def test_follow_prints_the_tail_then_only_new_lines() -> None:
    server, out = _LogServer(), []
    follow_log(server, "m", None, 2, True, out.append, interval=0, rounds=3)
    assert out == ["two", "three", "line 2", "line 3", "line 4"]
    assert server.calls[0]["since"] is None and server.calls[1]["since"] == len("one\ntwo\nthree\n")
    assert all(call["replica"] == "m-0" for call in server.calls[1:])  # stays on the replica it started with


def test_follow_says_when_the_log_was_truncated() -> None:
    server, out = _LogServer(), []
    server.truncate_at_call = 2
    follow_log(server, "m", "0", 5, True, out.append, interval=0, rounds=1)
    assert out[:3] == ["one", "two", "three"] and "truncated" in out[3] and out[4] == "restarted"


def test_without_follow_reads_once() -> None:
    server, out = _LogServer(), []
    follow_log(server, "m", None, 1, False, out.append)
    assert out == ["three"] and len(server.calls) == 1
