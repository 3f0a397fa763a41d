"""The load status behind ``GET /v1/models/{uid}/progress``: stage, bytes, speed and time left."""

from __future__ import annotations

from xinference.core.load_progress import LoadProgress


class _Clock:
    """A settable clock (test double for time.monotonic)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_speed_and_eta_follow_the_recent_transfer() -> None:
    clock = _Clock()
    load = LoadProgress(clock=clock)
    assert load.snapshot()["stage"] == "locating the weights"
    load.update(0, 1000)
    assert load.snapshot()["bytes_per_second"] is None  # one sample: no speed yet
    for _ in range(4):
        clock.now += 1
        load.update(load.done_bytes + 100, 1000)
    snap = load.snapshot()
    assert snap["stage"] == "downloading" and snap["done_bytes"] == 400 and snap["total_bytes"] == 1000
    assert snap["bytes_per_second"] == 100.0 and snap["eta_seconds"] == 6.0
    # A stall drops out of the window: the speed reflects the last seconds only.
    for _ in range(10):
        clock.now += 1
        load.update(400, 1000)
    assert load.snapshot()["bytes_per_second"] is None and load.snapshot()["eta_seconds"] is None


def test_a_restarted_transfer_measures_again_and_no_eta_after_the_download() -> None:
    clock = _Clock()
    load = LoadProgress(clock=clock)
    load.update(900, 1000)
    clock.now += 1
    load.update(100, 5000)  # the next set of files: counting restarts
    clock.now += 1
    load.update(600, 5000)
    assert load.snapshot()["bytes_per_second"] == 500.0
    load.stage = "loading into llama.cpp"
    assert load.snapshot()["eta_seconds"] is None
