"""Request models: conversion to engine parameters and the launch payload rules (no server needed)."""

from __future__ import annotations

import pytest

from xinference.api.admin.models.protocol import LaunchModelRequest
from xinference.api.openai.chat.protocol import ChatCompletionRequest, CompletionRequest
from xinference.api.sse import DONE_FRAME, encode_frames
from xinference.errors import UnsupportedOption
from xinference.logtail import scrub_paths

OFFICIAL_CLIENT_PAYLOAD = {
    "model_uid": None,
    "model_name": "smollm2-instruct",
    "model_engine": "llama.cpp",
    "peft_model_config": None,
    "model_type": "LLM",
    "model_size_in_billions": None,
    "model_format": None,
    "quantization": None,
    "replica": 1,
    "n_worker": 1,
    "n_gpu": "auto",
    "request_limits": None,
    "worker_ip": None,
    "gpu_idx": None,
    "replica_config": None,
    "model_path": None,
    "enable_thinking": None,
    "enable_virtual_env": None,
    "virtual_env_packages": None,
    "virtual_env_find_links": None,
    "envs": None,
}


def test_chat_params() -> None:
    request = ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "max_completion_tokens": 7,
            "stop": "x",
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0,
            "some_future_field": 1,
        }
    )
    params = request.to_engine_params()
    assert params["max_tokens"] == 7 and params["stop"] == ["x"] and params["temperature"] == 0
    assert params["stream_options"] == {"include_usage": True}
    assert params["messages"] == [{"role": "user", "content": "hi"}]
    assert "some_future_field" not in params and "model" not in params


def test_completion_prompt_list_of_one() -> None:
    assert CompletionRequest.model_validate({"model": "m", "prompt": ["x"]}).to_engine_params()["prompt"] == "x"
    with pytest.raises(ValueError):
        CompletionRequest.model_validate({"model": "m", "prompt": ["x", "y"]})
    with pytest.raises(UnsupportedOption):
        CompletionRequest.model_validate({"model": "m", "prompt": "x", "echo": True}).to_engine_params()


def test_official_client_payload_is_accepted() -> None:
    launch = LaunchModelRequest.model_validate({**OFFICIAL_CLIENT_PAYLOAD, "n_ctx": 2048}).to_launch()
    assert launch["engine_kwargs"] == {"n_ctx": 2048}
    assert launch["n_gpu"] == "auto" and launch["replica"] == 1


@pytest.mark.parametrize(
    "field,value",
    [
        ("peft_model_config", {"lora_list": [1]}),
        ("request_limits", 4),
        ("envs", {"A": "1"}),
        ("replica_config", [{}]),
        ("enable_virtual_env", True),
    ],
)
def test_unsupported_launch_fields_named(field: str, value: object) -> None:
    with pytest.raises(UnsupportedOption, match=field):
        LaunchModelRequest.model_validate({**OFFICIAL_CLIENT_PAYLOAD, field: value}).to_launch()


def test_sse_frames() -> None:
    assert encode_frames([{"a": "é"}, {"b": 1}]) == 'data: {"a":"é"}\n\ndata: {"b":1}\n\n'.encode()
    assert DONE_FRAME == b"data: [DONE]\n\n"


def test_scrub_paths_keeps_only_file_names() -> None:
    text = "loading model '/root/.venv/lib/python3.11/site-packages/pkg/model.gguf' from /tmp/x/"
    assert scrub_paths(text) == "loading model '.../model.gguf' from .../x"


def test_placement_fields_that_are_refused_name_themselves() -> None:
    from xinference.api.admin.models.protocol import AddReplicasRequest
    from xinference.api.admin.registrations import RegisterModelRequest
    from xinference.errors import InvalidRequest

    with pytest.raises(UnsupportedOption, match="n_worker") as caught:
        LaunchModelRequest.model_validate({**OFFICIAL_CLIENT_PAYLOAD, "n_worker": 2}).to_launch()
    assert caught.value.param == "n_worker"
    with pytest.raises(UnsupportedOption) as caught:
        AddReplicasRequest(model_engine="vLLM").worker_ip()
    assert caught.value.param == "model_engine"
    with pytest.raises(UnsupportedOption) as caught:
        AddReplicasRequest(replica_config={"devices": [{"worker_ip": "a"}, {"worker_ip": "b"}]}).worker_ip()
    assert caught.value.param == "replica_config"
    assert AddReplicasRequest(replica_config={"devices": [{"worker_ip": "h:1"}]}).worker_ip() == "h:1"
    with pytest.raises(InvalidRequest) as caught:
        RegisterModelRequest(model="{}", worker_ip="10.0.0.1").family()
    assert caught.value.param == "worker_ip"
