"""Keep libraries nothing here uses out of every process that imports xinference: pandas and scipy (through
xoscar), rich, pygments and click (through httpx's command-line client).

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

httpx's ``__init__`` imports its command-line client (``httpx._main``: click, rich and pygments, ~0.1 s and ~8 MiB)
whenever those are installed, only to export ``httpx.main``, the ``httpx`` console command. The same finder answers
the first ``import httpx``: while httpx's ``__init__`` runs, ``httpx._main`` is blocked (``None`` in ``sys.modules``),
so httpx falls back to its own stand-in ``main`` that asks for ``httpx[cli]``; the block is lifted after, so an
explicit ``import httpx._main`` still works. The ``httpx`` console command does not import xinference and is
unaffected. ``XINFERENCE_HTTPX_FULL_IMPORT=1`` turns this part off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["BLOCKED_SUBMODULES", "KEPT_OUT", "blocked_modules", "install", "placeholder_modules"]

#: Top-level packages xoscar imports at load time and never needs here
KEPT_OUT: tuple[str, ...] = ("pandas", "scipy")
_OPT_OUT_VARIABLE = "XINFERENCE_XOSCAR_FULL_IMPORT"
#: Submodules a package's ``__init__`` imports optionally (it catches the ImportError) that nothing here uses
BLOCKED_SUBMODULES: dict[str, tuple[str, ...]] = {"httpx": ("httpx._main",)}
_HTTPX_OPT_OUT_VARIABLE = "XINFERENCE_HTTPX_FULL_IMPORT"


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


@contextmanager
def blocked_modules(names: Sequence[str]) -> Iterator[list[str]]:
    """Make ``import`` of each of ``names`` (those not imported yet) raise ``ImportError`` until the block exits."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not importable" mark
    try:
        yield blocked
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


class _LeanLoader(importlib.abc.Loader):
    """Runs a package's ``__init__`` with its unused imports kept out, then hands the module its real loader."""

    def __init__(self, real: importlib.abc.Loader, name: str) -> None:
        self._real = real
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__spec__ is not None:
            module.__spec__.loader = self._real
        module.__loader__ = self._real
        if self._name == "xoscar":
            with placeholder_modules([name for name in KEPT_OUT if name not in sys.modules]):
                self._real.exec_module(module)
        else:
            with blocked_modules(BLOCKED_SUBMODULES.get(self._name, ())):
                self._real.exec_module(module)


class _LeanFinder(importlib.abc.MetaPathFinder):
    """Answers the first import of each of its packages only, and leaves ``sys.meta_path`` after the last."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = set(names)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        self.names.discard(fullname)
        if not self.names:
            _remove_finder()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LeanLoader(spec.loader, fullname)
        return spec


def _remove_finder() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _LeanFinder)]


def _opted_out(variable: str) -> bool:
    return os.environ.get(variable, "") not in ("", "0")


def install() -> bool:
    """Put the finder in front of ``sys.meta_path``; ``False`` when it would change nothing or is turned off."""
    names = []
    if not _opted_out(_OPT_OUT_VARIABLE) and "xoscar" not in sys.modules:
        if not all(name in sys.modules for name in KEPT_OUT):
            names.append("xoscar")
    if not _opted_out(_HTTPX_OPT_OUT_VARIABLE) and "httpx" not in sys.modules:
        names.append("httpx")
    if not names or any(isinstance(finder, _LeanFinder) for finder in sys.meta_path):
        return bool(names)
    sys.meta_path.insert(0, _LeanFinder(names))
    return True
