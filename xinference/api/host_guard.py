"""Refuse requests whose ``Host`` header names a host this server does not answer to (DNS rebinding).

Why: a web page on ``evil.example`` can make its own name re-resolve to 127.0.0.1. The browser then sends the page's
requests to the local server and treats the answers as same-origin, so the page could read them and register models,
launch one with ``trust_remote_code``, install engines or read logs, API keys or not (the browser would send no key,
but a server without keys needs none). The only trace of the trick is the ``Host`` header: it still says
``evil.example``. Every request, on every route (the API, ``/ui``, ``/metrics``, the docs), is checked before
anything else runs, and a foreign name gets a 403 in the API's error shape.

Allowed names (the port is ignored, IPv6 literals come in brackets):

- ``localhost`` and any IP literal. An IP literal cannot be a rebinding: the browser sends the name of the URL it
  opened, so a page's requests carry an IP only when the page's own origin is that IP. This covers 127.x.y.z,
  ``[::1]``, the machine's interface addresses (a worker joining through the LAN IP) and an address that NAT or a
  container's port mapping puts in front of the server.
- the name the server is bound to (``--host``), when it is a name;
- the machine's own host names (``socket.gethostname()`` and its fully qualified name), so ``http://gpu-box:9997``
  keeps working when the server listens on every interface (``0.0.0.0`` or ``::``);
- ``XINFERENCE_ALLOWED_HOSTS``: comma-separated names; ``.example.com`` allows example.com and every subdomain;
  ``*`` allows any name (unsafe: turns the protection off).

A request without a ``Host`` header (HTTP/1.0) is allowed: a browser always sends one.

Cross-site requests: a browser sends ``Origin`` with every POST, PUT, PATCH and DELETE. Such a request from a page
that is not this server's own (another origin, or ``null``) gets a 403 too, unless the page's name is listed in
``XINFERENCE_ALLOWED_HOSTS``: a page elsewhere must not launch models, register them or install engines on a local
server, even blind. Programs (the SDKs, curl, the CLI) send no ``Origin`` and are not affected.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

from xinference.api.errors import anthropic_error_body, error_body, uses_anthropic_shape

__all__ = ["HostGuardMiddleware", "HostPolicy", "host_name", "machine_names"]

logger = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

#: Addresses that mean "every interface": binding there says nothing about the names clients use.
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
#: Methods a page elsewhere may send (they change nothing); other methods carrying a foreign ``Origin`` are refused.
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: How many distinct refused names are logged (clients choose them, so the set must stay bounded).
_LOGGED_LIMIT = 64


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _normalize(name: str) -> str:
    """Lower case, without the trailing dot of a fully qualified name (``localhost.`` is ``localhost``)."""
    return name.strip().lower().rstrip(".")


def host_name(header: str) -> str | None:
    """The name part of a ``Host`` header value: lower case, no port, no brackets, no trailing dot.

    ``None`` when the value is malformed (an unclosed bracket, a port that is not a number, an empty name), which
    no rule allows. A bare IPv6 literal (``::1``, several colons, no brackets) is taken whole, without a port.
    """
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[1:end], value[end + 1 :]
        if end < 0 or not _is_ip(name) or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    if value.count(":") > 1:
        return value if _is_ip(value) else None
    name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def machine_names() -> frozenset[str]:
    """This machine's host names: ``socket.gethostname()`` and its fully qualified form (read once per app)."""
    names = set()
    try:
        names.add(socket.gethostname())
        names.add(socket.getfqdn())
    except OSError:  # no resolver: the names already read still count
        logger.debug("could not read this machine's host names", exc_info=True)
    return frozenset(_normalize(n) for n in names if n)


@dataclass(frozen=True)
class HostPolicy:
    """Which ``Host`` names a server answers to (see the module's docstring for the rules)."""

    names: frozenset[str]
    #: ``.example.com`` entries: the domain itself and its subdomains
    suffixes: tuple[str, ...] = ()
    any_host: bool = False
    #: the names ``XINFERENCE_ALLOWED_HOSTS`` lists: the only other origins whose pages may change something
    listed: frozenset[str] = frozenset()

    @classmethod
    def for_server(cls, bound_host: str | None, allowed: Iterable[str]) -> HostPolicy:
        """The policy of a server bound to ``bound_host`` with ``XINFERENCE_ALLOWED_HOSTS`` = ``allowed``."""
        entries = [_normalize(a) for a in allowed if _normalize(a)]
        names = {"localhost", *machine_names(), *(e for e in entries if not e.startswith("."))}
        bound = _normalize(bound_host or "")
        if bound not in _WILDCARDS and not _is_ip(bound.strip("[]")):
            names.add(bound)
        suffixes = tuple(e for e in entries if e.startswith(".") and e != ".")
        listed = frozenset(e for e in entries if not e.startswith(".") and e != "*")
        return cls(frozenset(names), suffixes, any_host="*" in entries, listed=listed)

    def allows_origin(self, origin: str, host: str | None) -> bool:
        """Whether a browser page at ``origin`` may send a request that changes something (any method but GET,
        HEAD and OPTIONS): a page of this server itself (``origin``'s host and port are the request's ``Host``),
        or one whose name ``XINFERENCE_ALLOWED_HOSTS`` lists. A page elsewhere cannot read the answer (CORS is
        closed), but without this it could still launch a model or install an engine with a form or a
        ``no-cors`` fetch, which carry no API key only when none is needed."""
        if self.any_host:
            return True
        parsed = urlsplit(origin.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            return False  # "null" (a sandboxed frame, a file:// page) or garbage
        if host is not None and parsed.netloc.lower() == host.strip().lower():
            return True
        name = _normalize(parsed.hostname or "")
        return name in self.listed or any(name == s[1:] or name.endswith(s) for s in self.suffixes)

    def allows(self, header: str | None) -> bool:
        """Whether a request carrying this ``Host`` value (``None``: no header) may be served."""
        if header is None or self.any_host:
            return True
        name = host_name(header)
        if name is None:
            return False
        if name in self.names or _is_ip(name):
            return True
        return any(name == s[1:] or name.endswith(s) for s in self.suffixes)


class HostGuardMiddleware:
    """Pure ASGI middleware (streams pass unbuffered): a 403 for a request whose ``Host`` the policy refuses."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy
        self._logged: set[str] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        hosts = [value.decode("latin-1") for name, value in headers if name == b"host"]
        refused = next((h for h in hosts if not self.policy.allows(h)), None)
        if refused is None:
            origin = next((v.decode("latin-1") for n, v in headers if n == b"origin"), None)
            if (
                origin is None
                or scope.get("method", "GET") in _SAFE_METHODS
                or self.policy.allows_origin(origin, hosts[0] if hosts else None)
            ):
                await self.app(scope, receive, send)
                return
            await self._refuse(
                scope,
                send,
                f"a request from the web page at {origin[:200]!r} may not change "
                "anything here (a protection against cross-site requests); add its name to "
                "XINFERENCE_ALLOWED_HOSTS to allow it",
                "origin_not_allowed",
            )
            return
        self._log(refused)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the server answers 403
            return
        await self._refuse(
            scope,
            send,
            f"Host {refused[:200]!r} is not a name this server answers to (a protection "
            "against DNS rebinding); use localhost, an IP address or this machine's name, or add it "
            "to XINFERENCE_ALLOWED_HOSTS",
            "host_not_allowed",
        )

    def _log(self, host: str) -> None:
        if host not in self._logged and len(self._logged) < _LOGGED_LIMIT:
            self._logged.add(host)
            logger.warning(
                "refused requests with Host %r: if clients reach this server by that name, add it to "
                "XINFERENCE_ALLOWED_HOSTS",
                host[:200],
            )

    @staticmethod
    async def _refuse(scope: dict[str, Any], send: Any, message: str, code: str) -> None:
        if uses_anthropic_shape(scope.get("path", "")):
            payload = anthropic_error_body(message, 403)
        else:
            payload = error_body(message, "permission_error", code=code)
        body = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
