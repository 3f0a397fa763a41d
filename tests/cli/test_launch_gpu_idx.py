"""``xinference launch --gpu_idx 0,1``: the web UI's "same as CLI" line writes several GPUs that way, and the API
wants a list of ints (the generic option parser would pass the string ``"0,1"``, which the API refuses). The
browser test ``tests/ui/test_gpus_and_statuses.py`` runs such a command against a real server."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.conftest import DEFAULT_MODEL
from xinference.cli.launch import _gpu_idx
from xinference.cli.main import main


@pytest.mark.parametrize(("given", "sent"), [("0,1", [0, 1]), (" 2 , 0 ", [2, 0]), ("3", [3]), (1, 1), (0, 0)])
def test_gpu_indices_become_ints(given: object, sent: object) -> None:
    assert _gpu_idx(given) == sent


def test_bad_gpu_indices_are_a_usage_error_naming_the_option() -> None:
    for bad in ("0,x", "0,,1", "1.5", "-1", "²"):
        result = CliRunner().invoke(
            main, ["launch", "-e", "http://127.0.0.1:1", "-n", DEFAULT_MODEL, "--gpu_idx", bad], catch_exceptions=False
        )
        assert result.exit_code == 2, (bad, result.output)
        assert "--gpu_idx takes GPU indices separated by commas" in result.output
