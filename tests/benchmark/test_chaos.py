"""The chaos soak's logic without a cluster: the kill schedule, how a stream ended, the orphan check, failover
and recovery times, and the verdict and page built from a made-up run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import psutil
import pytest

from benchmark.chaos import (
    KillRecord,
    ModelSnapshot,
    PlannedKill,
    RequestRecord,
    StreamTrace,
    back_at,
    classify_stream,
    failure_pause,
    failures_by_kill,
    first_success_after,
    is_ours,
    kill_schedule,
    orphans,
    relapse_at,
    status_changes,
)
from benchmark.chaos_report import criteria, failure_groups, latency, render_markdown, verdict
from benchmark.chaos_run import _log_lines, _scan_ours


# -- the kill schedule -----------------------------------------------------------------------------------------
def test_schedule_kills_every_interval_and_spares_the_end() -> None:
    plan = kill_schedule(seed=3, duration=600, interval=60)
    assert [k.at for k in plan] == [60, 120, 180, 240, 300, 360, 420, 480, 540]  # none at 600: no time to heal
    assert {k.kind for k in plan} <= {"worker", "model"} and {k.index for k in plan} <= {0, 1}
    short = kill_schedule(seed=3, duration=150, interval=30)
    assert [k.at for k in short] == [30, 60, 90, 120]  # 150 - 15 is the last moment a kill may come


def test_schedule_is_reproducible_and_seeded() -> None:
    assert kill_schedule(7, 3600, 60) == kill_schedule(7, 3600, 60)
    assert kill_schedule(7, 3600, 60) != kill_schedule(8, 3600, 60)


def test_schedule_draws_both_kinds_on_both_workers() -> None:
    plan = kill_schedule(1, 60 * 400, 60)
    targets = {k.target for k in plan}
    assert targets == {"worker@0", "worker@1", "model@0", "model@1"}
    workers = sum(k.kind == "worker" for k in plan) / len(plan)
    assert 0.4 < workers < 0.6  # the default share is one half
    assert all(k.kind == "model" for k in kill_schedule(1, 6000, 60, worker_share=0.0))
    assert all(k.kind == "worker" for k in kill_schedule(1, 6000, 60, worker_share=1.0))
    assert {k.index for k in kill_schedule(1, 6000, 60, workers=3)} == {0, 1, 2}


def test_schedule_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        kill_schedule(1, 600, 0)
    with pytest.raises(ValueError):
        kill_schedule(1, 600, 60, worker_share=1.5)
    assert kill_schedule(1, 20, 60) == []  # shorter than one interval: nothing to kill
    assert PlannedKill(60, "model", 1).target == "model@1"


# -- stream endings --------------------------------------------------------------------------------------------
def _chunk(content: str = "", finish: str | None = None) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})


def _trace(*lines: str, status: int = 200) -> StreamTrace:
    trace = StreamTrace(status=status)
    for line in lines:
        trace.feed(line)
        trace.feed("")  # SSE's blank separator lines are ignored
    return trace


def test_a_finished_stream_is_complete() -> None:
    trace = _trace(_chunk("Hello"), _chunk(" world"), _chunk("", "length"), "data: [DONE]")
    assert classify_stream(trace) == "complete"
    assert (trace.chunks, trace.text_chars, trace.finished, trace.data_after_done) == (3, 11, True, False)


def test_an_error_frame_is_the_right_end_of_a_broken_stream() -> None:
    trace = _trace(_chunk("Hel"), 'data: {"error": {"message": "the model process died", "type": "x"}}', "data: [DONE]")
    assert classify_stream(trace) == "error_frame"
    assert trace.error == "the model process died"
    assert classify_stream(_trace('data: {"error": "plain text error"}')) == "error_frame"  # even without [DONE]


def test_a_plain_done_after_partial_text_is_silent_truncation() -> None:
    assert classify_stream(_trace(_chunk("Hel"), _chunk("lo"), "data: [DONE]")) == "truncated_done"
    assert classify_stream(_trace("data: [DONE]")) == "truncated_done"  # nothing at all, and no error said why


def test_a_stream_closed_without_done_or_error_is_cut() -> None:
    assert classify_stream(_trace(_chunk("Hel"))) == "cut"
    cut = _trace(_chunk("Hel"))
    cut.transport_error = "RemoteProtocolError: peer closed connection"
    assert classify_stream(cut) == "cut"
    assert classify_stream(_trace(_chunk("Hi", "stop"))) == "cut"  # finished, but the stream never closed properly


def test_a_timeout_is_a_hang_even_after_an_error_frame() -> None:
    hang = _trace(_chunk("Hel"))
    hang.timed_out = True
    assert classify_stream(hang) == "hang"
    stuck = _trace('data: {"error": {"message": "gone"}}')
    stuck.timed_out = True  # an error frame nothing closed still left the client waiting
    assert classify_stream(stuck) == "hang"


def test_a_refused_stream_and_odd_frames() -> None:
    assert classify_stream(_trace(status=503)) == "refused"
    odd = _trace(_chunk("a", "stop"), "data: [DONE]", _chunk("late"))
    assert odd.data_after_done and classify_stream(odd) == "complete"
    garbled = _trace(_chunk("a"), "data: {not json", "data: [DONE]")
    assert classify_stream(garbled) == "error_frame" and "unparsable" in (garbled.error or "")
    assert _trace(": keep-alive comment", "event: x").chunks == 0


# -- failover and recovery -------------------------------------------------------------------------------------
def _rec(start: float, end: float, outcome: str = "ok", op: str = "chat", **kw: Any) -> RequestRecord:
    return RequestRecord(op, start, end, outcome, **kw)


def test_first_success_counts_only_requests_sent_after_the_kill() -> None:
    records = [
        _rec(9.0, 10.5),
        _rec(10.2, 11.0, "http_503"),
        _rec(10.4, 12.5),
        _rec(10.1, 13.0, "complete", "chat_stream"),
    ]
    assert first_success_after(10.0, records) == 2.5  # the 10.5 success was sent before the kill
    assert first_success_after(20.0, records) is None


def test_back_needs_every_replica_and_none_of_the_killed_pids() -> None:
    snaps = [
        ModelSnapshot(9.5, "ready", (100, 200)),
        ModelSnapshot(10.5, "ready", (100, 200)),  # the dead worker's replica is still listed
        ModelSnapshot(14.0, "degraded", (200,)),
        ModelSnapshot(18.0, "ready", (200,)),  # ready but one replica short
        ModelSnapshot(21.5, "ready", (200, 300)),
    ]
    assert back_at(10.0, [100, 99], snaps, replicas=2) == 11.5
    assert back_at(10.0, [100], snaps[:4], replicas=2) is None
    assert back_at(10.0, [555], snaps, replicas=2) == 0.5  # a kill that changed nothing listed is back at once


def test_a_relapse_is_a_drop_after_healing_and_before_the_next_kill() -> None:
    snaps = [
        ModelSnapshot(10.5, "degraded", (200,)),
        ModelSnapshot(15.0, "ready", (200, 300)),  # back at 5.0
        ModelSnapshot(24.0, "degraded", (300,)),  # the restarted worker declared gone: a relapse
        ModelSnapshot(30.0, "ready", (300, 400)),
        ModelSnapshot(45.0, "degraded", (400,)),
    ]
    assert back_at(10.0, [100], snaps, 2) == 5.0
    assert relapse_at(10.0, 5.0, 40.0, snaps, 2) == 14.0
    assert relapse_at(10.0, 5.0, 20.0, snaps, 2) is None  # the next kill came first: the drop is its own
    assert relapse_at(10.0, None, 40.0, snaps, 2) is None  # never healed: reported as such, not as a relapse
    short = [ModelSnapshot(15.0, "ready", (200, 300)), ModelSnapshot(16.0, "ready", (300,))]
    assert relapse_at(10.0, 5.0, 40.0, short, 2) == 6.0  # still "ready", but a replica short


def test_failures_belong_to_the_last_kill_before_them() -> None:
    records = [
        _rec(1, 2, "http_503"),
        _rec(10, 11, "http_503"),
        _rec(12, 14),
        _rec(30, 31, "cut"),
        _rec(29, 32, "hang", "chat_stream"),
        _rec(40, 41, "ok"),
    ]
    owned = failures_by_kill([10.0, 30.0], records)
    assert [len(o) for o in owned] == [1, 2]  # the one at t=2 came before any kill
    assert [r.end for r in owned[1]] == [31, 32]
    assert [len(o) for o in failures_by_kill([30.0, 10.0], records)] == [2, 1]  # the order given is kept
    assert failures_by_kill([], records) == []


def test_status_changes_keep_only_transitions() -> None:
    snaps = [
        ModelSnapshot(0.0, "ready", (1, 2)),
        ModelSnapshot(0.5, "ready", (1, 2)),
        ModelSnapshot(1.0, "degraded", (2,)),
        ModelSnapshot(1.5, "degraded", (2,)),
        ModelSnapshot(2.0, "degraded", (2, 3)),
        ModelSnapshot(2.5, "ready", (2, 3)),
    ]
    assert [s.t for s in status_changes(snaps)] == [0.0, 1.0, 2.0, 2.5]
    assert status_changes([]) == []


def test_a_failed_client_waits_as_told_before_its_next_request() -> None:
    assert failure_pause("3") == 3.0
    assert failure_pause(None) == 0.5
    assert failure_pause("garbage") == 0.5
    assert failure_pause("600") == 5.0 and failure_pause("-1") == 0.0


# -- orphans ---------------------------------------------------------------------------------------------------
def test_is_ours_by_home_or_command_line() -> None:
    root = "/tmp/xinf-chaos-abc"
    assert is_ours({"XINFERENCE_HOME": "/tmp/xinf-chaos-abc/worker-0"}, [], root)
    assert is_ours({"XINFERENCE_HOME": "/tmp/xinf-chaos-abc"}, [], root)
    assert not is_ours({"XINFERENCE_HOME": "/tmp/xinf-chaos-abcdef/worker-0"}, [], root)  # a sibling folder
    assert not is_ours({"HOME": "/root"}, ["python", "-m", "xinference.deploy.cluster"], root)
    assert is_ours(None, ["llama-server", "--log-file", "/tmp/xinf-chaos-abc/worker-1/logs/m.log"], root)
    assert not is_ours(None, [], root)


def test_orphans_are_seen_processes_still_alive_with_the_same_start() -> None:
    seen = {10: (500.0, "model chaos-chat-0 [10]"), 11: (501.0, "worker-0 #1"), 12: (502.0, "model x [12]")}
    alive = {10: 500.0, 11: 999.0, 40: 7.0}  # 11's pid was reused by another process; 12 is gone
    assert orphans(seen, alive) == [{"pid": 10, "start": 500.0, "label": "model chaos-chat-0 [10]"}]
    marked = [(40, "python [40] (marker)"), (10, "dup"), (77, "exited meanwhile")]
    assert orphans(seen, alive, marked) == [
        {"pid": 10, "start": 500.0, "label": "model chaos-chat-0 [10]"},
        {"pid": 40, "start": 7.0, "label": "python [40] (marker)"},
    ]
    assert orphans(seen, {}) == []


def test_scan_finds_a_real_process_by_its_home(tmp_path: Any) -> None:
    """A real child with XINFERENCE_HOME under the root is found by the machine-wide scan; this process is not."""
    root = tmp_path / "xinf-chaos-scan"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={**os.environ, "XINFERENCE_HOME": str(root / "worker-0")},
    )
    try:
        psutil.Process(child.pid).environ()  # wait until the child's environment is readable
        alive, marked = _scan_ours(root)
        assert child.pid in alive and os.getpid() in alive
        assert [pid for pid, _ in marked] == [child.pid]
    finally:
        child.kill()
        child.wait()


# -- the verdict and the page ----------------------------------------------------------------------------------
def _report(**overrides: Any) -> dict[str, Any]:
    requests = [_rec(1.0 + i, 2.0 + i) for i in range(10)]
    requests += [_rec(1.0 + i, 1.5 + i, "complete", "chat_stream", ttft=0.2) for i in range(10)]
    kill = KillRecord(5.0, "model", 0, "model chaos-chat-0 on worker-0", pids=[123], first_success_s=0.8, back_s=9.5)
    report: dict[str, Any] = {
        "minutes": 10.0,
        "concurrency": 16,
        "max_tokens": 16,
        "kill_seconds": 60.0,
        "seed": 1,
        "workers": 2,
        "worker_share": 0.5,
        "stream_share": 0.5,
        "stream_timeout": 60.0,
        "request_timeout": 120.0,
        "machine": "2 CPU cores, 8 GiB RAM",
        "started": "2026-01-01 00:00 UTC",
        "requests": [r.__dict__ for r in requests],
        "kills": [kill.__dict__],
        "processes": [],
        "leak_suspects": [],
        "orphans": [],
        "orphans_reaped": [],
        "late_at_shutdown": [],
        "events": {"replica_failed": 1},
        "timeline": [
            {"t": 0.0, "status": "ready", "pids": [1, 2]},
            {"t": 5.2, "status": "degraded", "pids": [2]},
            {"t": 14.5, "status": "ready", "pids": [2, 3]},
        ],
        "log_lines": [{"count": 2, "line": "worker-0: WARNING x: replica chaos-chat-0 died | code -9"}],
    }
    report.update(overrides)
    return report


def test_a_clean_run_passes() -> None:
    assert verdict(_report()) == []
    assert all(passed for _, passed, _ in criteria(_report()))
    text = render_markdown(_report())
    assert "**Result: PASS**" in text
    assert "| 5.0 | model chaos-chat-0 on worker-0 | pids [123] | 0.80 | 0 | 9.5 | - |" in text
    assert "0.0 ready [1, 2]; 5.2 degraded [2]; 14.5 ready [2, 3]." in text
    assert "`worker-0: WARNING x: replica chaos-chat-0 died \\| code -9`" in text  # a pipe cannot break the table
    assert "Model events: replica_failed 1." in text


def test_each_criterion_fails_on_its_own_finding() -> None:
    base = _report()
    failed_chat = _report(
        requests=base["requests"] + [_rec(6, 7, "http_503", status=503, message="replica unreachable").__dict__]
    )
    assert verdict(failed_chat) == ["Every non-streamed request succeeds: 1 of 11 failed"]
    assert failure_groups(failed_chat, "chat") == [(1, "http_503", 503, "replica unreachable")]
    refused = _report(requests=base["requests"] + [_rec(6, 7, "refused", "chat_stream", status=503).__dict__])
    assert [v.split(":")[0] for v in verdict(refused)] == ["Streams that fail before their first byte are retried"]
    for bad in ("truncated_done", "cut", "hang"):
        broken = _report(requests=base["requests"] + [_rec(6, 7, bad, "chat_stream", status=200).__dict__])
        [reason] = verdict(broken)
        assert reason.startswith("Every broken stream ends with an error frame") and f"{bad} 1" in reason
    framed = _report(requests=base["requests"] + [_rec(6, 7, "error_frame", "chat_stream", status=200).__dict__])
    assert verdict(framed) == []  # an error frame is what a broken stream should end with
    orphaned = _report(orphans=[{"pid": 9, "start": 1.0, "label": "model chaos-chat-1 [9]"}])
    assert verdict(orphaned)[0].startswith("No orphaned process") and "1 after shutdown" in verdict(orphaned)[0]
    lingering = _report(kills=[{**base["kills"][0], "kind": "worker", "children_left": [77]}])
    assert "1 worker kill(s) left model processes alive" in verdict(lingering)[0]
    leaking = _report(leak_suspects=["supervisor (API)"])
    assert verdict(leaking) == ["RSS flat (no leak suspect): supervisor (API)"]
    unhealed = _report(kills=[{**base["kills"][0], "back_s": None}])
    assert verdict(unhealed) == [
        "Every kill heals (the model whole again) and stays healed until the next: 0 of 1 "
        "healed; not: model chaos-chat-0 on worker-0"
    ]
    relapsed = _report(kills=[{**base["kills"][0], "relapse_s": 14.0, "failures": 3, "failures_until_s": 15.2}])
    assert verdict(relapsed)[0].endswith("1 of 1 healed; relapsed after healing: model chaos-chat-0 on worker-0")
    assert "| 0.80 | 3 (last at 15.2) | 9.5 | 14.0 |" in render_markdown(relapsed)


def test_short_runs_do_not_judge_rss_and_skipped_kills_are_shown() -> None:
    short = _report(minutes=2.5, leak_suspects=["supervisor (API)"])
    leak = next(c for c in criteria(short) if c[0].startswith("RSS"))
    assert leak[1] is None and "not judged" in leak[2]
    assert verdict(short) == []
    skipped = {**_report()["kills"][0], "skipped": "no replica of worker-1 listed", "back_s": None}
    text = render_markdown(_report(kills=[skipped]))
    assert "skipped: no replica of worker-1 listed" in text
    assert verdict(_report(kills=[skipped])) == []  # a skipped kill killed nothing, so nothing had to heal


def test_latency_percentiles_of_successes() -> None:
    stats = latency(_report(), "chat")
    assert (stats["e2e_p50"], stats["e2e_max"], stats["ttft_p50"]) == (1.0, 1.0, None)
    streams = latency(_report(), "chat_stream")
    assert (streams["e2e_p99"], streams["ttft_p90"]) == (0.5, 0.2)
    assert latency(_report(requests=[]), "chat")["e2e_p50"] is None


def test_log_lines_group_warnings_and_set_the_shutdown_apart(tmp_path: Any) -> None:
    logs = tmp_path / "worker-0" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker.log").write_text(
        "2026-01-01 08:00:00,001 INFO xinference.core.worker: replica chaos-chat-0 serving\n"
        "2026-01-01 08:00:05,002 WARNING xinference.core.worker: replica chaos-chat-0 died (code -9)\n"
        "2026-01-01 08:00:35,003 WARNING xinference.core.worker: replica chaos-chat-1 died (code -9)\n"
        "2026-01-01 08:01:00,004 ERROR xinference.core.worker: restart 1 of chaos-chat-1 failed\n"
        "2026-01-01 08:05:00,005 WARNING xinference.cluster: worker 127.0.0.1:5 left the cluster\n"
        "a traceback line WARNING without a timestamp\n"
    )
    shutdown = time.mktime(time.strptime("2026-01-01 08:04:59", "%Y-%m-%d %H:%M:%S"))
    lines = _log_lines(tmp_path, shutdown)
    assert [(g["count"], g["when"]) for g in lines] == [(2, "run"), (1, "run"), (1, "shutdown")]
    assert lines[0]["line"] == "worker-0: WARNING xinference.core.worker: replica chaos-chat-0 died (code -9)"
    assert lines[1]["line"].startswith("worker-0: ERROR") and "left the cluster" in lines[2]["line"]
