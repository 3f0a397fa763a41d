"""Xinference: serve open models behind one OpenAI-compatible endpoint, on a laptop or a cluster."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
