"""Every client mistake gets a clear 4xx in the error envelope; the server keeps serving afterwards."""

from __future__ import annotations

import os
import sys

import httpx
import pytest


@pytest.fixture(scope="module")
def http(local_server) -> httpx.Client:
    with httpx.Client(base_url=local_server.endpoint, timeout=120) as client:
        yield client


def assert_error(response: httpx.Response, status: int, *needles: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    error = body["error"]
    assert set(error) >= {"message", "type", "code", "param"}
    assert body["detail"] == error["message"]
    for needle in needles:
        assert needle in error["message"], error["message"]
    text = response.text
    assert "Traceback" not in text
    for private in {sys.prefix, os.path.expanduser("~"), "site-packages"}:
        assert private not in text
    return error


def chat(http: httpx.Client, **body) -> httpx.Response:
    return http.post("/v1/chat/completions", json=body)


def test_invalid_json(http: httpx.Client) -> None:
    response = http.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(response, 400, "not valid JSON")


def test_missing_field(http: httpx.Client, model_uid: str) -> None:
    error = assert_error(chat(http, model=model_uid), 400, "messages")
    assert error["param"] == "messages"


def test_ill_typed_field(http: httpx.Client, model_uid: str) -> None:
    error = assert_error(chat(http, model=model_uid, messages="hello"), 400, "messages")
    assert error["type"] == "invalid_request_error"
    assert_error(chat(http, model=model_uid, messages=[{"role": "wizard", "content": "x"}]), 400, "role")
    assert_error(
        chat(http, model=model_uid, messages=[{"role": "user", "content": "x"}], temperature="hot"), 400, "temperature"
    )


def test_negative_max_tokens(http: httpx.Client, model_uid: str) -> None:
    error = assert_error(
        chat(http, model=model_uid, messages=[{"role": "user", "content": "x"}], max_tokens=-5), 400, "max_tokens"
    )
    assert error["param"] == "max_tokens"


def test_unsupported_n(http: httpx.Client, model_uid: str) -> None:
    assert_error(chat(http, model=model_uid, messages=[{"role": "user", "content": "x"}], n=3), 400, "n > 1")


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("POST", "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
        (
            "POST",
            "/v1/chat/completions",
            {"model": "nope", "messages": [{"role": "user", "content": "x"}], "stream": True},
        ),
        ("POST", "/v1/completions", {"model": "nope", "prompt": "x"}),
        ("GET", "/v1/models/nope", None),
        ("DELETE", "/v1/models/nope", None),
    ],
)
def test_unknown_model_is_404_everywhere(http: httpx.Client, method: str, path: str, body: dict | None) -> None:
    error = assert_error(http.request(method, path, json=body), 404, "nope")
    assert error["type"] == "not_found_error"


def test_unknown_route_is_404_envelope(http: httpx.Client) -> None:
    assert_error(http.get("/v1/nothing-here"), 404, "/v1/nothing-here")


def test_prompt_longer_than_context_names_both_lengths(http: httpx.Client, model_uid: str) -> None:
    long_prompt = "hello " * 9000
    for stream in (False, True):
        response = chat(
            http, model=model_uid, messages=[{"role": "user", "content": long_prompt}], max_tokens=4, stream=stream
        )
        error = assert_error(response, 400, "8192")
        assert error["code"] == "context_length_exceeded"
        assert any(str(n) in error["message"] for n in range(9000, 9100))


def test_duplicate_uid_is_409(http: httpx.Client, model_uid: str) -> None:
    response = http.post("/v1/models", json={"model_name": "smollm2-instruct", "model_engine": "llama.cpp"})
    error = assert_error(response, 409, model_uid)
    assert error["code"] == "model_already_exists"


@pytest.mark.parametrize(
    "body,status,needle",
    [
        ({"model_name": "no-such-model", "model_engine": "llama.cpp"}, 404, "no-such-model"),
        ({"model_name": "smollm2-instruct", "model_engine": "warp-drive"}, 400, "unknown engine"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_uid": "../etc"}, 400, "model_uid"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_uid": "x\u0000y"}, 400, "model_uid"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_uid": "a" * 300}, 400, "model_uid"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_format": "awq"}, 400, "ships as"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "quantization": "IQ1_S"}, 400, "Q4_1"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_ctx": "lots"}, 400, "n_ctx"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_ctxx": 10}, 400, "n_ctxx"),
        (
            {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "peft_model_config": {"lora_list": []}},
            400,
            "peft_model_config",
        ),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "worker_ip": "10.0.0.1"}, 400, "no worker at"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "n_gpu": 2}, 400, "n_gpu"),
        ({"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "replica": 0}, 400, "replica"),
        ({"model_engine": "llama.cpp"}, 400, "model_name"),
    ],
)
def test_bad_launches(http: httpx.Client, body: dict, status: int, needle: str) -> None:
    assert_error(http.post("/v1/models", json=body), status, needle)


def test_pytorch_spec_rejected_by_llama_cpp_with_reason(http: httpx.Client) -> None:
    body = {"model_name": "smollm2-instruct", "model_engine": "llama.cpp", "model_format": "pytorch"}
    error = assert_error(http.post("/v1/models", json=body), 400, "llama.cpp only runs ggufv2")
    assert error["code"] == "engine_rejected"


def test_launch_failure_names_engine_cause(http: httpx.Client) -> None:
    body = {
        "model_name": "smollm2-instruct",
        "model_engine": "llama.cpp",
        "model_uid": "bad-cache",
        "cache_type_v": "q4_0",
        "flash_attn": "off",
    }
    response = http.post("/v1/models", json=body)
    error = assert_error(response, 500, "llama.cpp could not load bad-cache", "flash_attn")
    assert error["type"] == "launch_error"
    assert "bad-cache" not in [m["id"] for m in http.get("/v1/models").json()["data"]]


def test_server_still_serves_after_errors(http: httpx.Client, model_uid: str) -> None:
    response = chat(http, model=model_uid, messages=[{"role": "user", "content": "Say hi"}], max_tokens=4)
    assert response.status_code == 200
    assert response.json()["usage"]["completion_tokens"] > 0
