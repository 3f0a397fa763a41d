"""Wrong values for every launch and scaling field, sent to the real server: each is a 400 that names the field,
never a 500, nothing starts, and the server serves as before afterwards.

The launches name the running model (so nothing could start under a new uid) and every answer must be a 400
whose ``param`` is the field: a wrong value that slipped through would meet some later refusal (the uid is taken,
a placement error naming another field) and fail the test.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import LocalServer

#: A launch the server would accept apart from the uid it takes (the session's model is running).
LAUNCH_BASE: dict[str, Any] = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp"}
HUGE = 10**30
#: Not numbers, strings, booleans: wrong for any field that takes one kind of scalar.
CONTAINERS: list[Any] = [[], [1], ["a"], {}, {"a": 1}]
NOT_STR: list[Any] = [*CONTAINERS, 1, 1.5, True, -3, HUGE]
NOT_INT: list[Any] = [*CONTAINERS, "1", "two", "", 1.5, 2.0, True, False]
NOT_BOOL: list[Any] = [*CONTAINERS, "true", "yes", "", 1, 0, 1.5, HUGE, None]

LAUNCH_WRONG: dict[str, list[Any]] = {
    "model_name": [*NOT_STR, None, "", "../etc", "a b", "a" * 101],
    "model_type": [*NOT_STR, None, "", "bogus"],
    "model_engine": [*NOT_STR, "", "no-such-engine"],
    "model_uid": [*NOT_STR, "", "../x", "a/b", "a" * 101],
    "model_format": [*NOT_STR, "", "no-such-format"],
    "model_size_in_billions": [*CONTAINERS, True, -3, -0.5, 0, HUGE, "", "abc", "-1"],
    "quantization": [*NOT_STR, "", "no-such-quant"],
    "replica": [*NOT_INT, None, 0, -3, 65, HUGE],
    "n_worker": [*NOT_INT, 0, -3, HUGE],
    "n_gpu": [*CONTAINERS, "two", "", "AUTO", "1", 1.5, True, -3, HUGE],
    "gpu_idx": [
        *CONTAINERS[3:],
        "0",
        "0,1",
        "",
        1.5,
        True,
        -1,
        HUGE,
        [],
        [-1],
        [0, 0],
        [True],
        ["0"],
        [1.5],
        [HUGE],
        list(range(1000)),
    ],
    "worker_ip": [*NOT_STR, "x" * 301, "no-such-worker"],
    "model_path": [*NOT_STR, "relative/path", "/a\0b"],
    "download_hub": [*NOT_STR, "", "github"],
    "ignore_memory_check": NOT_BOOL,
    "autostart": NOT_BOOL,
    "keep_alive": [*CONTAINERS, True, "", "abc", "10x", "nan", "inf", "-", HUGE, 10**400, 1e300, "1e300"],
    "max_queued": [*NOT_INT, -1, HUGE],
    "queue_timeout": [*CONTAINERS, "30", "", True, 0, -1, 1e300, HUGE],
    # official-client fields for features not built: any non-null value is named
    "replica_config": [5, "x", True, [5], [{"devices": [5]}], {"devices": [{"worker_ip": "a"}]}],
    "peft_model_config": [5, "x", {"lora_list": [1]}],
    "request_limits": [5, "x", [1]],
    "envs": ["x", {"A": "1"}, [1]],
    "enable_thinking": [True, "x", 5],
}

SCALE_WRONG: dict[str, list[Any]] = {
    "replica": [*NOT_INT, None, 0, -3, 65, HUGE],
    "n_gpu": [*CONTAINERS, "two", "", "AUTO", "1", 1.5, True, -3, HUGE],
    "model_engine": [*NOT_STR, "", "vLLM"],
    "replica_config": [
        5,
        "x",
        True,
        [5],
        ["x"],
        {"devices": [5]},
        {"devices": "x"},
        {"devices": 5},
        {"devices": [{"worker_ip": 5}]},
        {"devices": [{"worker_ip": ["a"]}]},
        {"devices": [{"gpu": 1}]},
        {"devices": [[]]},
        {"bogus": 1},
        {"devices": [{"worker_ip": "a"}, {"worker_ip": "b"}]},
        {"devices": [{"worker_ip": "a", "gpu_idx": [-1]}]},
        {"devices": [{"worker_ip": "a", "gpu_idx": "0"}]},
        {"devices": [{"worker_ip": "a", "n_gpu": "two"}]},
        {"devices": [{"worker_ip": "a", "n_gpu": -3}]},
        {"devices": [{"worker_ip": "x" * 301}]},
        {"replica_uid": 5, "devices": [{"worker_ip": "a"}]},
        [{"devices": [{"worker_ip": "a"}]}, {"bogus": 1}],
        {"devices": [{"worker_ip": "no-such-worker"}]},
    ],
    "bogus_field": [1, None, "x"],
}

#: Bodies JSON libraries write for non-finite floats (Python's json module reads them).
NON_FINITE = ["NaN", "Infinity", "-Infinity"]


def _ids(cases: dict[str, list[Any]]) -> list[Any]:
    return [
        pytest.param(field, value, id=f"{field}={str(value)[:40]!r}")
        for field, values in cases.items()
        for value in values
    ]


def _names(error: dict[str, Any], field: str) -> bool:
    """Whether the error's ``param`` is ``field`` or a path inside it (``replica_config.0.devices.0``)."""
    parts = str(error.get("param") or "").split(".")
    if parts[0] in ("query", "path", "body"):
        parts = parts[1:]
    return bool(parts) and parts[0] == field


def _assert_refused(response: httpx.Response, field: str) -> dict[str, Any]:
    assert response.status_code == 400, (field, response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    assert _names(error, field), (field, error)
    return error


@pytest.mark.parametrize("field,value", _ids(LAUNCH_WRONG))
def test_launch_field_refused(local_server: LocalServer, field: str, value: Any) -> None:
    body = {**LAUNCH_BASE, field: value}
    _assert_refused(httpx.post(f"{local_server.api}/models", json=body, timeout=60), field)


@pytest.mark.parametrize("field", ["keep_alive", "queue_timeout", "model_size_in_billions", "replica", "n_gpu"])
@pytest.mark.parametrize("literal", NON_FINITE)
def test_launch_non_finite_numbers_refused(local_server: LocalServer, field: str, literal: str) -> None:
    content = f'{{"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "{field}": {literal}}}'
    response = httpx.post(
        f"{local_server.api}/models", content=content, timeout=60, headers={"content-type": "application/json"}
    )
    _assert_refused(response, field)


@pytest.mark.parametrize("value", ["two", "", "[]", "2"])
def test_launch_wait_ready_refused(local_server: LocalServer, value: str) -> None:
    response = httpx.post(f"{local_server.api}/models", params={"wait_ready": value}, json=LAUNCH_BASE, timeout=60)
    _assert_refused(response, "wait_ready")


@pytest.mark.parametrize("field,value", _ids(SCALE_WRONG))
def test_scale_field_refused(local_server: LocalServer, model_uid: str, field: str, value: Any) -> None:
    response = httpx.post(f"{local_server.api}/models/{model_uid}/replicas", json={field: value}, timeout=60)
    error = _assert_refused(response, field)
    if field == "bogus_field":
        assert "replica_config" in error["message"]  # the known fields are named


def test_unknown_replica_config_key_names_the_known_ones(local_server: LocalServer, model_uid: str) -> None:
    for config, known in (
        ({"bogus": 1}, ("replica_uid", "devices")),
        ({"devices": [{"gpu": 1}]}, ("worker_ip", "n_gpu", "gpu_idx")),
    ):
        response = httpx.post(
            f"{local_server.api}/models/{model_uid}/replicas", json={"replica_config": config}, timeout=60
        )
        error = _assert_refused(response, "replica_config")
        assert all(name in error["message"] for name in known), error


@pytest.mark.parametrize("replica_id", ["abc", "1.5", "-1", str(HUGE)])
def test_remove_replica_bad_id_is_4xx(local_server: LocalServer, model_uid: str, replica_id: str) -> None:
    response = httpx.delete(f"{local_server.api}/models/{model_uid}/replicas/{replica_id}", timeout=60)
    assert 400 <= response.status_code < 500, response.text
    assert "replica_id" in str(response.json()["error"]["param"])


def test_server_still_serves_after_the_fuzz(local_server: LocalServer, model_uid: str) -> None:
    """Runs last in this module: the model kept its one replica and answers."""
    described = httpx.get(f"{local_server.api}/models/{model_uid}", timeout=30).json()
    assert described["status"] == "ready" and described["replica"] == 1, described
    listed = [m["id"] for m in httpx.get(f"{local_server.api}/models", timeout=30).json()["data"]]
    assert model_uid in listed
    reply = httpx.post(
        f"{local_server.api}/chat/completions",
        timeout=120,
        json={"model": model_uid, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4},
    )
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] is not None
