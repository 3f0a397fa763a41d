"""Process-wide xoscar settings, applied before an actor pool starts (main pools and model subprocesses).

xoscar registers a lazy serializer for ``torch.Tensor``; every pool start reloads lazy handlers, which imports torch
whenever it is installed: ~1 s and ~225 MiB in every process, including the API's and a llama.cpp model's that
never touch torch. The platform never sends tensors between actors (requests and chunks are plain dicts), so the
handler is dropped here. Engines that use torch import it themselves.
"""

from __future__ import annotations

import logging

__all__: list[str] = []

try:
    from xoscar.serialization.torch import TorchTensorSerializer

    TorchTensorSerializer.unregister("torch.Tensor")
except Exception:  # noqa: BLE001 - an xoscar without this handler needs nothing dropped
    logging.getLogger(__name__).debug("no torch serializer to drop", exc_info=True)
