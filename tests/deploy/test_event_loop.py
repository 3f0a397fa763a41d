"""``XINFERENCE_EVENT_LOOP``: the platform's processes run on uvloop where it is installed, on asyncio's loop when
asked, and a value that cannot be had stops the command before anything starts, naming it."""

from __future__ import annotations

import asyncio
import sys
import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from xinference.deploy import event_loop
from xinference.deploy.cluster import supervisor_main, worker_main
from xinference.deploy.local import main as local_main


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_takes_uvloop_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv("XINFERENCE_EVENT_LOOP", raising=False)
    assert event_loop.choose() == "uvloop"
    assert event_loop.run(_loop_module()).startswith("uvloop")


def test_asyncio_keeps_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_EVENT_LOOP", " Asyncio ")
    assert event_loop.choose() == "asyncio"
    assert event_loop.run(_loop_module()).startswith("asyncio")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert event_loop.choose("auto") == "asyncio"
    with pytest.raises(event_loop.EventLoopChoiceError, match="uvloop is not installed here"):
        event_loop.choose("uvloop")


def test_an_unknown_value_is_refused_and_its_coroutine_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_EVENT_LOOP", "tokio")
    main = _loop_module()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "never awaited" warning would fail here
        with pytest.raises(event_loop.EventLoopChoiceError, match=r"XINFERENCE_EVENT_LOOP='tokio' is not one of auto"):
            event_loop.run(main)
    assert main.cr_frame is None  # closed, not left for the garbage collector


@pytest.mark.parametrize(
    ("command", "args"),
    [(local_main, []), (supervisor_main, []), (worker_main, ["-e", "http://127.0.0.1:9"])],
)
def test_every_entry_point_stops_on_a_bad_value_before_it_starts(
    command: click.Command, args: list[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = CliRunner().invoke(command, args, env={"XINFERENCE_EVENT_LOOP": "tokio", "XINFERENCE_HOME": str(home)})
    assert result.exit_code == 1, result.output
    assert "XINFERENCE_EVENT_LOOP='tokio' is not one of auto, uvloop, asyncio" in result.output
    assert not home.exists()  # no logs set up, no supervisor asked (the worker's endpoint would refuse)
