"""CpuHeadroom: whether the model's host has CPU to spare, which decides how streamed tokens are handed over."""

from __future__ import annotations

from xinference.core.cpu_headroom import CpuHeadroom, cgroup_usage_seconds


class Counters:
    """Test double of the CPU counters: busy seconds accumulate at ``busy_cores`` as the test moves the clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.busy = 0.0

    def run(self, busy_cores: float, seconds: float) -> None:
        self.now += seconds
        self.busy += busy_cores * seconds


def _headroom(counters: Counters, cores: float = 2.0) -> CpuHeadroom:
    return CpuHeadroom(period=0.5, busy_seconds=lambda: counters.busy, cores=cores, clock=lambda: counters.now)


def test_a_host_whose_cores_are_all_busy_has_none_to_spare() -> None:
    counters = Counters()
    headroom = _headroom(counters)
    assert headroom.spare()  # no sample yet: assume an idle host
    counters.run(1.9, 1.0)
    assert not headroom.spare()
    assert headroom.idle_cores is not None and abs(headroom.idle_cores - 0.1) < 1e-9


def test_the_answer_comes_from_the_last_sample_between_periods() -> None:
    counters = Counters()
    headroom = _headroom(counters)
    counters.run(2.0, 1.0)
    assert not headroom.spare()
    counters.run(0.0, 0.2)  # idle, but for less than a period: no new sample
    assert not headroom.spare()
    counters.run(0.0, 0.4)
    assert headroom.spare()


def test_hysteresis_keeps_a_busy_host_busy_until_a_whole_core_is_idle() -> None:
    counters = Counters()
    headroom = _headroom(counters)
    counters.run(1.8, 1.0)  # 0.2 idle: busy
    assert not headroom.spare()
    counters.run(1.2, 1.0)  # 0.8 idle: above the busy mark, below the spare one: stays busy
    assert not headroom.spare()
    counters.run(0.8, 1.0)  # 1.2 idle: spare again
    assert headroom.spare()
    counters.run(1.2, 1.0)  # 0.8 idle: above the busy mark: stays spare
    assert headroom.spare()


def test_a_one_core_host_can_become_spare_again() -> None:
    counters = Counters()
    headroom = _headroom(counters, cores=1.0)
    counters.run(1.0, 1.0)
    assert not headroom.spare()
    counters.run(0.3, 1.0)  # 0.7 idle, over half the only core
    assert headroom.spare()


def test_the_default_counters_read_this_host() -> None:
    headroom = CpuHeadroom(period=0.0)
    assert headroom.cores >= 1
    assert isinstance(headroom.spare(), bool)
    assert headroom.idle_cores is not None and 0.0 <= headroom.idle_cores <= headroom.cores
    usage = cgroup_usage_seconds()
    assert usage is None or usage > 0
