"""The UI ships whole: every file is package data, the vendored libraries are the pinned ones, nothing is fetched
from elsewhere at run time."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

from xinference.api.admin.ui import UI_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_every_ui_file_is_package_data() -> None:
    from setuptools.config.pyprojecttoml import read_configuration  # reads TOML on Python 3.10 too

    pyproject = read_configuration(ROOT / "pyproject.toml", expand=False)
    patterns = pyproject["tool"]["setuptools"]["package-data"]["xinference"]
    files = [p.relative_to(UI_DIR.parent).as_posix() for p in UI_DIR.rglob("*") if p.is_file()]
    missing = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert files and missing == []


def test_vendored_libraries_are_the_pinned_versions() -> None:
    pinned = json.loads((ROOT / "frontend" / "package.json").read_text())["dependencies"]
    locked = json.loads((ROOT / "frontend" / "package-lock.json").read_text())["packages"]
    vendored = dict(line.split() for line in (UI_DIR / "vendor" / "VERSIONS").read_text().splitlines())
    assert set(vendored) == set(pinned)
    for name, version in vendored.items():
        assert pinned[name] == version == locked[f"node_modules/{name}"]["version"], name
        assert (UI_DIR / "vendor" / "licenses" / f"{name}.LICENSE").exists()


def test_no_file_loads_anything_from_elsewhere() -> None:
    external = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import\s+url\(|fetch\(\s*["']https?://""")
    for path in UI_DIR.rglob("*"):
        if path.suffix in {".html", ".css", ".js"} and "vendor" not in path.parts:
            assert not external.search(path.read_text()), path
