"""Images in chat requests, made safe for the engines before a request leaves the API process.

Every chat API (chat completions, Anthropic Messages, Responses) calls :func:`inline_images` on the OpenAI-shaped
messages it is about to send: each image part is checked, and each ``http(s)`` URL is fetched once, here, and
replaced by a ``data:`` URI. Model processes therefore never open a connection a request asked for, and an engine
only ever decodes ``data:`` URIs (:func:`xinference.model.images.load_images`).

A fetch is bounded: :data:`~xinference.model.images.MAX_IMAGE_BYTES` of body (413 beyond), the time of
:func:`xinference.settings.image_fetch_timeout` for the whole fetch, redirects included, a ``Content-Type`` of
``image/*``, and no private, loopback, link-local or otherwise non-public address unless
``XINFERENCE_IMAGE_URL_ALLOW_PRIVATE`` allows it. The host is resolved here, every address it resolves to is
checked, and the connection goes to the checked address (the name still sent as ``Host`` and as the TLS server
name), so a name that resolves differently a moment later cannot slip through; each redirect is checked the same
way. Every image, fetched or sent inline, must decode (:func:`xinference.model.images.decode_image`). A bad image is
a 400 (413 when too large) whose ``param`` names the part in the client's own request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import urljoin

from xinference import settings
from xinference.errors import InvalidRequest, RequestTooLarge
from xinference.model.images import (
    MAX_IMAGE_BYTES,
    ImagePart,
    data_uri,
    decode_data_uri,
    decode_image,
    image_parts,
)

if TYPE_CHECKING:  # httpx (~40 ms of CPU) loads with the first request that carries an image
    import httpx

__all__ = ["MAX_REDIRECTS", "check_address", "fetch_image", "inline_images"]

#: Redirects followed for one image URL (each one checked like the first URL).
MAX_REDIRECTS = 5
#: Image URLs of one request fetched at the same time.
_CONCURRENT_FETCHES = 8
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


def check_address(address: IPAddress, allowed: Union[bool, Sequence[settings.IPNetwork]]) -> bool:
    """Whether the API may connect to ``address`` for an image: a public unicast address always; any other
    (private, loopback, link-local, shared, reserved, multicast, unspecified) only when ``allowed`` is True or one
    of its networks holds it. An IPv4 address mapped into IPv6 is judged as the IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_global and not address.is_multicast:
        return True
    if allowed is True:
        return True
    if allowed is False:
        return False
    return any(address.version == network.version and address in network for network in allowed)


@dataclass(frozen=True)
class _Target:
    """Where one hop of a fetch connects: the URL with the host replaced by a checked address, and the name."""

    url: httpx.URL
    host_header: str
    server_name: str


async def _target(url: httpx.URL, param: str) -> _Target:
    """The checked address ``url`` leads to; :class:`InvalidRequest` for a bad scheme, an unresolvable name, or a
    name with any address the policy refuses."""
    if url.scheme not in ("http", "https"):
        raise InvalidRequest(
            f"image URL scheme {url.scheme[:20]!r} is not supported: send an http(s) URL or a data: URI", param=param
        )
    host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS, the Host header and the TLS server name take
    if not host:
        raise InvalidRequest("the image URL has no host", param=param)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidRequest(f"the image URL's host {host[:100]!r} cannot be resolved ({exc})", param=param) from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise InvalidRequest(f"the image URL's host {host[:100]!r} has no address", param=param)
    allowed = settings.image_url_private_networks()
    if not all(check_address(address, allowed) for address in addresses):
        raise InvalidRequest(
            f"the image URL's host {host[:100]!r} is or resolves to a private, loopback or link-local address: the "
            "server does not fetch images from its own networks (its operator can allow some with "
            "XINFERENCE_IMAGE_URL_ALLOW_PRIVATE); send the image as a data: URI",
            param=param,
        )
    default_port = url.port is None
    host_header = host if default_port else f"{host}:{url.port}"
    if ":" in host and not default_port:
        host_header = f"[{host}]:{url.port}"
    elif ":" in host:
        host_header = f"[{host}]"
    return _Target(url.copy_with(host=str(addresses[0])), host_header, host)


async def _fetch(client: httpx.AsyncClient, url: str, param: str) -> tuple[str, bytes]:
    """(media type, body) of an image URL, following checked redirects."""
    import httpx

    current = httpx.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        target = await _target(current, param)
        request = client.build_request(
            "GET",
            target.url,
            headers={"Host": target.host_header, "Accept": "image/*"},
            extensions={"sni_hostname": target.server_name},
        )
        response = await client.send(request, stream=True)
        try:
            if response.status_code in _REDIRECTS and "location" in response.headers:
                current = httpx.URL(urljoin(str(current), response.headers["location"]))
                continue
            return await _body(response, param)
        finally:
            await response.aclose()
    raise InvalidRequest(f"the image URL redirects more than {MAX_REDIRECTS} times", param=param)


async def _body(response: httpx.Response, param: str) -> tuple[str, bytes]:
    if response.status_code != 200:
        raise InvalidRequest(f"fetching the image URL answered HTTP {response.status_code}", param=param)
    media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not media_type.startswith("image/"):
        raise InvalidRequest(
            f"the image URL answered content type {media_type[:60] or 'none'!r}, not an image (image/*)", param=param
        )
    too_large = RequestTooLarge(f"the image at the URL is larger than {MAX_IMAGE_BYTES} bytes", param=param)
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_IMAGE_BYTES:
        raise too_large
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_IMAGE_BYTES:
            raise too_large
    return media_type, bytes(body)


async def fetch_image(url: str, param: str, client: httpx.AsyncClient | None = None) -> tuple[str, bytes]:
    """(media type, bytes) of the image at ``url``, fetched within the bounds of this module's docstring; every
    failure is an :class:`InvalidRequest` (:class:`RequestTooLarge` for size) naming ``param``."""
    import httpx

    timeout = settings.image_fetch_timeout()
    try:
        if client is not None:
            return await asyncio.wait_for(_fetch(client, url, param), timeout)
        async with _client(timeout) as own:
            return await asyncio.wait_for(_fetch(own, url, param), timeout)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        raise InvalidRequest(f"fetching the image URL took longer than {timeout:g} s", param=param) from None
    except httpx.InvalidURL as exc:
        raise InvalidRequest(f"the image URL is not valid ({exc})", param=param) from None
    except httpx.HTTPError as exc:
        raise InvalidRequest(f"the image URL cannot be fetched ({type(exc).__name__})", param=param) from None


def _client(timeout: float) -> httpx.AsyncClient:
    import httpx

    # trust_env=False: a proxy from the environment would connect by name, bypassing the address check
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False)


async def _inlined(url: str, param: str, client: httpx.AsyncClient, fetches: asyncio.Semaphore) -> str:
    """The ``data:`` URI of one image part's URL, checked to decode."""
    if url.startswith("data:"):
        _, data = decode_data_uri(url, param)
        await asyncio.to_thread(decode_image, data, param)
        return url
    if not url.startswith(("http://", "https://")):
        scheme = url.split(":", 1)[0] if ":" in url else url
        raise InvalidRequest(
            f"image URL scheme {scheme[:20]!r} is not supported: send an http(s) URL or a data: URI", param=param
        )
    async with fetches:
        media_type, data = await fetch_image(url, param, client)
    await asyncio.to_thread(decode_image, data, param)
    return data_uri(data, media_type)


def _named(parts: list[ImagePart], names: Sequence[str] | None) -> list[str]:
    """The param each part is reported under: ``names`` are the client's own paths of the last ``len(names)``
    parts (a translated request's images; earlier ones came from a stored conversation)."""
    if not names:
        return [part.param for part in parts]
    first = len(parts) - len(names)
    return [names[i - first] if i >= first else part.param for i, part in enumerate(parts)]


async def inline_images(messages: list[dict[str, Any]], names: Sequence[str] | None = None) -> int:
    """Check every image of ``messages`` and replace each ``http(s)`` URL with the ``data:`` URI of its image, in
    place; each part becomes ``{"type": "image_url", "image_url": {"url", "detail"?}}`` whatever its spelling.
    Returns the number of images. A URL that appears several times is fetched once.

    ``names`` (see :func:`_named`) lets a translated API name the parts as its client wrote them. The first bad
    part, in conversation order, is raised (:class:`InvalidRequest`, :class:`RequestTooLarge`)."""
    parts = list(image_parts(messages))
    if not parts:
        return 0
    params = _named(parts, names)
    fetches = asyncio.Semaphore(_CONCURRENT_FETCHES)
    async with _client(settings.image_fetch_timeout()) as client:
        first: dict[str, int] = {}
        jobs: list[asyncio.Task[str]] = []
        for n, part in enumerate(parts):
            if part.url not in first:
                first[part.url] = len(jobs)
                jobs.append(asyncio.ensure_future(_inlined(part.url, params[n], client, fetches)))
        results = await asyncio.gather(*jobs, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    for part in parts:
        inlined = results[first[part.url]]
        assert isinstance(inlined, str)
        image: dict[str, Any] = {"url": inlined}
        if part.detail is not None:
            image["detail"] = part.detail
        messages[part.message_index]["content"][part.part_index] = {"type": "image_url", "image_url": image}
    return len(parts)
