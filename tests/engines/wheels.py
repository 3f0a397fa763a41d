"""Build tiny real wheels on the fly, so engine-environment installs are tested offline (``--no-index``)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

__all__ = ["build_wheel"]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(
    folder: Path, distribution: str, version: str, module: str, source: str, requires: tuple[str, ...] = ()
) -> Path:
    """A pure-Python wheel of ``distribution`` holding ``module.py`` with ``source``; returns its path."""
    stem = distribution.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    metadata = (
        "\n".join(
            [
                "Metadata-Version: 2.1",
                f"Name: {distribution}",
                f"Version: {version}",
                *(f"Requires-Dist: {r}" for r in requires),
            ]
        )
        + "\n"
    )
    files = {
        f"{module}.py": source.encode(),
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: xinference-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path
