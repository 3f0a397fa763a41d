"""Process-wide xoscar settings, applied before an actor pool starts (main pools and model subprocesses).

Two of them:

- xoscar registers a lazy serializer for ``torch.Tensor``; every pool start reloads lazy handlers, which imports
  torch whenever it is installed: ~1 s and ~225 MiB in every process, including the API's and a llama.cpp model's
  that never touch torch. The platform never sends tensors between actors (requests and chunks are plain dicts), so
  the handler is dropped here. Engines that use torch import it themselves.
- xoscar tells a live sub-pool from a dead one (and a child tells whether its parent still lives) by comparing a
  process's creation time, which psutil 7 on Linux computes as "seconds since boot + the boot time", re-reading the
  boot time (``btime``) on every call. ``btime`` is wall clock minus uptime, so it moves whenever the clock is
  stepped (NTP, a VM resuming or catching up under load). Once it moves, every identity check fails: a running model
  reads as "exited with code 0", a child watching its parent exits, and requests get 503 until the restart. The
  10-minute soak saw exactly that on a loaded 2-core VM. On Linux, xoscar's process-identity modules get a psutil
  whose boot time is read once, when this module is imported: ``Process.create_time`` is then the (clock-proof)
  time since boot plus that one value, so it never moves within a process. It stays in the epoch-based form xoscar
  already stored before this import (a sub-pool builds its parent's identity just before importing its modules),
  so those stored values still match.
"""

from __future__ import annotations

import logging
import sys
import types

import psutil

__all__ = ["StableCreateTimeProcess"]

logger = logging.getLogger(__name__)

try:
    from xoscar.serialization.torch import TorchTensorSerializer

    TorchTensorSerializer.unregister("torch.Tensor")
except Exception:  # noqa: BLE001 - an xoscar without this handler needs nothing dropped
    logger.debug("no torch serializer to drop", exc_info=True)


_BOOT_TIME = psutil.boot_time()


class StableCreateTimeProcess(psutil.Process):
    """A ``psutil.Process`` whose ``create_time()`` uses the boot time read once per process (see the module doc)."""

    def create_time(self) -> float:
        try:
            since_boot = float(self._proc.create_time(monotonic=True))
        except TypeError:  # a psutil without the since-boot variant: its own (clock-based) answer
            return float(super().create_time())
        return since_boot + float(_BOOT_TIME)


def _stable_psutil() -> types.ModuleType:
    shim = types.ModuleType("psutil", psutil.__doc__)
    shim.__dict__.update({k: v for k, v in vars(psutil).items() if not k.startswith("__")})
    shim.Process = StableCreateTimeProcess  # type: ignore[attr-defined]
    shim.boot_time = lambda: _BOOT_TIME  # type: ignore[attr-defined]
    return shim


def _pin_process_identity() -> None:
    if not sys.platform.startswith("linux"):
        return
    shim = _stable_psutil()
    for name in ("xoscar.backends.indigen.handoff", "xoscar.backends.indigen.pool"):
        try:
            module = __import__(name, fromlist=["psutil"])
        except ImportError:
            continue
        if getattr(module, "psutil", None) is psutil:
            module.psutil = shim  # type: ignore[attr-defined]


_pin_process_identity()
