"""Xinference: serve open models behind one OpenAI-compatible endpoint, on a laptop or a cluster."""

from __future__ import annotations

from xinference import _lean_imports

__all__ = ["__version__"]

__version__ = "0.1.0"

# Before anything imports xoscar: its serialization would otherwise load pandas and scipy (see _lean_imports)
_lean_imports.install()
