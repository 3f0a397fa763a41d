"""Every cluster test runs several real processes (supervisor, workers, models) for minutes: ``heavy``, left out
of ``make test-fast``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.cluster.test_cluster as cluster_module
from tests.cluster.test_cluster import Cluster, wait_for


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in item.nodeid:
            item.add_marker(pytest.mark.heavy)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A supervisor and two workers (``worker-a``, ``worker-b``), each its own process on loopback, both joined."""
    yield from _two_workers(tmp_path)


@pytest.fixture
def cluster_default_timeouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """As ``cluster``, with the default heartbeat (3 s) and worker timeout (12 s) instead of the short ones: what
    happens in the seconds after a kill then owes nothing to the supervisor declaring the worker dead."""
    monkeypatch.setattr(cluster_module, "ENV", {})
    yield from _two_workers(tmp_path)


def _two_workers(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    try:
        cluster.start_supervisor()
        cluster.start_worker("worker-a")
        cluster.start_worker("worker-b")
        wait_for(lambda: len(cluster.workers()) == 2, 30, "two workers to join")
        yield cluster
    finally:
        cluster.stop_all()
