"""The values each launch field takes (``core/launch.py``): the one rule the API's request models and the
CLI both apply, so placement, the registry and keep-alive never see a value they cannot handle."""

from __future__ import annotations

from typing import Any

import pytest

from xinference.core.launch import (
    MAX_GPUS,
    MAX_KEEP_ALIVE_SECONDS,
    check_gpu_idx,
    check_keep_alive,
    check_model_size,
    check_n_gpu,
)


@pytest.mark.parametrize("value", ["auto", None, 0, 1, 8, MAX_GPUS])
def test_n_gpu_accepts_auto_null_and_counts(value: Any) -> None:
    assert check_n_gpu(value) == value


@pytest.mark.parametrize(
    "value", ["two", "", "AUTO", "1", -3, -1, MAX_GPUS + 1, 10**30, 1.5, 2.0, True, False, [], [1], {}, {"n": 1}]
)
def test_n_gpu_refuses_the_rest(value: Any) -> None:
    with pytest.raises(ValueError, match="n_gpu is 'auto', null"):
        check_n_gpu(value)


@pytest.mark.parametrize("value", [None, 0, 3, [0], [1, 0], list(range(MAX_GPUS))])
def test_gpu_idx_accepts_indices(value: Any) -> None:
    assert check_gpu_idx(value) == value


@pytest.mark.parametrize(
    "value",
    [
        -1,
        MAX_GPUS,
        10**30,
        1.5,
        True,
        "0",
        "0,1",
        [],
        [-1],
        [True],
        ["0"],
        [1.5],
        [10**30],
        list(range(MAX_GPUS + 1)),
        {},
        {"0": 1},
    ],
)
def test_gpu_idx_refuses_non_indices(value: Any) -> None:
    with pytest.raises(ValueError, match="gpu_idx is a GPU index"):
        check_gpu_idx(value)


def test_gpu_idx_refuses_duplicates() -> None:
    with pytest.raises(ValueError, match="twice"):
        check_gpu_idx([0, 1, 0])


@pytest.mark.parametrize("value", [None, "10m", "1h30m", "30s", "0", 0, 300, 2.5, -1, "-1", MAX_KEEP_ALIVE_SECONDS])
def test_keep_alive_accepts_durations(value: Any) -> None:
    assert check_keep_alive(value) == value


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        [],
        {},
        ["10m"],
        "",
        "abc",
        "10x",
        "-",
        "nan",
        "inf",
        "-inf",
        "1e300",
        float("nan"),
        float("inf"),
        float("-inf"),
        1e300,
        10**30,
        10**400,
        MAX_KEEP_ALIVE_SECONDS + 1,
    ],
)
def test_keep_alive_refuses_the_rest(value: Any) -> None:
    with pytest.raises(ValueError, match="keep_alive"):
        check_keep_alive(value)


@pytest.mark.parametrize("value", [None, 7, 0.5, "7", "0_5", "0_135", "1.5", 70])
def test_model_size_accepts_sizes(value: Any) -> None:
    assert check_model_size(value) == value


@pytest.mark.parametrize(
    "value", [0, -3, -0.5, "0", "-1", "", "abc", "7b", True, float("nan"), float("inf"), 10**30, 1e300, [], {}, [7]]
)
def test_model_size_refuses_the_rest(value: Any) -> None:
    with pytest.raises(ValueError, match="model_size_in_billions"):
        check_model_size(value)
