"""Running a :class:`~xinference.client.calls.Call` over HTTP, synchronously (httpx.Client) or not
(httpx.AsyncClient), and the decorators that turn a call function into a client method.

Everything both transports do alike (the request's arguments, reading an error answer, reading a server-sent
event) is a plain function here; each transport only adds its own I/O. A failed call raises a
:class:`~xinference.client.errors.ClientError` with the server's message; a transport failure (no server, a
timeout) too, saying what to do.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Concatenate, ParamSpec, TypeVar, Union

import httpx

from xinference.client.calls import Call
from xinference.client.errors import ClientError, error_from_body, error_from_response

__all__ = [
    "DEFAULT_TIMEOUT",
    "AsyncTransport",
    "SyncTransport",
    "async_call",
    "async_handle_call",
    "async_handle_stream",
    "sync_call",
    "sync_handle_call",
    "sync_handle_stream",
]

#: Seconds to wait for connecting and for each read, unless the caller says otherwise.
DEFAULT_TIMEOUT = 60.0

P = ParamSpec("P")
T = TypeVar("T")
Chunk = dict[str, Any]

_DONE = "[DONE]"


def _request_args(call: Call[Any], timeout: float | None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if call.json is not None:
        args["json"] = call.json
    if call.params:
        args["params"] = dict(call.params)
    if call.data is not None:
        args["data"] = dict(call.data)
    if call.files is not None:
        args["files"] = list(call.files)
    if call.unbounded_read:
        args["timeout"] = httpx.Timeout(timeout, read=None)
    return args


def _decode(call: Call[T], response: httpx.Response) -> T:
    if call.binary:
        return call.parse(response.content)
    if call.text:
        return call.parse(response.text)
    try:
        body = response.json()
    except ValueError as exc:
        raise ClientError(
            f"the server answered {call.method} {call.path} with something that is not JSON: {response.text[:200]!r}",
            status_code=response.status_code,
        ) from exc
    return call.parse(body)


class _Skip:
    """A line of an event stream that carries no chunk (blank separators, comments, event names)."""


_SKIP = _Skip()


def _sse_line(line: str) -> Chunk | _Skip | None:
    """One line of an event stream: a chunk, nothing to yield, or None at ``[DONE]``; an error frame raises."""
    if not line.startswith("data:"):
        return _SKIP
    data = line[len("data:") :].strip()
    if data == _DONE:
        return None
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise ClientError(f"the stream sent a frame that is not JSON: {data[:200]!r}") from exc
    if isinstance(chunk, dict) and "error" in chunk:
        raise error_from_body(chunk, None, "the stream failed")
    if not isinstance(chunk, dict):
        raise ClientError(f"the stream sent a frame that is not an object: {data[:200]!r}")
    return chunk


class _Base:
    """What both transports hold: the endpoint, headers, timeout; and the translation of transport failures."""

    def __init__(self, endpoint: str, api_key: str | None, timeout: float | None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.headers: dict[str, str] = {}
        self.set_api_key(api_key)

    def set_api_key(self, api_key: str | None) -> None:
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        else:
            self.headers.pop("Authorization", None)

    @contextmanager
    def transport_errors(self) -> Iterator[None]:
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


class SyncTransport(_Base):
    """Runs calls on one ``httpx.Client`` (its connections are reused by every call and every handle)."""

    def __init__(
        self,
        endpoint: str,
        api_key: str | None,
        timeout: float | None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(endpoint, api_key, timeout)
        self.http = httpx.Client(base_url=endpoint, headers=self.headers, timeout=timeout, transport=transport)

    def set_api_key(self, api_key: str | None) -> None:
        super().set_api_key(api_key)
        if hasattr(self, "http"):
            self.http.headers = httpx.Headers(self.headers)

    def close(self) -> None:
        self.http.close()

    def run(self, call: Call[T]) -> T:
        """The call's parsed answer (a stream's chunks with :meth:`stream`)."""
        with self.transport_errors():
            response = self.http.request(call.method, call.path, **_request_args(call, self.timeout))
        if not response.is_success:
            raise error_from_response(response)
        return _decode(call, response)

    def stream(self, call: Call[Any]) -> Iterator[Chunk]:
        """Send the call now (a refused request raises here) and return an iterator of its chunks."""
        request = self.http.build_request(call.method, call.path, **_request_args(call, self.timeout))
        with self.transport_errors():
            response = self.http.send(request, stream=True)
        try:
            if not response.is_success:
                response.read()
                raise error_from_response(response)
        except BaseException:
            response.close()
            raise
        return self._chunks(response, call.each)

    def _chunks(self, response: httpx.Response, each: Callable[[Chunk], Chunk] | None) -> Iterator[Chunk]:
        try:
            with self.transport_errors():
                for line in response.iter_lines():
                    chunk = _sse_line(line)
                    if chunk is None:
                        return
                    if not isinstance(chunk, _Skip):
                        yield each(chunk) if each is not None else chunk
        finally:
            response.close()

    def run_or_stream(self, call: Call[Chunk]) -> Union[Chunk, Iterator[Chunk]]:
        return self.stream(call) if call.stream else self.run(call)

    def bytes_or_stream(self, call: Call[bytes]) -> Union[bytes, Iterator[bytes]]:
        """A binary answer (audio) whole, or as an iterator of its chunks when the call streams."""
        if not call.stream:
            return self.run(call)
        request = self.http.build_request(call.method, call.path, **_request_args(call, self.timeout))
        with self.transport_errors():
            response = self.http.send(request, stream=True)
        if not response.is_success:
            try:
                response.read()
            finally:
                response.close()
            raise error_from_response(response)
        return self._pieces(response)

    def _pieces(self, response: httpx.Response) -> Iterator[bytes]:
        try:
            with self.transport_errors():
                yield from response.iter_bytes()
        finally:
            response.close()


class AsyncTransport(_Base):
    """Runs calls on one ``httpx.AsyncClient``."""

    def __init__(
        self,
        endpoint: str,
        api_key: str | None,
        timeout: float | None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(endpoint, api_key, timeout)
        self.http = httpx.AsyncClient(base_url=endpoint, headers=self.headers, timeout=timeout, transport=transport)

    def set_api_key(self, api_key: str | None) -> None:
        super().set_api_key(api_key)
        if hasattr(self, "http"):
            self.http.headers = httpx.Headers(self.headers)

    async def close(self) -> None:
        await self.http.aclose()

    async def run(self, call: Call[T]) -> T:
        with self.transport_errors():
            response = await self.http.request(call.method, call.path, **_request_args(call, self.timeout))
        if not response.is_success:
            raise error_from_response(response)
        return _decode(call, response)

    async def stream(self, call: Call[Any]) -> AsyncIterator[Chunk]:
        request = self.http.build_request(call.method, call.path, **_request_args(call, self.timeout))
        with self.transport_errors():
            response = await self.http.send(request, stream=True)
        try:
            if not response.is_success:
                await response.aread()
                raise error_from_response(response)
        except BaseException:
            await response.aclose()
            raise
        return self._chunks(response, call.each)

    async def _chunks(self, response: httpx.Response, each: Callable[[Chunk], Chunk] | None) -> AsyncIterator[Chunk]:
        try:
            with self.transport_errors():
                async for line in response.aiter_lines():
                    chunk = _sse_line(line)
                    if chunk is None:
                        return
                    if not isinstance(chunk, _Skip):
                        yield each(chunk) if each is not None else chunk
        finally:
            await response.aclose()

    async def run_or_stream(self, call: Call[Chunk]) -> Union[Chunk, AsyncIterator[Chunk]]:
        if call.stream:
            return await self.stream(call)
        result: Chunk = await self.run(call)
        return result

    async def bytes_or_stream(self, call: Call[bytes]) -> Union[bytes, AsyncIterator[bytes]]:
        """The asynchronous twin of :meth:`SyncTransport.bytes_or_stream`."""
        if not call.stream:
            return await self.run(call)
        request = self.http.build_request(call.method, call.path, **_request_args(call, self.timeout))
        with self.transport_errors():
            response = await self.http.send(request, stream=True)
        if not response.is_success:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise error_from_response(response)
        return self._pieces(response)

    async def _pieces(self, response: httpx.Response) -> AsyncIterator[bytes]:
        try:
            with self.transport_errors():
                async for piece in response.aiter_bytes():
                    yield piece
        finally:
            await response.aclose()


# -- call functions as methods -----------------------------------------------------------------------------------------
def _as_method(method: Callable[..., Any], spec: Callable[..., Any], takes_uid: bool) -> None:
    """Give ``method`` (a wrapper of ``spec``) the signature it has on its class: ``self`` first (in place of the
    model uid for a handle's method), without the ``Call`` return type, so that ``help()`` and ``inspect`` show
    the method's real parameters, also on a bound method."""
    signature = inspect.signature(spec)
    parameters = list(signature.parameters.values())[1 if takes_uid else 0 :]
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *parameters], return_annotation=inspect.Signature.empty
    )


class HasSync:
    """A sync client or handle: it has a transport (and, for a handle, a model uid)."""

    _transport: SyncTransport
    _model_uid: str


class HasAsync:
    _transport: AsyncTransport
    _model_uid: str


def sync_call(spec: Callable[P, Call[T]]) -> Callable[Concatenate[HasSync, P], T]:
    """A client method that runs ``spec``'s call and returns its answer (``spec``'s signature and docstring)."""

    @functools.wraps(spec)
    def method(self: HasSync, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._transport.run(spec(*args, **kwargs))

    _as_method(method, spec, takes_uid=False)
    return method


def async_call(spec: Callable[P, Call[T]]) -> Callable[Concatenate[HasAsync, P], Awaitable[T]]:
    """The asynchronous twin of :func:`sync_call`."""

    @functools.wraps(spec)
    async def method(self: HasAsync, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._transport.run(spec(*args, **kwargs))

    _as_method(method, spec, takes_uid=False)
    return method


def sync_handle_call(spec: Callable[Concatenate[str, P], Call[T]]) -> Callable[Concatenate[HasSync, P], T]:
    """A handle method: ``spec`` gets the handle's model uid first."""

    @functools.wraps(spec)
    def method(self: HasSync, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._transport.run(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method


def async_handle_call(
    spec: Callable[Concatenate[str, P], Call[T]],
) -> Callable[Concatenate[HasAsync, P], Awaitable[T]]:
    """The asynchronous twin of :func:`sync_handle_call`."""

    @functools.wraps(spec)
    async def method(self: HasAsync, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._transport.run(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method


def sync_handle_stream(
    spec: Callable[Concatenate[str, P], Call[Chunk]],
) -> Callable[Concatenate[HasSync, P], Union[Chunk, Iterator[Chunk]]]:
    """A handle method whose call may stream (``generate_config["stream"]``): then it returns the chunks."""

    @functools.wraps(spec)
    def method(self: HasSync, /, *args: P.args, **kwargs: P.kwargs) -> Union[Chunk, Iterator[Chunk]]:
        return self._transport.run_or_stream(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method


def async_handle_stream(
    spec: Callable[Concatenate[str, P], Call[Chunk]],
) -> Callable[Concatenate[HasAsync, P], Awaitable[Union[Chunk, AsyncIterator[Chunk]]]]:
    """The asynchronous twin of :func:`sync_handle_stream` (a stream is an async iterator)."""

    @functools.wraps(spec)
    async def method(self: HasAsync, /, *args: P.args, **kwargs: P.kwargs) -> Union[Chunk, AsyncIterator[Chunk]]:
        return await self._transport.run_or_stream(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method


def sync_handle_bytes(
    spec: Callable[Concatenate[str, P], Call[bytes]],
) -> Callable[Concatenate[HasSync, P], Union[bytes, Iterator[bytes]]]:
    """A handle method answering bytes (audio), or an iterator of byte chunks when its call streams."""

    @functools.wraps(spec)
    def method(self: HasSync, /, *args: P.args, **kwargs: P.kwargs) -> Union[bytes, Iterator[bytes]]:
        return self._transport.bytes_or_stream(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method


def async_handle_bytes(
    spec: Callable[Concatenate[str, P], Call[bytes]],
) -> Callable[Concatenate[HasAsync, P], Awaitable[Union[bytes, AsyncIterator[bytes]]]]:
    """The asynchronous twin of :func:`sync_handle_bytes`."""

    @functools.wraps(spec)
    async def method(self: HasAsync, /, *args: P.args, **kwargs: P.kwargs) -> Union[bytes, AsyncIterator[bytes]]:
        return await self._transport.bytes_or_stream(spec(self._model_uid, *args, **kwargs))

    _as_method(method, spec, takes_uid=True)
    return method
