"""A step of the wall clock (which moves Linux's ``btime``) must not make xoscar think a live process died.

The soak saw model processes reported "exited with code 0" and 503s on a loaded VM: psutil 7 re-reads the boot time
on every ``create_time()``, and xoscar compares creation times for equality."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

import xinference.core.xoscar_setup  # noqa: F401 - the fix under test, applied as every pool applies it

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="btime is Linux's")


def test_a_live_sub_pool_stays_alive_after_a_clock_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from psutil import _pslinux
    from xoscar.backends.indigen import handoff

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        watched = handoff.SubPoolProcess(
            {"pid": child.pid, "create_time": handoff.psutil.Process(child.pid).create_time()}
        )
        assert watched.returncode is None
        stepped = _pslinux.boot_time() + 2.0
        monkeypatch.setattr(_pslinux, "boot_time", lambda: stepped)  # an NTP step of 2 s
        assert psutil.Process(child.pid).create_time() != watched.identity["create_time"]  # the trap is real
        assert watched.returncode is None  # before the fix: 0, as if it had exited
    finally:
        child.kill()
        child.wait()
    assert watched.returncode == 0  # a dead one still reads as dead


def test_identities_built_before_the_import_still_match() -> None:
    """A sub-pool stores its parent's identity just before importing its modules: values must keep their form."""
    from xinference.core.xoscar_setup import StableCreateTimeProcess

    assert abs(StableCreateTimeProcess().create_time() - psutil.Process().create_time()) < 0.02
