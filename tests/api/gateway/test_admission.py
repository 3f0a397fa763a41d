"""Admission gates (``api/gateway/admission.py``) and keep-alive durations (``core/launch.py``), without a
server."""

from __future__ import annotations

import asyncio

import pytest

from xinference.api.gateway.admission import Admission, Gate, Ticket
from xinference.core.launch import describe_keep_alive, parse_keep_alive, slots_of
from xinference.errors import InvalidRequest, TooManyRequests


class _Sink:
    """Collects what a gate reports (a test double for the API's Metrics)."""

    def __init__(self) -> None:
        self.tickets: list[Ticket] = []
        self.refused: list[str] = []

    def finished(self, ticket: Ticket) -> None:
        self.tickets.append(ticket)

    def rejected(self, model: str, engine: str, route: str, reason: str) -> None:
        self.refused.append(reason)


def test_slots_come_from_the_engine_options() -> None:
    assert slots_of({"n_parallel": 4, "n_ctx": 8192}) == 4
    assert slots_of({"max_num_seqs": 16}) == 16
    assert slots_of({"max_batch_size": 32}) == 32
    assert slots_of({}) == 8 and slots_of({"n_parallel": True}) == 8


def test_gate_runs_capacity_queues_fifo_and_refuses_past_max_queued() -> None:
    async def scenario() -> None:
        sink = _Sink()
        gate = Gate("m", "llama.cpp", capacity=2, max_queued=2, queue_timeout=5, sink=sink)
        first, second = await gate.enter("/r"), await gate.enter("/r")
        assert gate.running == 2 and gate.waiting == 0
        order: list[str] = []

        async def wait(name: str) -> Ticket:
            ticket = await gate.enter("/r")
            order.append(name)
            return ticket

        third = asyncio.create_task(wait("third"))
        await asyncio.sleep(0)
        fourth = asyncio.create_task(wait("fourth"))
        await asyncio.sleep(0.01)
        assert gate.waiting == 2 and gate.running == 2
        with pytest.raises(TooManyRequests) as refused:
            await gate.enter("/r")
        assert refused.value.status_code == 429 and refused.value.retry_after is not None
        assert "max_queued=2" in refused.value.message and sink.refused == ["queue_full"]
        first.leave()
        first.leave()  # idempotent
        t3 = await third
        assert order == ["third"] and gate.running == 2 and t3.queued > 0
        second.leave()
        t4 = await fourth
        assert order == ["third", "fourth"]
        t3.leave()
        t4.leave()
        assert gate.running == 0 and gate.waiting == 0 and not gate.busy and gate.idle_since is not None
        assert len(sink.tickets) == 4

    asyncio.run(scenario())


def test_gate_times_out_a_waiter_and_keeps_serving() -> None:
    async def scenario() -> None:
        sink = _Sink()
        gate = Gate("m", capacity=1, max_queued=4, queue_timeout=0.05, sink=sink)
        held = await gate.enter("/r")
        with pytest.raises(TooManyRequests) as late:
            await gate.enter("/r")
        assert "queue_timeout" in late.value.message and sink.refused == ["queue_timeout"]
        assert gate.waiting == 0 and gate.running == 1
        held.leave()
        again = await gate.enter("/r")  # the slot is free again: admitted at once
        assert again.queued == 0.0
        again.leave()

    asyncio.run(scenario())


def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    async def scenario() -> None:
        gate = Gate("m", capacity=1, max_queued=4, queue_timeout=5)
        held = await gate.enter("/r")
        waiter = asyncio.create_task(gate.enter("/r"))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        held.leave()
        assert gate.running == 0 and gate.waiting == 0

    asyncio.run(scenario())


def test_more_capacity_admits_waiters() -> None:
    async def scenario() -> None:
        admission = Admission()
        gate = admission.gate("m", "e", {"slots": 1, "max_queued": 3}, replicas=1)
        held = await gate.enter("/r")
        waiter = asyncio.create_task(gate.enter("/r"))
        await asyncio.sleep(0.01)
        assert gate.waiting == 1
        same = admission.gate("m", "e", {"slots": 1, "max_queued": 3}, replicas=2)  # a replica was added
        assert same is gate and gate.capacity == 2
        ticket = await asyncio.wait_for(waiter, 1)
        assert gate.running == 2
        ticket.leave()
        held.leave()
        assert gate.running == 0

    asyncio.run(scenario())


def test_default_queue_is_four_times_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XINFERENCE_MAX_QUEUED", raising=False)
    assert Admission().gate("m", "e", {"slots": 4}, replicas=2).max_queued == 32
    monkeypatch.setenv("XINFERENCE_MAX_QUEUED", "3")
    assert Admission().gate("m", "e", {"slots": 4}, replicas=1).max_queued == 3
    assert Admission().gate("m", "e", {"slots": 4, "max_queued": 0}, replicas=1).max_queued == 0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("45s", 45.0),
        ("500ms", 0.5),
        ("2", 2.0),
        (0, 0.0),
        ("0", 0.0),
        (30, 30.0),
        (1.5, 1.5),
        (-1, None),
        ("-1", None),
        ("-5m", None),
    ],
)
def test_keep_alive_durations(value: object, seconds: float | None) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "ten minutes",
        "10x",
        "",
        "m",
        None,
        True,
        "1h 30m",
        # out of range: a float overflow or nan was a 500 or a keep-alive never checked
        10**400,
        "1e400",
        "nan",
        "inf",
        float("nan"),
        float("inf"),
        10**10,
        "3650000h",
    ],
)
def test_bad_keep_alive_is_a_400_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidRequest) as bad:
        parse_keep_alive(value)
    assert bad.value.param == "keep_alive" and bad.value.status_code == 400


def test_keep_alive_is_shown_readably() -> None:
    assert describe_keep_alive(None) == "forever"
    assert describe_keep_alive(600) == "10m" and describe_keep_alive(2) == "2s" and describe_keep_alive(0) == "0s"
