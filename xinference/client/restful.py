"""A small synchronous client for Xinference's REST API, on httpx.

Use it when a script or the ``xinference`` CLI needs to launch, list, call or stop models::

    from xinference.client import Client

    with Client("http://127.0.0.1:9997") as client:
        uid = client.launch_model("smollm2-instruct", model_engine="llama.cpp")
        reply = client.chat(uid, [{"role": "user", "content": "Hi"}], max_tokens=16)
        print(reply["choices"][0]["message"]["content"])
        client.terminate_model(uid)

Every failure (an error answer from the server, an error frame in a stream, an unreachable server, a timeout)
is raised as one :class:`ClientError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Literal, Union, overload

import httpx

from xinference import settings

__all__ = ["DEFAULT_TIMEOUT", "Client", "ClientError", "Message", "NGpu"]

#: Seconds to wait for connecting and for each read, unless the caller says otherwise.
DEFAULT_TIMEOUT = 60.0

#: One chat message, OpenAI style: ``{"role": "user", "content": "Hi"}``.
Message = Mapping[str, Any]
#: How many GPUs a model gets: ``"auto"``, ``None`` (CPU only) or a count.
NGpu = Union[int, Literal["auto"], None]

_DONE = "[DONE]"


class ClientError(Exception):
    """Raised for every failure of a client call: an error answer, an error frame, or no answer at all.

    ``status_code`` is the HTTP status when the server answered (``None`` for connection failures, timeouts and
    errors sent inside a stream); ``error_type``, ``param`` and ``code`` come from the server's error envelope.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        param: str | None = None,
        code: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.error_type = error_type
        self.param = param
        self.code = code

    def __str__(self) -> str:
        return self.message


def _error_from_envelope(body: Any, status_code: int | None, fallback: str) -> ClientError:
    """Read ``{"error": {...}, "detail": ...}`` (or any lesser shape) into a ClientError."""
    error: dict[str, Any] = {}
    message: str | None = None
    if isinstance(body, dict):
        raw = body.get("error")
        if isinstance(raw, dict):
            error = raw
            message = raw.get("message")
        elif isinstance(raw, str):
            message = raw
        detail = body.get("detail")
        if not message and detail:
            message = detail if isinstance(detail, str) else json.dumps(detail)
    elif isinstance(body, str) and body.strip():
        message = body.strip()
    return ClientError(
        str(message or fallback),
        status_code=status_code,
        error_type=error.get("type"),
        param=error.get("param"),
        code=error.get("code"),
    )


def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    response.read()
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    fallback = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    raise _error_from_envelope(body, response.status_code, fallback)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise ClientError(
            f"the server answered {response.request.method} {response.request.url.path} with something that is "
            f"not JSON: {response.text[:200]!r}",
            status_code=response.status_code,
        ) from exc


class Client:
    """A connection to one Xinference endpoint; close it (or use it as a context manager) when done.

    ``endpoint`` defaults to ``XINFERENCE_ENDPOINT`` (or http://127.0.0.1:9997); ``api_key`` is sent as a
    bearer token when the server was started with ``XINFERENCE_API_KEYS``. ``timeout`` bounds connecting and each
    read; launching waits for the model without a read limit, since weights may have to be downloaded first.
    ``transport`` replaces httpx's network transport (``httpx.MockTransport`` in tests, a Unix-socket transport,
    ...); the client closes it when it is closed.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = (endpoint or settings.endpoint()).rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._http = httpx.Client(base_url=self.endpoint, headers=headers, timeout=timeout, transport=transport)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- cluster ---------------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The server's health answer (``{"status": "ok"}``)."""
        result: dict[str, Any] = self._request("GET", "/status")
        return result

    # -- models ----------------------------------------------------------------------------------------------

    def launch_model(
        self,
        model_name: str,
        model_engine: str | None = None,
        model_uid: str | None = None,
        model_type: str = "LLM",
        model_format: str | None = None,
        model_size_in_billions: int | float | str | None = None,
        quantization: str | None = None,
        replica: int = 1,
        n_gpu: NGpu = "auto",
        **engine_kwargs: Any,
    ) -> str:
        """Launch a model, wait until it is ready, and return its uid.

        ``engine_kwargs`` are the engine's own launch options (``n_ctx=4096``); the engine validates them.
        """
        payload: dict[str, Any] = {
            "model_name": model_name,
            "model_engine": model_engine,
            "model_uid": model_uid,
            "model_type": model_type,
            "model_format": model_format,
            "model_size_in_billions": model_size_in_billions,
            "quantization": quantization,
            "replica": replica,
            "n_gpu": n_gpu,
            **engine_kwargs,
        }
        timeout = httpx.Timeout(self._timeout, read=None)
        result = self._request("POST", "/v1/models", json=payload, timeout=timeout)
        return str(result["model_uid"])

    def list_models(self) -> list[dict[str, Any]]:
        """Every running model, as the server describes it (uid, type, name, engine, format, size, ...)."""
        body = self._request("GET", "/v1/models")
        data: list[dict[str, Any]] = body.get("data", []) if isinstance(body, dict) else body
        return data

    def describe_model(self, model_uid: str) -> dict[str, Any]:
        """One running model's description; a ClientError with status 404 when there is no such uid."""
        result: dict[str, Any] = self._request("GET", f"/v1/models/{model_uid}")
        return result

    def terminate_model(self, model_uid: str) -> None:
        """Stop every replica of a model; a ClientError with status 404 when there is no such uid."""
        self._request("DELETE", f"/v1/models/{model_uid}")

    def get_launch_model_progress(self, model_uid: str) -> dict[str, Any]:
        """``{"progress": 0.0-1.0}`` of a model being launched (its weights' download); 1.0 once ready."""
        result: dict[str, Any] = self._request("GET", f"/v1/models/{model_uid}/progress")
        return result

    def cancel_launch_model(self, model_uid: str) -> None:
        """Stop a launch in progress; the pending ``launch_model`` call then fails with "... was cancelled"."""
        self._request("POST", f"/v1/models/{model_uid}/cancel")

    # -- model cache -----------------------------------------------------------------------------------------
    def list_cached_models(self, model_name: str | None = None, worker_ip: str | None = None) -> list[dict[str, Any]]:
        """Downloaded weights on the workers: one entry per repository revision (id, hub, repo, files, size)."""
        params = {k: v for k, v in {"model_name": model_name, "worker_ip": worker_ip}.items() if v is not None}
        body = self._request("GET", "/v1/cache/models", params=params)
        entries: list[dict[str, Any]] = body.get("list", []) if isinstance(body, dict) else body
        return entries

    def remove_cached_model(
        self, entry: str | None = None, model_name: str | None = None, worker_ip: str | None = None
    ) -> list[dict[str, Any]]:
        """Delete one cache entry (by id) or every entry of ``model_name``; returns what was removed."""
        params = {
            k: v for k, v in {"entry": entry, "model_name": model_name, "worker_ip": worker_ip}.items() if v is not None
        }
        body = self._request("DELETE", "/v1/cache/models", params=params)
        removed: list[dict[str, Any]] = body.get("removed", [])
        return removed

    # -- generation ------------------------------------------------------------------------------------------

    # -- registrations ------------------------------------------------------------------------------------------
    def register_model(self, model_type: str, model: dict[str, Any] | str, persist: bool = False) -> None:
        """Register a custom model family (a dict, or its JSON text)."""
        text = model if isinstance(model, str) else json.dumps(model)
        self._request("POST", f"/v1/model_registrations/{model_type}", json={"model": text, "persist": persist})

    def unregister_model(self, model_type: str, model_name: str) -> None:
        self._request("DELETE", f"/v1/model_registrations/{model_type}/{model_name}")

    def list_model_registrations(self, model_type: str, detailed: bool = False) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request(
            "GET", f"/v1/model_registrations/{model_type}", params={"detailed": str(detailed).lower()}
        )
        return result

    def get_model_registration(self, model_type: str, model_name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/model_registrations/{model_type}/{model_name}")
        return result

    # -- engines ------------------------------------------------------------------------------------------------
    def query_engines(self, model_name: str, model_type: str | None = "LLM") -> dict[str, Any]:
        """Every engine's verdict on a model over the cluster: ``{engine: [accepted params...] | "reason"}``."""
        path = f"/v1/engines/{model_type}/{model_name}" if model_type else f"/v1/engines/{model_name}"
        result: dict[str, Any] = self._request("GET", path)
        return result

    def list_engines(self) -> dict[str, dict[str, str]]:
        """Every engine's availability per worker: ``{engine: {worker: "" | "why not"}}``."""
        result: dict[str, dict[str, str]] = self._request("GET", "/v1/engines")
        return result

    def install_engine(
        self, engine: str, worker_ip: str | None = None, force: bool = False, wait: bool = False
    ) -> dict[str, Any]:
        """Start installing ``engine``'s environment on the workers (``wait``: return when it has ended)."""
        body = {"worker_ip": worker_ip, "force": force, "wait": wait}
        result: dict[str, Any] = self._request("POST", f"/v1/engines/{engine}/install", json=body)
        return result

    def engine_install_status(self, engine: str, worker_ip: str | None = None) -> dict[str, Any]:
        params = {"worker_ip": worker_ip} if worker_ip else None
        result: dict[str, Any] = self._request("GET", f"/v1/engines/{engine}/install", params=params)
        return result

    def uninstall_engine(self, engine: str, worker_ip: str | None = None) -> dict[str, Any]:
        params = {"worker_ip": worker_ip} if worker_ip else None
        result: dict[str, Any] = self._request("POST", f"/v1/engines/{engine}/uninstall", params=params)
        return result

    # -- operations: a replica's log, unload/load by hand, launch history, devices, metrics ----------------
    def get_model_logs(
        self, model_uid: str, replica: str | None = None, tail: int = 200, since: int | None = None
    ) -> dict[str, Any]:
        """A bounded piece of a replica's log (``lines``, ``offset`` to pass back as ``since`` to follow it)."""
        params: dict[str, Any] = {"tail": tail}
        if replica is not None:
            params["replica"] = replica
        if since is not None:
            params["since"] = since
        result: dict[str, Any] = self._request("GET", f"/v1/models/{model_uid}/logs", params=params)
        return result

    def unload_model(self, model_uid: str) -> dict[str, Any]:
        """End a model's processes now; it stays listed as ``unloaded`` and loads again on its next request."""
        result: dict[str, Any] = self._request("POST", f"/v1/models/{model_uid}/unload")
        return result

    def load_model(self, model_uid: str) -> dict[str, Any]:
        """Load an unloaded model again; returns once it serves."""
        timeout = httpx.Timeout(self._timeout, read=None)
        result: dict[str, Any] = self._request("POST", f"/v1/models/{model_uid}/load", timeout=timeout)
        return result

    def get_launch_history(self) -> list[dict[str, Any]]:
        """Launches that reached ready, newest first, with their request and whether they autostart."""
        result: list[dict[str, Any]] = self._request("GET", "/v1/launch_history")
        return result

    def list_devices(self) -> list[dict[str, Any]]:
        """Every worker's GPUs: index, name, memory total/used and the replicas holding each."""
        result: list[dict[str, Any]] = self._request("GET", "/v1/cluster/devices")
        return result

    def get_metrics(self) -> str:
        """The Prometheus text of ``GET /metrics``."""
        with self._transport_errors():
            response = self._http.get("/metrics")
        _raise_for_status(response)
        return response.text

    @overload
    def chat(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    def chat(
        self, model_uid: str, messages: Sequence[Message], stream: Literal[True], **params: Any
    ) -> Iterator[dict[str, Any]]: ...

    def chat(
        self, model_uid: str, messages: Sequence[Message], stream: bool = False, **params: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """A chat completion: the response dict, or (``stream=True``) an iterator of chunk dicts.

        ``params`` are OpenAI sampling fields (``max_tokens``, ``temperature``, ...). A bad request raises here,
        before any chunk; a failure after the stream started raises from the iterator.
        """
        payload = {**params, "model": model_uid, "messages": [dict(m) for m in messages], "stream": stream}
        return self._generate("/v1/chat/completions", payload, stream)

    @overload
    def completions(
        self, model_uid: str, prompt: str, stream: Literal[False] = False, **params: Any
    ) -> dict[str, Any]: ...

    @overload
    def completions(
        self, model_uid: str, prompt: str, stream: Literal[True], **params: Any
    ) -> Iterator[dict[str, Any]]: ...

    def completions(
        self, model_uid: str, prompt: str, stream: bool = False, **params: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """A text completion of ``prompt``: the response dict, or an iterator of chunk dicts when streaming."""
        payload = {**params, "model": model_uid, "prompt": prompt, "stream": stream}
        return self._generate("/v1/completions", payload, stream)

    # -- plumbing --------------------------------------------------------------------------------------------

    def embeddings(
        self, model_uid: str, input: str | list[str] | list[int] | list[list[int]], **params: Any
    ) -> dict[str, Any]:
        """``POST /v1/embeddings`` (OpenAI shape: ``data[i].embedding``, ``usage``)."""
        result: dict[str, Any] = self._request(
            "POST", "/v1/embeddings", json={"model": model_uid, "input": input, **params}
        )
        return result

    def rerank(
        self,
        model_uid: str,
        query: str,
        documents: list[str],
        top_n: int | None = None,
        return_documents: bool = False,
        **params: Any,
    ) -> dict[str, Any]:
        """``POST /v1/rerank``: documents ordered by relevance to ``query`` (``results[i].relevance_score``)."""
        body = {
            "model": model_uid,
            "query": query,
            "documents": documents,
            "return_documents": return_documents,
            **params,
        }
        if top_n is not None:
            body["top_n"] = top_n
        result: dict[str, Any] = self._request("POST", "/v1/rerank", json=body)
        return result

    def _generate(self, path: str, payload: dict[str, Any], stream: bool) -> dict[str, Any] | Iterator[dict[str, Any]]:
        if not stream:
            result: dict[str, Any] = self._request("POST", path, json=payload)
            return result
        with self._transport_errors():
            response = self._http.send(self._http.build_request("POST", path, json=payload), stream=True)
        try:
            _raise_for_status(response)
        except BaseException:
            response.close()
            raise
        return self._iter_chunks(response)

    def _iter_chunks(self, response: httpx.Response) -> Iterator[dict[str, Any]]:
        """The JSON chunks of an SSE body, up to ``[DONE]``; an error frame is raised as a ClientError."""
        try:
            with self._transport_errors():
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments, event names
                    data = line[len("data:") :].strip()
                    if data == _DONE:
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise ClientError(f"the stream sent a frame that is not JSON: {data[:200]!r}") from exc
                    if isinstance(chunk, dict) and "error" in chunk:
                        raise _error_from_envelope(chunk, None, "the stream failed")
                    yield chunk
        finally:
            response.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        with self._transport_errors():
            response = self._http.request(method, path, **kwargs)
        _raise_for_status(response)
        return _json(response)

    @contextmanager
    def _transport_errors(self) -> Iterator[None]:
        """Turn httpx's transport failures into ClientErrors that say what to do."""
        try:
            yield
        except httpx.ConnectError as exc:
            raise ClientError(
                f"the Xinference server at {self.endpoint} is not reachable ({exc}); start one with "
                f"`xinference-local`, or point XINFERENCE_ENDPOINT / --endpoint at a running server",
                error_type="connection_error",
            ) from exc
        except httpx.TimeoutException as exc:
            raise ClientError(
                f"the Xinference server at {self.endpoint} did not answer in time ({type(exc).__name__})",
                error_type="timeout",
            ) from exc
        except httpx.TransportError as exc:
            raise ClientError(
                f"the connection to the Xinference server at {self.endpoint} failed: {exc}",
                error_type="connection_error",
            ) from exc
