"""The Python client (xinference.client) against the session's real ``xinference-local``: Xinference's methods and
shapes (``list_models`` keyed by uid, ``get_model`` handles, the legacy chat form, errors that are RuntimeErrors
carrying the server's message) and this platform's own calls.

Generation is greedy (temperature 0) and short (max_tokens <= 16): the bundled model is tiny and runs on CPU.
A few answers the real server gives only on rare failures (an error frame after a stream started, a non-JSON
error body from a proxy) are served by ``httpx.MockTransport`` stand-ins, in the section marked as such.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator

import httpx
import pytest
import xinference_client

import xinference.client
from tests.conftest import DEFAULT_MODEL, free_port, start_local_server
from xinference.client import (
    Client,
    ClientError,
    RESTfulChatModelHandle,
    RESTfulClient,
    RESTfulGenerateModelHandle,
)
from xinference.client.restful.restful_client import RESTfulChatModelHandle as ChatHandleByXinferencePath

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."}
FRANCE = {"role": "user", "content": "What is the capital of France?"}
GREEDY = {"max_tokens": 16, "temperature": 0}


@pytest.fixture(scope="module")
def client(endpoint: str) -> Iterator[Client]:
    with Client(endpoint) as c:
        yield c


def _text(chunks: Iterator[dict]) -> str:
    return "".join(choice["delta"].get("content") or "" for c in chunks for choice in c["choices"])


# -- names and signatures ------------------------------------------------------------------------------------------
def test_exports_have_xinference_names() -> None:
    assert RESTfulClient is Client and xinference.client.AsyncRESTfulClient is xinference.client.AsyncClient
    assert ChatHandleByXinferencePath is RESTfulChatModelHandle
    assert issubclass(ClientError, RuntimeError)
    for name in xinference.client.__all__:
        assert hasattr(xinference.client, name)


def test_every_xinference_method_that_maps_onto_our_routes_has_its_signature() -> None:
    """The official client's method, parameter by parameter (names, order, defaults), for every method here."""
    official = xinference_client.RESTfulClient
    shared = [
        "list_models",
        "launch_model",
        "terminate_model",
        "describe_model",
        "get_model",
        "get_launch_model_progress",
        "cancel_launch_model",
        "get_instance_info",
        "add_model_replica",
        "terminate_model_replica",
        "register_model",
        "unregister_model",
        "list_model_registrations",
        "get_model_registration",
        "list_cached_models",
        "query_engine_by_model_name",
        "abort_request",
        "get_workers_info",
        "get_supervisor_info",
        "login",
    ]
    for name in shared:
        theirs = list(inspect.signature(getattr(official, name)).parameters.values())[1:]  # without self
        ours = list(inspect.signature(getattr(Client, name)).parameters.values())
        ours = [p for p in ours if p.name != "self"]
        assert [(p.name, p.kind) for p in ours] == [(p.name, p.kind) for p in theirs], name
        for mine, official_param in zip(ours, theirs, strict=True):
            if official_param.default is not inspect.Parameter.empty:
                assert mine.default == official_param.default, (name, mine.name)
    handles = [
        ("RESTfulChatModelHandle", "generate"),
        ("RESTfulEmbeddingModelHandle", "create_embedding"),
        ("RESTfulRerankModelHandle", "rerank"),
    ]
    from xinference_client.client.restful import restful_client as official_module

    for cls, method in handles:
        theirs = list(inspect.signature(getattr(getattr(official_module, cls), method)).parameters)[1:]
        ours = [
            p for p in inspect.signature(getattr(getattr(xinference.client, cls), method)).parameters if p != "self"
        ]
        assert ours == theirs, (cls, method)
    theirs = list(inspect.signature(official_module.RESTfulChatModelHandle.chat).parameters)[1:]
    ours = list(inspect.signature(RESTfulChatModelHandle.chat).parameters)[1:]
    assert ours[: len(theirs)] == theirs and ours[len(theirs) :] == ["prompt", "system_prompt", "chat_history"]


# -- cluster -------------------------------------------------------------------------------------------------------
def test_status_version_workers_supervisor_cluster(client: Client) -> None:
    assert client.status() == {"status": "ok"}
    assert client.get_cluster_version()["version"] == xinference.__version__
    workers = client.get_workers_info()
    assert len(workers) == 1 and workers[0]["address"] and workers[0]["hardware"]["cpu_count"] >= 1
    assert workers[0]["work-ip"] == workers[0]["address"]  # Xinference's fields
    assert {m["model_uid"] for m in workers[0]["models"].values()} >= {DEFAULT_MODEL}
    assert f"{DEFAULT_MODEL}-0" in workers[0]["models"]
    supervisor = client.get_supervisor_info()["supervisor_ip"]
    assert supervisor == httpx.get(f"{client.endpoint}/v1/address").json()
    info = client.get_cluster_info()
    assert [w["address"] for w in info["workers"]] == [w["address"] for w in workers]


def test_login_is_a_no_op_without_auth(client: Client) -> None:
    assert client.login("user", "password") is None


def test_login_on_a_keyed_server_says_to_pass_an_api_key(tmp_path) -> None:
    server = start_local_server(tmp_path, env={"XINFERENCE_API_KEYS": "key-one"})
    try:
        with Client(server.endpoint) as anonymous, pytest.raises(ClientError) as refused:
            anonymous.login("user", "password")
        assert refused.value.status_code == 401 and "api_key=" in refused.value.message
        with Client(server.endpoint) as anonymous, pytest.raises(RuntimeError) as no_key:
            anonymous.list_models()
        assert no_key.value.status_code == 401  # type: ignore[attr-defined]
        with Client(server.endpoint, api_key="key-one") as keyed:
            assert keyed.list_models() == {}
    finally:
        server.stop_and_reap()


# -- models --------------------------------------------------------------------------------------------------------
def test_list_models_is_keyed_by_uid(client: Client) -> None:
    models = client.list_models()
    ours = models[DEFAULT_MODEL]
    assert ours["id"] == ours["model_uid"] == DEFAULT_MODEL
    assert ours["model_name"] == DEFAULT_MODEL and ours["model_type"] == "LLM"
    assert "chat" in ours["model_ability"] and ours["replica"] == 1
    assert isinstance(ours["context_length"], int) and ours["context_length"] > 0
    assert ours["model_engine"] == "llama.cpp"


def test_describe_model(client: Client) -> None:
    info = client.describe_model(DEFAULT_MODEL)
    assert info["model_uid"] == DEFAULT_MODEL and "chat" in info["model_ability"]


def test_progress_of_a_ready_model_is_one(client: Client) -> None:
    assert client.get_launch_model_progress(DEFAULT_MODEL)["progress"] == 1.0


def test_instance_info(client: Client) -> None:
    [instance] = client.get_instance_info(model_name=DEFAULT_MODEL, model_uid=DEFAULT_MODEL)
    assert instance["model_uid"] == DEFAULT_MODEL and instance["status"] == "READY"
    assert instance["replica"] == 1 and [r["replica_id"] for r in instance["replica_statuses"]] == [0]
    assert client.get_instance_info(model_name="no-such-model") == []
    assert DEFAULT_MODEL in {i["model_uid"] for i in client.get_instance_info()}


def test_model_events(client: Client) -> None:
    events = client.get_model_events(DEFAULT_MODEL)
    assert events and all({"time", "event", "message"} <= set(e) for e in events)


# -- handles -------------------------------------------------------------------------------------------------------
def test_get_model_gives_a_chat_handle(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle) and isinstance(model, RESTfulGenerateModelHandle)
    assert model.model_uid == DEFAULT_MODEL
    model.close()  # Xinference's API; the connection stays the client's


def test_handle_chat(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle)
    reply = model.chat([SYSTEM, FRANCE], generate_config=GREEDY)
    assert isinstance(reply, dict) and reply["object"] == "chat.completion"
    assert "Paris" in reply["choices"][0]["message"]["content"]


def test_handle_chat_stream(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle)
    chunks = model.chat([SYSTEM, FRANCE], generate_config={**GREEDY, "stream": True})
    assert not isinstance(chunks, dict)
    chunks = list(chunks)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(isinstance(c["choices"][0]["delta"]["content"], str) for c in chunks if c["choices"])  # as Xinference
    assert "Paris" in _text(iter(chunks))


def test_handle_chat_legacy_form(client: Client) -> None:
    """Xinference's pre-1.0 form, as LlamaIndex calls it: the same conversation as the messages form."""
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle)
    history = [{"role": "system", "content": "Answer in French."}]
    legacy = model.chat(
        prompt=FRANCE["content"], system_prompt=SYSTEM["content"], chat_history=history, generate_config=GREEDY
    )
    modern = model.chat([SYSTEM, FRANCE], generate_config=GREEDY)
    assert isinstance(legacy, dict) and isinstance(modern, dict)
    assert legacy["choices"][0]["message"] == modern["choices"][0]["message"]
    assert history == [{"role": "system", "content": "Answer in French."}]  # the caller's history is not changed
    positional = model.chat(FRANCE["content"], generate_config=GREEDY)  # a string first: the prompt
    streamed = model.chat(prompt=FRANCE["content"], chat_history=None, generate_config={**GREEDY, "stream": True})
    assert isinstance(positional, dict) and not isinstance(streamed, dict)
    assert _text(streamed) == positional["choices"][0]["message"]["content"]
    with pytest.raises(ValueError, match="not both"):
        model.chat([FRANCE], prompt="Hi")


def test_handle_chat_tools_and_thinking_switch(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    reply = model.chat([FRANCE], tools=[tool], enable_thinking=False, generate_config={"max_tokens": 4})
    assert isinstance(reply, dict) and reply["object"] == "chat.completion"


def test_handle_generate(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulGenerateModelHandle)
    whole = model.generate("The capital of France is", generate_config={"max_tokens": 6, "temperature": 0})
    streamed = model.generate("The capital of France is", {"max_tokens": 6, "temperature": 0, "stream": True})
    assert isinstance(whole, dict) and whole["object"] == "text_completion"
    assert not isinstance(streamed, dict)
    assert "".join(c["choices"][0].get("text") or "" for c in streamed) == whole["choices"][0]["text"]


def test_handle_errors_are_runtime_errors_with_the_server_message(client: Client) -> None:
    model = client.get_model(DEFAULT_MODEL)
    assert isinstance(model, RESTfulChatModelHandle)
    with pytest.raises(RuntimeError, match="temperature") as info:
        model.chat([FRANCE], generate_config={"temperature": 5})
    assert isinstance(info.value, ClientError) and info.value.status_code == 400
    with pytest.raises(RuntimeError, match="temperature"):
        model.chat([FRANCE], generate_config={"temperature": 5, "stream": True})  # refused before any chunk
    with pytest.raises(RuntimeError, match="no-such-model") as unknown:
        client.get_model("no-such-model")
    assert unknown.value.status_code == 404  # type: ignore[attr-defined]


# -- registrations and engines -------------------------------------------------------------------------------------
def test_registrations(client: Client) -> None:
    names = {r["model_name"] for r in client.list_model_registrations("LLM")}
    assert DEFAULT_MODEL in names
    family = client.get_model_registration("LLM", DEFAULT_MODEL)
    assert family["model_name"] == DEFAULT_MODEL and family["is_builtin"] is True
    custom = {
        "model_name": "client-registered",
        "model_ability": ["chat"],
        "context_length": 2048,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": 1,
                "quantizations": ["Q4_K_M"],
                "model_id": "example/client-registered-GGUF",
                "model_file_name_template": "client-registered.{quantization}.gguf",
            }
        ],
    }
    client.register_model("LLM", json.dumps(custom), persist=False)
    try:
        assert client.get_model_registration("LLM", "client-registered")["is_builtin"] is False
        detailed = {r["model_name"]: r for r in client.list_model_registrations("LLM", detailed=True)}
        assert "client-registered" in detailed
        with pytest.raises(ClientError) as twice:
            client.register_model("LLM", custom, persist=False)
        assert twice.value.status_code == 409
    finally:
        client.unregister_model("LLM", "client-registered")
    with pytest.raises(ClientError) as gone:
        client.get_model_registration("LLM", "client-registered")
    assert gone.value.status_code == 404


def test_query_engine_by_model_name(client: Client) -> None:
    table = client.query_engine_by_model_name(DEFAULT_MODEL)
    assert isinstance(table["llama.cpp"], list) and table["llama.cpp"][0]["model_format"] == "ggufv2"
    assert client.query_engine_by_model_name(DEFAULT_MODEL, model_type=None)["llama.cpp"] == table["llama.cpp"]
    assert client.list_engines()["llama.cpp"]


def test_list_cached_models_filters_by_name(client: Client) -> None:
    assert client.list_cached_models(model_name="no-such-model") == []
    assert isinstance(client.list_cached_models(), list)


# -- this platform's calls by uid ----------------------------------------------------------------------------------
def test_chat_completion(client: Client) -> None:
    reply = client.chat_completion(DEFAULT_MODEL, [SYSTEM, FRANCE], **GREEDY)
    assert reply["object"] == "chat.completion" and "Paris" in reply["choices"][0]["message"]["content"]
    assert reply["usage"]["completion_tokens"] <= 16
    streamed = _text(client.chat_completion(DEFAULT_MODEL, [SYSTEM, FRANCE], stream=True, **GREEDY))
    assert streamed == reply["choices"][0]["message"]["content"]


def test_completions(client: Client) -> None:
    result = client.completions(DEFAULT_MODEL, "The capital of France is", max_tokens=8, temperature=0)
    assert result["object"] == "text_completion" and result["choices"][0]["text"]
    chunks = list(client.completions(DEFAULT_MODEL, "One, two, three,", stream=True, max_tokens=8, temperature=0))
    assert "".join(choice.get("text") or "" for c in chunks for choice in c["choices"])


def test_unknown_uid_is_a_404(client: Client) -> None:
    for call in (client.describe_model, client.terminate_model, client.get_launch_model_progress):
        with pytest.raises(ClientError) as info:
            call("no-such-model")
        assert info.value.status_code == 404 and "no-such-model" in info.value.message
    with pytest.raises(ClientError) as streamed:
        client.chat_completion("no-such-model", [FRANCE], stream=True, max_tokens=4)
    assert streamed.value.status_code == 404 and streamed.value.error_type == "not_found_error"


def test_bad_request_is_a_400_naming_the_field(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.chat_completion(DEFAULT_MODEL, [FRANCE], max_tokens=4, temperature=5)
    assert info.value.status_code == 400 and info.value.error_type == "invalid_request_error"
    assert "temperature" in info.value.message


def test_launch_with_a_bad_engine_option_is_a_400(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.launch_model(DEFAULT_MODEL, model_engine="llama.cpp", model_uid="client-bad-option", n_ctx="lots")
    assert info.value.status_code == 400 and "n_ctx" in info.value.message
    assert "client-bad-option" not in client.list_models()


def test_launch_of_a_feature_not_built_names_it(client: Client) -> None:
    with pytest.raises(ClientError) as info:
        client.launch_model(DEFAULT_MODEL, model_engine="llama.cpp", request_limits=4)
    assert info.value.status_code == 400 and "request_limits" in info.value.message


@pytest.mark.slow
def test_launch_without_waiting_replicas_and_terminate(client: Client) -> None:
    uid = client.launch_model(
        model_name=DEFAULT_MODEL, model_engine="llama.cpp", model_uid="client-replicas", n_ctx=1024, wait_ready=False
    )
    assert uid == "client-replicas"
    try:
        while client.describe_model(uid)["status"] == "launching":
            assert 0.0 <= client.get_launch_model_progress(uid)["progress"] <= 1.0
        assert client.describe_model(uid)["status"] == "ready"
        added = client.add_model_replica(uid)
        assert client.describe_model(uid)["replica"] == 2, added
        assert len(client.get_instance_info(model_uid=uid)[0]["replica_statuses"]) == 2
        assert client.terminate_model_replica(uid, 1) == 1
        assert client.list_models()[uid]["replica"] == 1
    finally:
        client.terminate_model(uid)
    assert uid not in client.list_models()


def test_connection_refused_says_what_to_do() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with Client(dead, timeout=5) as c, pytest.raises(ClientError) as info:
        c.list_models()
    assert info.value.status_code is None
    assert dead in info.value.message and "not reachable" in info.value.message
    assert "xinference-local" in info.value.message


def test_endpoint_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("XINFERENCE_ENDPOINT", endpoint + "/")
    with Client() as c:
        assert c.endpoint == c.base_url == endpoint
        assert c.status() == {"status": "ok"}


# -- stand-in answers (httpx.MockTransport), for failures the real server rarely gives ---------------------------
def _sse(*frames: object) -> bytes:
    return b"".join(b"data: " + (f if isinstance(f, bytes) else json.dumps(f).encode()) + b"\n\n" for f in frames)


def test_error_frame_mid_stream_raises_after_earlier_chunks() -> None:
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}
    error = {"error": {"message": "the stream failed: boom", "type": "engine_error", "param": None, "code": None}}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse(chunk, error, b"[DONE]"), headers={"content-type": "text/event-stream"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        stream = c.chat_completion("m", [FRANCE], stream=True)
        assert next(stream) == chunk
        with pytest.raises(ClientError) as info:
            next(stream)
    assert info.value.message == "the stream failed: boom"
    assert info.value.error_type == "engine_error" and info.value.status_code is None


def test_stream_stops_at_done_and_skips_blank_lines() -> None:
    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b": keep-alive\n\n" + _sse(chunk, b"[DONE]", chunk))

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        assert list(c.completions("m", "p", stream=True)) == [chunk]


def test_non_json_error_body_keeps_status_and_text() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="Bad Gateway from the proxy")

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c, pytest.raises(ClientError) as info:
        c.list_models()
    assert info.value.status_code == 502 and info.value.message == "Bad Gateway from the proxy"


def test_detail_only_error_body() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "Invalid credential"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c, pytest.raises(ClientError) as info:
        c.status()
    assert (info.value.status_code, info.value.message) == (401, "Invalid credential")


def test_api_key_is_sent_as_bearer_token() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"status": "ok"})

    with Client("http://stand-in", api_key="sk-test", transport=httpx.MockTransport(answer)) as c:
        c.status()
    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        c.status()
    assert seen == ["Bearer sk-test", None]


def test_launch_sends_xinference_fields_and_engine_kwargs() -> None:
    bodies: list[dict[str, object]] = []
    queries: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        queries.append(request.url.query.decode())
        return httpx.Response(200, json={"model_uid": "u1", "model_engine": "llama.cpp", "status": "ready"})

    with Client("http://stand-in", transport=httpx.MockTransport(answer)) as c:
        assert c.launch_model("smollm2-instruct", model_uid="u1", n_gpu=None, n_ctx=512) == "u1"
        assert c.launch_model("m", "embedding", model_size_in_billions=0.5, wait_ready=False) == "u1"
    assert bodies[0]["n_ctx"] == 512 and bodies[0]["n_gpu"] is None and bodies[0]["model_type"] == "LLM"
    assert "request_limits" not in bodies[0]  # unset Xinference fields are not sent
    assert bodies[1]["model_type"] == "embedding" and bodies[1]["model_size_in_billions"] == "0_5"
    assert queries == ["", "wait_ready=false"]


@pytest.mark.slow
def test_the_snippet_of_doc_client_md_runs(endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    text = (Path(__file__).parents[2] / "doc" / "client.md").read_text()
    snippet = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(snippet.replace("http://127.0.0.1:9997", endpoint), "doc/client.md", "exec"), {})  # noqa: S102
    out = capsys.readouterr().out.splitlines()
    assert "Paris" in out[0] and out[1] and int(out[2]) > 0
