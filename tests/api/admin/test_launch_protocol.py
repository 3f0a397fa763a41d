"""The launch and scaling request models on their own: strict types, ranges, replica_config's shape, and the
fields they document (no server needed; the HTTP fuzz is ``test_launch_fuzz.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from tests.api.admin.test_protocol import OFFICIAL_CLIENT_PAYLOAD
from xinference.api.admin.models.protocol import AddReplicasRequest, LaunchModelRequest
from xinference.cli.main import main
from xinference.errors import InvalidRequest, UnsupportedOption


def _refusal(model: Any, body: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    first = caught.value.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]


@pytest.mark.parametrize(
    "field,value",
    [
        ("replica", "2"),
        ("replica", 2.0),
        ("replica", True),
        ("n_worker", "1"),
        ("ignore_memory_check", "true"),
        ("ignore_memory_check", 1),
        ("autostart", "yes"),
        ("max_queued", "8"),
        ("max_queued", False),
        ("queue_timeout", "30"),
        ("queue_timeout", True),
        ("model_engine", 5),
        ("worker_ip", 10),
        ("model_uid", 7),
        ("n_gpu", True),
        ("gpu_idx", [True]),
    ],
)
def test_launch_fields_are_not_coerced(field: str, value: Any) -> None:
    loc, _ = _refusal(LaunchModelRequest, {"model_name": "m", field: value})
    assert loc == field


def test_launch_values_clients_send_are_accepted() -> None:
    launch = LaunchModelRequest.model_validate(
        {
            **OFFICIAL_CLIENT_PAYLOAD,
            "model_type": "llm",
            "queue_timeout": 30,
            "max_queued": 0,
            "keep_alive": "10m",
            "gpu_idx": [0, 1],
            "model_size_in_billions": "0_135",
            "ignore_memory_check": True,
            "n_gpu": None,
            "worker_ip": "",
        }
    ).to_launch()
    assert launch["model_type"] == "LLM" and launch["queue_timeout"] == 30.0 and launch["gpu_idx"] == [0, 1]
    assert launch["worker_ip"] is None and launch["n_gpu"] is None


def test_unknown_model_type_lists_the_known_ones() -> None:
    loc, message = _refusal(LaunchModelRequest, {"model_name": "m", "model_type": "video"})
    assert loc == "model_type" and "LLM, embedding, rerank, audio, image" in message


def test_the_openapi_document_keeps_the_declared_types() -> None:
    schema = LaunchModelRequest.model_json_schema()["properties"]
    assert {"type": "integer"} in schema["n_gpu"]["anyOf"] and {"const": "auto", "type": "string"} in schema["n_gpu"][
        "anyOf"
    ]
    assert schema["replica"]["maximum"] == 64 and schema["queue_timeout"]["anyOf"][0]["maximum"] == 86400


def test_replica_config_is_one_config_or_a_list() -> None:
    one = {"devices": [{"worker_ip": "h:1"}]}
    assert AddReplicasRequest.model_validate({"replica_config": one}).worker_ip() == "h:1"
    assert AddReplicasRequest.model_validate({"replica_config": [one]}).worker_ip() == "h:1"
    assert AddReplicasRequest.model_validate({"replica_config": None}).worker_ip() is None
    assert AddReplicasRequest.model_validate({"replica_config": {"replica_uid": None, **one}}).worker_ip() == "h:1"


@pytest.mark.parametrize(
    "config,loc,named",
    [
        ({"bogus": 1}, "replica_config.0", "replica_uid, devices"),
        ({"devices": [{"gpu": 1}]}, "replica_config.0.devices.0", "worker_ip, n_gpu, gpu_idx"),
        ({"devices": [5]}, "replica_config.0.devices.0", "ReplicaDevice"),
        ({"devices": [{"worker_ip": 5}]}, "replica_config.0.devices.0.worker_ip", "string"),
        ({"devices": [{"worker_ip": "a", "n_gpu": -3}]}, "replica_config.0.devices.0.n_gpu", "n_gpu is 'auto'"),
        (5, "replica_config", '"devices"'),
    ],
)
def test_replica_config_shape_errors_name_the_place(config: Any, loc: str, named: str) -> None:
    where, message = _refusal(AddReplicasRequest, {"replica_config": config})
    assert where == loc and named in message, (where, message)


@pytest.mark.parametrize(
    "config",
    [
        {"devices": [{"worker_ip": "a"}, {"worker_ip": "b"}]},
        {"devices": []},
        {"replica_uid": "mine", "devices": [{"worker_ip": "a"}]},
        {"devices": [{"worker_ip": "a", "gpu_idx": [0]}]},
        {"devices": [{"worker_ip": "a", "n_gpu": 1}]},
    ],
)
def test_replica_config_values_not_honoured_are_refused(config: Any) -> None:
    with pytest.raises(UnsupportedOption) as caught:
        AddReplicasRequest.model_validate({"replica_config": config}).worker_ip()
    assert caught.value.param == "replica_config"


def test_unknown_scaling_field_names_the_known_ones() -> None:
    with pytest.raises(InvalidRequest) as caught:
        AddReplicasRequest.model_validate({"replicas": 2}).worker_ip()
    assert caught.value.param == "replicas"
    assert "replica, n_gpu, model_engine, replica_config" in caught.value.message


@pytest.mark.parametrize(
    "option,value,expected",
    [
        ("--n-gpu", "5000", "from 0 to 1024"),
        ("--gpu_idx", "0,0", "lists a GPU twice"),
        ("--gpu_idx", "5000", "0 to 1023"),
    ],
)
def test_cli_applies_the_same_rules_before_calling(option: str, value: str, expected: str) -> None:
    result = CliRunner().invoke(
        main, ["launch", "-e", "http://127.0.0.1:1", "-n", "m", option, value], catch_exceptions=False
    )
    assert result.exit_code == 2 and expected in result.output, result.output
