"""Keep pandas and scipy out of every process that imports xoscar through xinference.

xoscar's serialization package imports pandas and scipy when it loads (``serialization/core.pyx`` does
``import pandas as pd`` only to patch a pandas < 1.3 pickling helper; ``serialization/cuda.py`` needs pandas only
to serialize cudf frames; ``serialization/scipy.py`` registers a sparse-matrix serializer when ``scipy.sparse``
imports). No pandas, cudf or scipy object ever crosses an actor call here, yet the two libraries cost the
platform ~45 MiB of RSS and most of its start time.

:func:`install` puts a one-shot finder on ``sys.meta_path``: the first ``import xoscar`` runs xoscar's own
``__init__`` with placeholder ``pandas``/``scipy`` packages in ``sys.modules`` (empty ``__path__``, so
``from pandas.core.internals import ...`` and ``import scipy.sparse`` raise ``ModuleNotFoundError``, which xoscar
already catches), then takes the placeholders out again. What that changes in xoscar: the pandas < 1.3 patch is
skipped, scipy sparse matrices are pickled instead of sent as buffers, and cudf frames cannot be serialized (no
cudf here). A later ``import pandas`` (an engine's dependency, a test) gets the real library: only xoscar's two
module globals keep the placeholder.

Nothing happens when xoscar, pandas or scipy is already imported, so the order of imports can only lose the
saving, never break xoscar. The stand-ins live in ``sys.modules`` only while xoscar's ``__init__`` runs (at start-up,
before any thread that could import pandas exists). ``XINFERENCE_XOSCAR_FULL_IMPORT=1`` turns the finder off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["KEPT_OUT", "install", "placeholder_modules"]

#: Top-level packages xoscar imports at load time and never needs here
KEPT_OUT: tuple[str, ...] = ("pandas", "scipy")
_OPT_OUT_VARIABLE = "XINFERENCE_XOSCAR_FULL_IMPORT"


def _placeholder(name: str) -> types.ModuleType:
    """An empty package named ``name``: importing any of its submodules raises ``ModuleNotFoundError``."""
    module = types.ModuleType(name, f"stand-in for {name} while xoscar loads (xinference._lean_imports)")
    module.__path__ = []
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    return module


@contextmanager
def placeholder_modules(names: Sequence[str]) -> Iterator[list[str]]:
    """Stand empty packages in for ``names`` (those not imported yet) and take them out again on exit.

    Yields the names actually replaced. Submodules of a placeholder that something managed to import are removed
    with it, so nothing of the stand-in outlives the block.
    """
    placed: dict[str, types.ModuleType] = {}
    for name in names:
        if name not in sys.modules:
            placed[name] = sys.modules[name] = _placeholder(name)
    try:
        yield list(placed)
    finally:
        for name, module in placed.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
            for key in [key for key in sys.modules if key.startswith(name + ".")]:
                del sys.modules[key]


class _LeanLoader(importlib.abc.Loader):
    """Runs xoscar's ``__init__`` with the placeholders in place, then hands the module its real loader."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__ is not None:
            module.__spec__.loader = self._real
        module.__loader__ = self._real
        with placeholder_modules([name for name in KEPT_OUT if name not in sys.modules]):
            self._real.exec_module(module)


class _XoscarFinder(importlib.abc.MetaPathFinder):
    """Answers the first ``import xoscar`` only, then leaves ``sys.meta_path``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "xoscar":
            return None
        _remove_finder()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LeanLoader(spec.loader)
        return spec


def _remove_finder() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _XoscarFinder)]


def install() -> bool:
    """Put the finder in front of ``sys.meta_path``; ``False`` when it would change nothing or is turned off."""
    if os.environ.get(_OPT_OUT_VARIABLE, "") not in ("", "0"):
        return False
    if "xoscar" in sys.modules or all(name in sys.modules for name in KEPT_OUT):
        return False
    if not any(isinstance(finder, _XoscarFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _XoscarFinder())
    return True
