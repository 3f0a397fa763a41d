"""Whether an engine's backend library is installed here, at a version its adapter supports.

Shared by the adapters' ``check_lib()``: it never imports the backend (``importlib.util.find_spec`` plus the
installed distribution's metadata), so it stays cheap enough for the supervisor to call on every launch and every
``GET /v1/engines`` request.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from xinference.engines.verdict import Verdict

__all__ = ["check_library", "version_tuple"]

_NUMBERS = re.compile(r"\d+")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.8.5.post1"`` -> ``(0, 8, 5)``: the leading release numbers, enough for minimum-version checks."""
    release = re.split(r"[^\d.]", text.strip(), maxsplit=1)[0]
    return tuple(int(part) for part in _NUMBERS.findall(release)[:4])


def check_library(engine: str, module: str, distribution: str, minimum: str | None, hint: str) -> Verdict:
    """Accepted when ``module`` is importable and ``distribution`` is at least ``minimum``; else a sentence with
    the install hint (``pip install vllm``)."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return Verdict.reject(f"{engine} needs the {distribution} package, which is not installed ({hint})")
    if minimum is None:
        return Verdict.ok()
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return Verdict.ok()  # importable but without metadata (a source checkout): trust it
    if version_tuple(installed) < version_tuple(minimum):
        return Verdict.reject(
            f"{engine} needs {distribution} >= {minimum}, but {installed} is installed ({hint} --upgrade)"
        )
    return Verdict.ok()
