"""Each engine's library check answers without importing its adapter (the worker reports them at start)."""

from __future__ import annotations

import json
import subprocess
import sys

from xinference.engines.libraries import LIBRARY_CHECKS
from xinference.engines.matcher import library_verdicts
from xinference.engines.registry import ENGINE_ORDER, get_engine_class


def test_every_engine_has_a_library_check_and_its_adapter_gives_the_same_verdict() -> None:
    assert set(LIBRARY_CHECKS) == set(ENGINE_ORDER)
    verdicts = library_verdicts()
    for engine in ENGINE_ORDER:
        assert get_engine_class(engine).check_lib().reason == verdicts[engine], engine
    assert verdicts["llama.cpp"] == ""  # installed with the main environment, as the README's set-up does


def test_the_library_verdicts_import_no_adapter() -> None:
    code = (
        "import json, sys\n"
        "from xinference.engines.matcher import library_verdicts\n"
        "verdicts = library_verdicts()\n"
        "adapters = sorted(m for m in sys.modules if m.startswith('xinference.engines.') and m.endswith('.engine'))\n"
        "print(json.dumps({'verdicts': verdicts, 'adapters': adapters}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["adapters"] == []
    assert set(answer["verdicts"]) == set(ENGINE_ORDER)
