"""Engine environments: real virtualenvs, real pip, offline from a folder of wheels built by the test."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.engines.wheels import build_wheel
from xinference.engines import envs
from xinference.engines.envs import EnvRecipe
from xinference.errors import EngineError, InvalidRequest


@pytest.fixture()
def envs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "envs"
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    build_wheel(folder, "xinf-probe", "1.2.0", "xinf_probe", "VALUE = 'probe 1.2'\n", requires=("xinf-extra",))
    build_wheel(folder, "xinf-extra", "0.1", "xinf_extra", "")
    return folder


def _offline(wheelhouse: Path) -> tuple[str, ...]:
    return ("--no-index", "--find-links", str(wheelhouse))


def _run(python: Path, code: str) -> str:
    """Run ``code`` with the env's Python, away from the source checkout (``-c`` puts the cwd on sys.path)."""
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, cwd=python.parent)
    return out.stdout.strip()


def test_slugs_and_names() -> None:
    assert envs.env_slug("vLLM") == "vllm"
    assert envs.env_slug("llama.cpp") == "llama_cpp"
    assert envs.normalize_distribution("MLX_LM") == "mlx-lm"
    with pytest.raises(InvalidRequest):
        envs.env_slug("../")


def test_not_installed_names_the_command(envs_root: Path) -> None:
    verdict = envs.check_engine_lib("vLLM", "no_such_module_xyz", "no-such-dist", None)
    assert not verdict
    assert "xinference engine install vLLM" in verdict.reason
    assert envs.env_python("vLLM") is None


@pytest.mark.slow
def test_install_standalone_offline_idempotent_remove(envs_root: Path, wheelhouse: Path) -> None:
    recipe = EnvRecipe(("xinf-probe==1.2.0",), remove=("xinf-extra",), pip_args=_offline(wheelhouse))
    stages: list[str] = []
    found = envs.install("Probe", recipe, lambda p: stages.append(p.stage))
    assert found["distributions"]["xinf-probe"] == "1.2.0"
    assert "xinf-extra" not in found["distributions"]  # removed after the install, as the recipe says
    assert stages[0] == "creating" and stages[-1] == "done" and "removing" in stages
    python = envs.env_python("Probe")
    assert python is not None and python.is_relative_to(envs_root)
    assert _run(python, "import xinf_probe; print(xinf_probe.VALUE)") == "probe 1.2"
    # standalone: the main environment's packages are not visible there
    alone = subprocess.run([str(python), "-c", "import xinference"], capture_output=True, cwd=python.parent)
    assert alone.returncode != 0

    verdict = envs.check_engine_lib("Probe", "xinf_probe", "xinf-probe", "1.0")
    assert verdict, verdict.reason
    too_old = envs.check_engine_lib("Probe", "xinf_probe", "xinf-probe", "2.0")
    assert not too_old and "1.2.0" in too_old.reason

    again: list[str] = []
    assert envs.install("Probe", recipe, lambda p: again.append(p.message)) == found
    assert again == ["Probe is already installed"]

    assert envs.uninstall("Probe") is True
    assert envs.env_python("Probe") is None and not (envs_root / "probe").exists()
    assert envs.uninstall("Probe") is False


@pytest.mark.slow
def test_overlay_sees_the_main_environment_after_its_own(envs_root: Path, wheelhouse: Path) -> None:
    recipe = EnvRecipe(("xinf-probe",), overlay=True, pip_args=_offline(wheelhouse))
    found = envs.install("Overlay", recipe)
    python = envs.env_python("Overlay")
    assert python is not None
    out = json.loads(
        _run(
            python,
            "import json, xinf_probe, xinference, pydantic; "
            "print(json.dumps([xinf_probe.__file__, xinference.__file__]))",
        )
    )
    assert out[0].startswith(str(envs_root))  # the env's own package
    assert not out[1].startswith(str(envs_root))  # ours, from the main environment
    # the manifest lists only what is in the env, not the whole main environment
    assert set(found["distributions"]) >= {"xinf-probe", "xinf-extra"}
    assert "pydantic" not in found["distributions"]


def _overlay_pth(envs_root: Path, slug: str) -> Path:
    (pth,) = (envs_root / slug).glob("lib/python*/site-packages/_xinference_overlay.pth")
    return pth


def _imports_xinference(python: Path) -> bool:
    code = "import xinference"
    return subprocess.run([str(python), "-c", code], capture_output=True, cwd=python.parent).returncode == 0


@pytest.mark.slow
def test_an_overlay_env_follows_the_main_environment_that_uses_it(envs_root: Path, wheelhouse: Path) -> None:
    """CI once ran on a cache whose MLX env an earlier checkout had installed: its overlay showed that checkout's
    venv, gone since, so the model process could not import xoscar and the env's Python had no pytest."""
    recipe = EnvRecipe(("xinf-probe",), overlay=True, pip_args=_offline(wheelhouse))
    envs.install("Overlay", recipe)
    pth = _overlay_pth(envs_root, "overlay")
    gone = "import site; site.addsitedir('/nonexistent/checkout/.venv/lib/site-packages')\n"
    python = envs.env_python("Overlay")
    assert python is not None

    pth.write_text(gone, encoding="utf-8")
    assert not _imports_xinference(python)
    assert envs.overlay_python("Overlay") == python  # what the worker starts a model process with
    assert _imports_xinference(python)

    pth.write_text(gone, encoding="utf-8")
    assert envs.install("Overlay", recipe)["engine"] == "Overlay"  # already installed: only re-pointed
    assert _imports_xinference(python)
    assert pth.read_text(encoding="utf-8") != gone


@pytest.mark.slow
def test_an_overlay_env_made_with_another_python_is_rebuilt(envs_root: Path, wheelhouse: Path) -> None:
    recipe = EnvRecipe(("xinf-probe",), overlay=True, pip_args=_offline(wheelhouse))
    envs.install("Overlay", recipe)
    path = envs_root / "overlay" / envs.MANIFEST_NAME
    recorded = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**recorded, "python": "3.0.1"}), encoding="utf-8")
    with pytest.raises(EngineError, match=r"made with Python 3\.0.*xinference engine install Overlay --force"):
        envs.overlay_python("Overlay")
    rebuilt = envs.install("Overlay", recipe)  # not "already installed": a venv of another Python
    assert rebuilt["installed_at"] > recorded["installed_at"]
    assert rebuilt["python"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")
    python = envs.overlay_python("Overlay")
    assert python is not None and _imports_xinference(python)


def test_no_overlay_python_for_an_env_not_installed(envs_root: Path) -> None:
    assert envs.overlay_python("Overlay") is None


@pytest.mark.slow
def test_failed_install_is_not_installed_and_says_why(envs_root: Path, wheelhouse: Path) -> None:
    recipe = EnvRecipe(("xinf-missing-package",), pip_args=_offline(wheelhouse))
    with pytest.raises(EngineError) as caught:
        envs.install("Broken", recipe)
    assert "xinf-missing-package" in caught.value.message and "resolving" in caught.value.message
    assert envs.manifest("Broken") is None and envs.env_python("Broken") is None
    # the next try reuses the half-made env and succeeds once the recipe is right
    fixed = EnvRecipe(("xinf-probe",), pip_args=_offline(wheelhouse))
    assert envs.install("Broken", fixed)["distributions"]["xinf-probe"] == "1.2.0"


def test_cancel_stops_the_install(envs_root: Path, wheelhouse: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(EngineError, match="cancelled"):
        envs.install("Cancelled", EnvRecipe(("xinf-probe",), pip_args=_offline(wheelhouse)), cancel=cancel)
    assert envs.manifest("Cancelled") is None
