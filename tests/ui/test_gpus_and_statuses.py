"""GPUs on the Cluster page and in the launch dialog, and the degraded and unloaded statuses on the Running page,
in a real browser against a real ``xinference-local`` (offline, the bundled model launched).

This machine has no GPU, so a stand-in serves the GPUs (see ``with_stand_in_gpus``); the statuses are real: a
replica killed with restarts turned off leaves its model degraded, and the unload API unloads a model.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import DEFAULT_MODEL, LocalServer, start_local_server
from tests.ui.conftest import screenshot, watch

pytestmark = pytest.mark.slow

GIB = 1024**3
DEGRADED_UID = "two-replicas"

# Stand-in for GPU hardware: two GPUs on the worker, in the shapes the supervisor reports them (HardwareInfo.gpus,
# and the "devices" of /v1/cluster/info with the replicas holding each). Under test: what the pages show and what
# the launch dialog sends, not the hardware.
STAND_IN_GPUS = [
    {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "vendor": "nvidia",
        "memory_total_bytes": 80 * GIB,
        "memory_free_bytes": 20 * GIB,
    },
    {
        "index": 1,
        "name": "NVIDIA L4",
        "vendor": "nvidia",
        "memory_total_bytes": 24 * GIB,
        "memory_free_bytes": 24 * GIB - 512 * 1024**2,
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    # No restart of a dead replica: the degraded status stays until the test ends it.
    server = start_local_server(
        tmp_path_factory.mktemp("ui-gpus-home"), env={"HF_HUB_OFFLINE": "1", "XINFERENCE_MODEL_RESTARTS": "0"}
    )
    try:
        response = httpx.post(
            f"{server.api}/models", json={"model_name": DEFAULT_MODEL, "model_engine": "llama.cpp"}, timeout=180
        )
        assert response.status_code == 200, response.text
        yield server
    finally:
        server.stop_and_reap()


def with_stand_in_gpus(route: Any) -> None:
    """The server's real ``/v1/cluster/info`` with :data:`STAND_IN_GPUS` on its first worker; the first GPU is
    held by the first replica of the default model."""
    response = route.fetch()
    info = response.json()
    worker = info["workers"][0]
    worker["hardware"]["gpus"] = STAND_IN_GPUS
    worker["hardware"]["cuda_available"] = True
    holder = info["models"][DEFAULT_MODEL][0]["replica_uid"]
    info["devices"] = [
        {
            "worker": worker["address"],
            "index": gpu["index"],
            "name": gpu["name"],
            "vendor": gpu["vendor"],
            "memory_total_bytes": gpu["memory_total_bytes"],
            "memory_used_bytes": gpu["memory_total_bytes"] - gpu["memory_free_bytes"],
            "models": [holder] if gpu["index"] == 0 else [],
        }
        for gpu in STAND_IN_GPUS
    ]
    route.fulfill(status=response.status, json=info)


def _open_launch_dialog(page: Any, server: LocalServer) -> None:
    page.goto(f"{server.endpoint}/ui/#/launch")
    page.fill("[data-testid=model-search]", "smollm2-instruct")
    page.locator(".model-card").first.get_by_role("button", name="Launch").click()
    page.locator("label.engine[data-engine='llama.cpp'] input").wait_for()


def test_gpus_on_the_cluster_page_and_in_the_launch_dialog(page: Any, server: LocalServer) -> None:
    info = httpx.get(f"{server.api}/cluster/info", timeout=10).json()
    address = info["workers"][0]["address"]
    holder = info["models"][DEFAULT_MODEL][0]["replica_uid"]
    if info["devices"]:
        pytest.skip("this machine has GPUs of its own: the stand-in is for machines without any")

    # This machine as it is: no GPU to pick.
    _open_launch_dialog(page, server)
    assert page.locator("[data-testid=gpu-none]").inner_text() == "none on this cluster: runs on CPU"

    page.route("**/v1/cluster/info", with_stand_in_gpus)
    page.goto(f"{server.endpoint}/ui/#/cluster")
    gpus = page.locator(f".worker[data-worker='{address}'] .gpu")
    gpus.nth(1).wait_for()
    assert gpus.count() == 2
    first, second = gpus.all_inner_texts()
    assert first.startswith("#0 NVIDIA H100 80GB HBM3") and "60.0 GiB / 80.0 GiB" in first
    assert f"held by {holder}" in first
    assert second.startswith("#1 NVIDIA L4") and "512.0 MiB / 24.0 GiB" in second and "held by" not in second
    assert "width: 75%" in (gpus.nth(0).locator(".meter-fill").get_attribute("style") or "")
    screenshot(page, "cluster-gpus")

    # The launch dialog lists the only worker's GPUs; a checked one is the launch's gpu_idx.
    _open_launch_dialog(page, server)
    picks = page.locator("[data-testid=gpu-picks] label[data-gpu]")
    picks.nth(1).wait_for()
    assert picks.count() == 2
    labels = [" ".join(text.split()) for text in picks.all_inner_texts()]
    assert labels == [
        f"#0 NVIDIA H100 80GB HBM3 · 20.0 GiB free of 80.0 GiB · used by {holder}",
        "#1 NVIDIA L4 · 23.5 GiB free of 24.0 GiB",
    ]
    command = page.locator("[data-testid=cli-command]")
    assert "--gpu_idx" not in command.inner_text()
    picks.nth(1).locator("input").check()
    assert command.inner_text().endswith(f" -q Q4_1 --gpu_idx 1 -e {server.endpoint}")
    # Choosing a worker clears the GPUs (indices are a worker's own); then both of its GPUs.
    assert page.locator("#worker option").all_inner_texts() == ["any", address]
    page.select_option("#worker", address)
    assert "--gpu_idx" not in command.inner_text() and not picks.nth(1).locator("input").is_checked()
    picks.nth(1).locator("input").check()
    picks.nth(0).locator("input").check()
    shown = command.inner_text()
    assert shown.endswith(f" -q Q4_1 --worker_ip {address} --gpu_idx 0,1 -e {server.endpoint}")
    screenshot(page, "launch-gpus")

    # The launch request carries them; the real server (no GPU here) names the GPUs it does not have.
    with page.expect_request(lambda r: r.method == "POST" and r.url.split("?")[0].endswith("/v1/models")) as sent:
        page.click("[data-testid=launch-button]")
    body = sent.value.post_data_json
    assert body["gpu_idx"] == [0, 1] and body["worker_ip"] == address
    refusal = f"gpu_idx [0, 1] does not exist on worker {address} (it has no GPU)"
    page.locator(".modal .error-box").wait_for()
    assert refusal in page.locator(".modal .error-box").inner_text()

    # "Same as CLI" is the same launch: the CLI sends the same request and gets the same answer.
    cli = shown.replace("xinference launch", f"{shlex.quote(sys.executable)} -m xinference.cli launch", 1)
    run = subprocess.run(["bash", "-c", cli], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and refusal in run.stderr, run.stderr
    assert [m["model_uid"] for m in httpx.get(f"{server.api}/models", timeout=10).json()["data"]] == [DEFAULT_MODEL]


def test_running_page_shows_degraded_and_unloaded_models(page: Any, server: LocalServer) -> None:
    launched = httpx.post(
        f"{server.api}/models",
        timeout=300,
        json={
            "model_name": DEFAULT_MODEL,
            "model_engine": "llama.cpp",
            "model_uid": DEGRADED_UID,
            "replica": 2,
            "n_ctx": 512,
        },
    )
    assert launched.status_code == 200, launched.text
    try:
        problems = watch(page)
        page.goto(f"{server.endpoint}/ui/#/running")
        page.evaluate("window.__sameDocument = true")
        row = page.locator(f"tr[data-uid='{DEGRADED_UID}']")
        row.locator(".badge[data-status=ready]").wait_for()
        row.get_by_text("2/2").wait_for()

        # A replica's process dies and is not restarted: degraded, one of two replicas, still serving.
        replicas = httpx.get(f"{server.api}/models/{DEGRADED_UID}", timeout=10).json()["replicas"]
        pid = replicas[-1]["pid"]
        assert pid in [p.pid for p in server.descendants()], replicas  # a model process of this test's server
        os.kill(pid, signal.SIGKILL)
        row.locator(".badge[data-status=degraded]").wait_for()
        row.get_by_text("1/2").wait_for()
        assert httpx.get(f"{server.api}/models/{DEGRADED_UID}", timeout=10).json()["status"] == "degraded"
        assert row.get_by_role("button", name="+ replica").is_enabled()
        assert row.get_by_role("button", name="− replica").is_disabled()
        assert row.get_by_role("link", name="Chat").count() == 1
        assert row.locator("[data-testid=failure]").count() == 0

        # Unloaded: no process, listed with its plan; nothing to scale. Loaded again, it is ready again.
        other = page.locator(f"tr[data-uid='{DEFAULT_MODEL}']")
        assert httpx.post(f"{server.api}/models/{DEFAULT_MODEL}/unload", timeout=120).status_code == 200
        other.locator(".badge[data-status=unloaded]").wait_for()
        other.get_by_text("0/1").wait_for()
        assert other.get_by_role("button", name="+ replica").is_disabled()
        screenshot(page, "running-degraded-unloaded")
        assert httpx.post(f"{server.api}/models/{DEFAULT_MODEL}/load", timeout=300).status_code == 200
        other.locator(".badge[data-status=ready]").wait_for()
        other.get_by_text("1/1").wait_for()
        assert page.evaluate("window.__sameDocument === true"), "the page was reloaded"
        assert problems.all() == []
    finally:
        httpx.delete(f"{server.api}/models/{DEGRADED_UID}", timeout=60)
