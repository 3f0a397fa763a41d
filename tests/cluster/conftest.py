"""Every cluster test runs several real processes (supervisor, workers, models) for minutes: ``heavy``, left out
of ``make test-fast``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in item.nodeid:
            item.add_marker(pytest.mark.heavy)
