"""Each engine's library check answers without importing its adapter (the worker reports them at start), and the
verdicts are checked again only when a package install could have changed them (heartbeats send them every beat)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from xinference.engines import libraries
from xinference.engines.libraries import LIBRARY_CHECKS, library_verdicts
from xinference.engines.registry import ENGINE_ORDER, get_engine_class
from xinference.engines.verdict import Verdict


def test_every_engine_has_a_library_check_and_its_adapter_gives_the_same_verdict() -> None:
    assert set(LIBRARY_CHECKS) == set(ENGINE_ORDER)
    verdicts = library_verdicts()
    for engine in ENGINE_ORDER:
        assert get_engine_class(engine).check_lib().reason == verdicts[engine], engine
    assert verdicts["llama.cpp"] == ""  # installed with the main environment, as the README's set-up does


def test_the_library_verdicts_import_no_adapter() -> None:
    code = (
        "import json, sys\n"
        "from xinference.engines.libraries import library_verdicts\n"
        "verdicts = library_verdicts()\n"
        "adapters = sorted(m for m in sys.modules if m.startswith('xinference.engines.') and m.endswith('.engine'))\n"
        "print(json.dumps({'verdicts': verdicts, 'adapters': adapters}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["adapters"] == []
    assert set(answer["verdicts"]) == set(ENGINE_ORDER)


def _counting_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every engine's check records its call and answers as before; the kept verdicts start empty."""
    calls: list[str] = []
    for engine, check in list(LIBRARY_CHECKS.items()):

        def counted(engine: str = engine, check: Callable[[], Verdict] = check) -> Verdict:
            calls.append(engine)
            return check()

        monkeypatch.setitem(LIBRARY_CHECKS, engine, counted)
    monkeypatch.setattr(libraries, "_verdicts_cache", None)
    return calls


def _age(folder: Path) -> None:
    """Date ``folder`` back a minute, so that a change made now moves its time even on a coarse clock."""
    past = time.time() - 60
    os.utime(folder, (past, past))


def test_the_verdicts_are_kept_until_a_package_folder_changes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path / "envs"))
    calls = _counting_checks(monkeypatch)
    _age(site)
    first = library_verdicts()
    assert sorted(calls) == sorted(ENGINE_ORDER)
    # the worker's heartbeats: no check runs again, and the answer is a copy the caller may change
    first["llama.cpp"] = "changed by the caller"
    again = library_verdicts()
    assert len(calls) == len(ENGINE_ORDER)
    assert again["llama.cpp"] == ""
    # a distribution installed into a folder on sys.path
    (site / "probe-1.0.dist-info").mkdir()
    assert library_verdicts() == again
    assert len(calls) == 2 * len(ENGINE_ORDER)
    library_verdicts()
    assert len(calls) == 2 * len(ENGINE_ORDER)


def test_an_engine_environment_written_or_removed_checks_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    envs_root = tmp_path / "envs"
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(envs_root))
    calls = _counting_checks(monkeypatch)
    envs_root.mkdir()
    _age(envs_root)
    library_verdicts()
    assert len(calls) == len(ENGINE_ORDER)
    env = envs_root / "vllm"
    env.mkdir()  # an install starts
    _age(envs_root)
    _age(env)
    library_verdicts()
    assert len(calls) == 2 * len(ENGINE_ORDER)
    (env / "xinference-env.json").write_text("{}")  # the manifest is written last, inside the env's folder
    library_verdicts()
    assert len(calls) == 3 * len(ENGINE_ORDER)
    library_verdicts()
    assert len(calls) == 3 * len(ENGINE_ORDER)
    (env / "xinference-env.json").unlink()
    env.rmdir()  # uninstalled
    library_verdicts()
    assert len(calls) == 4 * len(ENGINE_ORDER)
