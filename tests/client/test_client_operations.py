"""The Python client's operations calls (issue 12) against the session's real ``xinference-local``: a replica's
log, the devices, the Prometheus page, a launch with ``keep_alive``, and unloading and loading a model by hand."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import DEFAULT_MODEL, LocalServer
from xinference.client import Client, ClientError

pytestmark = pytest.mark.slow

UID = "client-operations"
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def client(endpoint: str) -> Iterator[Client]:
    with Client(endpoint) as c:
        yield c


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus page (which must parse), keyed by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)


def test_get_model_logs_tails_and_follows(client: Client, local_server: LocalServer) -> None:
    first = client.get_model_logs(DEFAULT_MODEL, tail=5)
    assert first["model_uid"] == DEFAULT_MODEL and first["replica_uid"] in first["replicas"]
    assert 0 < len(first["lines"]) <= 5 and first["offset"] <= first["size"]
    assert not any(str(local_server.home) in line for line in first["lines"])  # local paths are shortened
    by_index = client.get_model_logs(DEFAULT_MODEL, replica="0", tail=1)
    assert by_index["replica_uid"] == first["replica_uid"] and len(by_index["lines"]) == 1
    later = client.get_model_logs(DEFAULT_MODEL, since=first["offset"])
    assert later["offset"] >= first["offset"] and not later["reset"]
    with pytest.raises(ClientError) as unknown:
        client.get_model_logs("no-such-model")
    assert unknown.value.status_code == 404
    with pytest.raises(ClientError) as too_many:
        client.get_model_logs(DEFAULT_MODEL, tail=10**9)
    assert too_many.value.status_code in (400, 422) and "tail" in too_many.value.message


def test_list_devices_is_the_cluster_info_list(client: Client, endpoint: str) -> None:
    devices = client.list_devices()
    info = httpx.get(f"{endpoint}/v1/cluster/info", timeout=30).json()
    assert isinstance(devices, list)
    assert [(d["worker"], d["index"], d["name"]) for d in devices] == [
        (d["worker"], d["index"], d["name"]) for d in info["devices"]
    ]
    workers = info["workers"]
    assert len(devices) == sum(len(w["hardware"]["gpus"]) for w in workers)


def test_launch_with_keep_alive_unload_load_and_metrics(client: Client) -> None:
    with pytest.raises(ClientError) as bad:
        client.launch_model(DEFAULT_MODEL, model_engine="llama.cpp", model_uid=UID, keep_alive="soon")
    assert bad.value.status_code == 400 and "keep_alive" in bad.value.message

    assert client.launch_model(DEFAULT_MODEL, model_engine="llama.cpp", model_uid=UID, keep_alive="30m") == UID
    try:
        info = client.describe_model(UID)
        assert info["status"] == "ready" and info["keep_alive"] == "30m"
        pid = info["replicas"][0]["pid"]

        unloaded = client.unload_model(UID)
        assert unloaded["status"] == "unloaded" and unloaded["replicas"] == []
        assert client.list_models()[UID]["status"] == "unloaded"
        with pytest.raises(ClientError) as again:
            client.unload_model(UID)
        assert again.value.status_code == 400 and "unloaded" in again.value.message

        loaded = client.load_model(UID)
        assert loaded["status"] == "ready" and loaded["replicas"][0]["pid"] != pid
        assert loaded["keep_alive"] == "30m"  # the launch's options came back with it
        assert client.load_model(UID)["replicas"] == loaded["replicas"]  # a serving model is returned as it is
        assert client.chat_completion(UID, HI, max_tokens=2, temperature=0)["object"] == "chat.completion"

        page = _samples(client.get_metrics())
        labels = {"model_name": UID, "engine": "llama.cpp"}
        assert _value(page, "xinference:requests_total", route="/v1/chat/completions", outcome="success", **labels) == 1
        assert _value(page, "xinference:model_status", status="ready", **labels) == 1
        assert _value(page, "xinference:model_replicas", **labels) == 1
    finally:
        client.terminate_model(UID)
    for call in (client.unload_model, client.load_model):
        with pytest.raises(ClientError) as unknown:
            call(UID)
        assert unknown.value.status_code == 404
