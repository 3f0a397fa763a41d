"""The chaos soak's logic, kept free of I/O so it can be unit-tested: what to kill and when, how a stream ended,
which processes outlived the cluster, and how long each kill took to heal.

The driver that applies it to a real cluster is :mod:`benchmark.chaos_run`; the report is
:mod:`benchmark.chaos_report`. Times are seconds since the load began (the driver's clock).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BROKEN_OK",
    "KillRecord",
    "ModelSnapshot",
    "PlannedKill",
    "RequestRecord",
    "StreamTrace",
    "back_at",
    "classify_stream",
    "failure_pause",
    "failures_by_kill",
    "first_success_after",
    "is_ours",
    "kill_schedule",
    "orphans",
    "relapse_at",
    "status_changes",
]

#: How a stream may end: ``complete`` (a finish_reason, then [DONE]), ``error_frame`` (an ``{"error": ...}`` chunk:
#: the right ending for a stream the platform could not finish), ``refused`` (a non-200 answer before any chunk),
#: ``truncated_done`` (a plain [DONE] without a finish_reason or an error: text silently cut short), ``cut`` (the
#: connection ended without [DONE] or an error frame) and ``hang`` (nothing ended it before the client's timeout).
STREAM_ENDINGS = ("complete", "error_frame", "refused", "truncated_done", "cut", "hang")
#: Endings of a stream the platform could not finish that the client can tell apart from a finished one.
BROKEN_OK = frozenset({"error_frame"})
#: Endings that fail the run: the client cannot tell the answer was cut, or waits forever.
BROKEN_BAD = frozenset({"truncated_done", "cut", "hang"})


# -- the kill schedule -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedKill:
    """One kill of the schedule: at ``at`` seconds, SIGKILL the ``kind`` (``worker`` or ``model``) of worker
    number ``index`` (for ``model``: the replica's process on that worker)."""

    at: float
    kind: str
    index: int

    @property
    def target(self) -> str:
        return f"{self.kind}@{self.index}"


def kill_schedule(
    seed: int, duration: float, interval: float, workers: int = 2, worker_share: float = 0.5
) -> list[PlannedKill]:
    """A kill every ``interval`` seconds from ``interval`` on, none in the last half interval of the run (its
    recovery would not be seen under load). Each kill picks a worker process with probability ``worker_share``,
    otherwise a model process, on a worker drawn uniformly; the same seed gives the same schedule."""
    if interval <= 0 or duration <= 0:
        raise ValueError("the duration and the kill interval must be positive")
    if workers < 1 or not 0.0 <= worker_share <= 1.0:
        raise ValueError("at least one worker, and a worker share within [0, 1]")
    rng = random.Random(seed)
    plan: list[PlannedKill] = []
    at = interval
    while at <= duration - interval / 2:
        kind = "worker" if rng.random() < worker_share else "model"
        plan.append(PlannedKill(round(at, 3), kind, rng.randrange(workers)))
        at += interval
    return plan


# -- how a stream ended ----------------------------------------------------------------------------------------
@dataclass
class StreamTrace:
    """What a client saw of one streamed chat: fed line by line (:meth:`feed`), then :func:`classify_stream`."""

    status: int = 0
    chunks: int = 0
    text_chars: int = 0
    finished: bool = False
    done: bool = False
    error: str | None = None
    data_after_done: bool = False
    transport_error: str | None = None
    timed_out: bool = False
    body: str = ""
    retry_after: str | None = None

    def feed(self, line: str) -> None:
        """One line of the event stream (``data: ...``; other lines and blank separators are ignored)."""
        if not line.startswith("data:"):
            return
        data = line[5:].strip()
        if self.done:
            self.data_after_done = True
        if data == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            self.error = self.error or f"unparsable frame: {data[:200]}"
            return
        if not isinstance(chunk, dict):
            return
        if "error" in chunk:
            detail = chunk["error"]
            message = detail.get("message") if isinstance(detail, dict) else detail
            self.error = str(message)
            return
        self.chunks += 1
        for choice in chunk.get("choices") or []:
            self.text_chars += len((choice.get("delta") or {}).get("content") or "")
            self.finished = self.finished or bool(choice.get("finish_reason"))


def classify_stream(trace: StreamTrace) -> str:
    """One of :data:`STREAM_ENDINGS`. A timeout wins over what came before it (an error frame that nothing
    closed still left the client waiting); then an error frame wins over the rest, since it is the signal a client
    needs whatever text came before it."""
    if trace.status != 200:
        return "refused"
    if trace.timed_out:
        return "hang"
    if trace.error is not None:
        return "error_frame"
    if trace.done and trace.finished:
        return "complete"
    if trace.done:
        return "truncated_done"
    return "cut"


# -- requests, kills and recovery ------------------------------------------------------------------------------
@dataclass
class RequestRecord:
    """One request of the load: ``op`` (``chat`` or ``chat_stream``), its start and end, and how it ended
    (``ok`` for a success; a stream ending or ``http_<status>`` / an exception name otherwise)."""

    op: str
    start: float
    end: float
    outcome: str
    status: int = 0
    message: str = ""
    ttft: float | None = None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("ok", "complete")


def failure_pause(retry_after: str | None, default: float = 0.5, cap: float = 5.0) -> float:
    """Seconds a client waits after a failed request before its next one: the answer's ``Retry-After`` (seconds)
    when it gave one, else ``default``, never more than ``cap``. A client that retried at once would turn one
    outage into thousands of failures, counting the client's speed rather than the platform's."""
    try:
        wait = float(retry_after) if retry_after is not None else default
    except ValueError:
        wait = default
    return min(max(wait, 0.0), cap)


@dataclass
class ModelSnapshot:
    """The model as ``GET /v1/models/{uid}`` showed it at ``t``: its status and its replicas' pids."""

    t: float
    status: str
    pids: tuple[int, ...]


@dataclass
class KillRecord:
    """A kill as it happened: what (``target``, the pids that died with it), when, and what followed."""

    at: float
    kind: str
    index: int
    label: str
    pids: list[int] = field(default_factory=list)
    skipped: str | None = None
    restarted_at: float | None = None
    children_left: list[int] = field(default_factory=list)
    first_success_s: float | None = None
    back_s: float | None = None
    relapse_s: float | None = None
    failures: int = 0
    failures_until_s: float | None = None


def first_success_after(at: float, records: Iterable[RequestRecord]) -> float | None:
    """Seconds from ``at`` until the first success of a request sent at or after ``at`` (None: none succeeded)."""
    ends = [r.end for r in records if r.ok and r.start >= at]
    return round(min(ends) - at, 3) if ends else None


def back_at(at: float, killed_pids: Iterable[int], snapshots: Sequence[ModelSnapshot], replicas: int) -> float | None:
    """Seconds from ``at`` until the model was whole again: ``ready`` with ``replicas`` replicas listed, none of
    them a process the kill ended (a dead worker's replicas stay listed until it is declared gone)."""
    dead = set(killed_pids)
    for snap in snapshots:
        if snap.t >= at and snap.status == "ready" and len(snap.pids) >= replicas and not dead & set(snap.pids):
            return round(snap.t - at, 3)
    return None


def relapse_at(
    at: float, back_s: float | None, until: float, snapshots: Sequence[ModelSnapshot], replicas: int
) -> float | None:
    """Seconds from the kill until the model, once back, stopped being whole again before ``until`` (the next
    kill, or the end of the run): a replica dropped from the routes after it had returned, e.g. a restarted worker
    declared gone for its dead predecessor's silence. None when it stayed whole (or never came back)."""
    if back_s is None:
        return None
    for snap in snapshots:
        if at + back_s < snap.t < until and (snap.status != "ready" or len(snap.pids) < replicas):
            return round(snap.t - at, 3)
    return None


def failures_by_kill(kill_times: Sequence[float], records: Iterable[RequestRecord]) -> list[list[RequestRecord]]:
    """Failed requests per kill: each failure belongs to the last kill at or before its end (failures before the
    first kill belong to none: nothing was killed yet)."""
    owned: list[list[RequestRecord]] = [[] for _ in kill_times]
    ordered = sorted(range(len(kill_times)), key=lambda i: kill_times[i])
    for record in records:
        if record.ok:
            continue
        owner = None
        for i in ordered:
            if kill_times[i] <= record.end:
                owner = i
        if owner is not None:
            owned[owner].append(record)
    return owned


def status_changes(snapshots: Iterable[ModelSnapshot]) -> list[ModelSnapshot]:
    """The snapshots where the model's status or its replicas' pids changed (the first one included)."""
    changes: list[ModelSnapshot] = []
    for snap in snapshots:
        if not changes or (snap.status, snap.pids) != (changes[-1].status, changes[-1].pids):
            changes.append(snap)
    return changes


# -- orphans ---------------------------------------------------------------------------------------------------
def is_ours(environ: Mapping[str, str] | None, cmdline: Sequence[str], root: str) -> bool:
    """Whether a process belongs to the chaos cluster rooted at ``root``: its ``XINFERENCE_HOME`` lies under the
    root (every platform process inherits it), or its command line names a path under it."""
    prefix = root.rstrip("/") + "/"
    home = (environ or {}).get("XINFERENCE_HOME", "")
    if home == root.rstrip("/") or home.startswith(prefix):
        return True
    return any(prefix in arg or arg == root.rstrip("/") for arg in cmdline)


def orphans(
    seen: Mapping[int, tuple[float, str]], alive: Mapping[int, float], marked: Iterable[tuple[int, str]] = ()
) -> list[dict[str, Any]]:
    """Processes still alive after the cluster was shut down: every pid ``seen`` during the run (the replica pids
    the API listed, the processes of the cluster's trees; ``pid -> (start time, label)``) that is ``alive`` with
    the same start time (a reused pid is someone else's process), and every process ``marked`` as ours by
    :func:`is_ours` when the run ended. Each is ``{"pid", "start", "label"}``."""
    found: dict[int, str] = {}
    for pid, (started, label) in seen.items():
        if alive.get(pid) == started:
            found[pid] = label
    for pid, label in marked:
        if pid in alive:
            found.setdefault(pid, label)
    return [{"pid": pid, "start": alive[pid], "label": label} for pid, label in sorted(found.items())]
