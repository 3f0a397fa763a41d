"""The API's image step (``api/images.py``): URLs fetched once and inlined, within bounds, and every bad image a
4xx naming its part. A real HTTP server on 127.0.0.1 serves the images; loopback is a private address, so each test
allows it (or not) through ``XINFERENCE_IMAGE_URL_ALLOW_PRIVATE`` as an operator would."""

from __future__ import annotations

import asyncio
import base64
import io
import ipaddress
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from PIL import Image

from tests.conftest import free_port
from xinference.api.images import check_address, inline_images
from xinference.errors import InvalidRequest, RequestTooLarge
from xinference.model.images import MAX_IMAGE_BYTES, decode_data_uri, decode_image


def png(color: tuple[int, int, int] = (200, 30, 40), size: tuple[int, int] = (6, 4)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


PNG = png()


class ImageServer:
    """A local HTTP server whose paths each misbehave in one way; it counts the requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.port = free_port()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.hits[self.path] += 1
                try:
                    server.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading, as it should for an oversized body

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        if path in ("/cat.png", "/other.png"):
            self._send(h, 200, "image/png", PNG if path == "/cat.png" else png((0, 0, 255)))
        elif path == "/page.html":
            self._send(h, 200, "text/html; charset=utf-8", b"<html>not an image</html>")
        elif path == "/garbage.png":
            self._send(h, 200, "image/png", b"this is not a png at all")
        elif path == "/missing.png":
            self._send(h, 404, "text/plain", b"no")
        elif path == "/big.png":
            h.send_response(200)
            h.send_header("Content-Type", "image/png")
            h.send_header("Content-Length", str(MAX_IMAGE_BYTES + 1))
            h.end_headers()
            h.wfile.write(b"\0" * 65536)
        elif path == "/big-unsized.png":  # no Content-Length: the body ends when the connection closes
            h.protocol_version = "HTTP/1.0"
            h.send_response(200)
            h.send_header("Content-Type", "image/png")
            h.end_headers()
            chunk = b"\0" * (1 << 20)
            for _ in range(MAX_IMAGE_BYTES // len(chunk) + 2):
                h.wfile.write(chunk)
        elif path == "/slow.png":
            time.sleep(2)
            self._send(h, 200, "image/png", PNG)
        elif path == "/redirect":
            self._redirect(h, "/cat.png")
        elif path == "/redirect-elsewhere":  # another loopback address, which an allow-list of one address refuses
            self._redirect(h, self.url("/cat.png", host="127.0.0.2"))
        elif path == "/redirect-ftp":
            self._redirect(h, "ftp://127.0.0.1/cat.png")
        elif path == "/loop":
            self._redirect(h, "/loop")
        else:
            self._send(h, 404, "text/plain", b"unknown")

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, content_type: str, body: bytes) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    @staticmethod
    def _redirect(h: BaseHTTPRequestHandler, location: str) -> None:
        h.send_response(302)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def images() -> Iterator[ImageServer]:
    server = ImageServer()
    yield server
    server.close()


@pytest.fixture
def allow_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_IMAGE_URL_ALLOW_PRIVATE", "1")


def chat(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You look at pictures."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, *parts]},
    ]


def url_part(url: str, detail: str | None = None) -> dict[str, Any]:
    inner: dict[str, Any] = {"url": url}
    if detail is not None:
        inner["detail"] = detail
    return {"type": "image_url", "image_url": inner}


def inline(messages: list[dict[str, Any]], names: list[str] | None = None) -> int:
    return asyncio.run(inline_images(messages, names))


def refusal(messages: list[dict[str, Any]], names: list[str] | None = None) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        inline(messages, names)
    return caught.value


def pixels(part: dict[str, Any]) -> tuple[int, int, int]:
    _, data = decode_data_uri(part["image_url"]["url"], "p")
    pixel = decode_image(data, "p").getpixel((0, 0))
    assert isinstance(pixel, tuple)
    return (int(pixel[0]), int(pixel[1]), int(pixel[2]))


def test_a_url_is_fetched_once_and_replaced_by_its_data_uri(images: ImageServer, allow_loopback: None) -> None:
    inline_png = "data:image/png;base64," + base64.b64encode(png((0, 255, 0))).decode()
    messages = chat(
        url_part(images.url("/cat.png"), detail="low"),
        {"type": "input_image", "image_url": images.url("/cat.png")},  # the raw Responses spelling, same URL
        url_part(inline_png),
        url_part(images.url("/redirect")),
    )
    before = images.hits["/cat.png"]
    assert inline(messages) == 4
    parts = messages[1]["content"][1:]
    assert all(p["type"] == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts)
    assert parts[0]["image_url"]["detail"] == "low" and "detail" not in parts[1]["image_url"]
    assert parts[0]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert parts[2]["image_url"]["url"] == inline_png  # already inline: checked, left as sent
    assert [pixels(p) for p in parts] == [(200, 30, 40), (200, 30, 40), (0, 255, 0), (200, 30, 40)]
    # once for the two parts naming it, once more through the redirect (a different URL)
    assert images.hits["/cat.png"] - before == 2
    assert messages[1]["content"][0] == {"type": "text", "text": "What is this?"}


def test_private_addresses_are_refused_by_default(images: ImageServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XINFERENCE_IMAGE_URL_ALLOW_PRIVATE", raising=False)
    before = sum(images.hits.values())
    for url in (images.url("/cat.png"), images.url("/cat.png", host="localhost")):
        error = refusal(chat(url_part(url)))
        assert error.param == "messages[1].content[1].image_url"
        assert "private, loopback or link-local" in error.message
    assert sum(images.hits.values()) == before  # refused before any connection


def test_an_allow_list_is_checked_again_at_each_redirect(images: ImageServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_IMAGE_URL_ALLOW_PRIVATE", "127.0.0.1/32, not-a-network")
    messages = chat(url_part(images.url("/cat.png")))
    assert inline(messages) == 1
    error = refusal(chat(url_part(images.url("/redirect-elsewhere"))))
    assert "private, loopback or link-local" in error.message and "127.0.0.2" in error.message


@pytest.mark.parametrize(
    "path,status,needle",
    [
        ("/page.html", 400, "content type 'text/html', not an image"),
        ("/garbage.png", 400, "cannot be read"),
        ("/missing.png", 400, "HTTP 404"),
        ("/big.png", 413, f"larger than {MAX_IMAGE_BYTES} bytes"),
        ("/big-unsized.png", 413, f"larger than {MAX_IMAGE_BYTES} bytes"),
        ("/loop", 400, "redirects more than"),
        ("/redirect-ftp", 400, "scheme 'ftp'"),
    ],
)
def test_bad_images_at_urls_are_refused_naming_the_part(
    images: ImageServer, allow_loopback: None, path: str, status: int, needle: str
) -> None:
    error = refusal(chat(url_part(images.url("/cat.png")), url_part(images.url(path))))
    assert error.status_code == status and isinstance(error, RequestTooLarge) == (status == 413)
    assert error.param == "messages[1].content[2].image_url"
    assert needle in error.message


def test_a_slow_url_times_out(images: ImageServer, allow_loopback: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_IMAGE_FETCH_TIMEOUT", "0.3")
    started = time.monotonic()
    error = refusal(chat(url_part(images.url("/slow.png"))))
    assert "longer than 0.3 s" in error.message and error.param == "messages[1].content[1].image_url"
    assert time.monotonic() - started < 1.5


def test_an_unreachable_url_is_a_400(allow_loopback: None) -> None:
    error = refusal(chat(url_part(f"http://127.0.0.1:{free_port()}/cat.png")))
    assert "cannot be fetched" in error.message and error.status_code == 400


def test_an_unresolvable_host_is_a_400() -> None:
    error = refusal(chat(url_part("https://no-such-host.invalid/cat.png")))
    assert "cannot be resolved" in error.message


@pytest.mark.parametrize(
    "url,needle",
    [
        ("ftp://example.com/cat.png", "scheme 'ftp'"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("cat.png", "scheme 'cat.png'"),
        ("data:image/png,rawbytes", "base64"),
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:image/png;base64," + base64.b64encode(b"not an image").decode(), "cannot be read"),
    ],
)
def test_bad_urls_and_data_uris_are_refused(url: str, needle: str) -> None:
    error = refusal(chat(url_part(url)))
    assert needle in error.message and error.param == "messages[1].content[1].image_url"


def test_names_of_a_translated_request_name_its_last_images(images: ImageServer, allow_loopback: None) -> None:
    """An API that translated its request names the images it added by the client's own paths; images before them
    (a stored conversation) keep their chat paths."""
    good = "data:image/png;base64," + base64.b64encode(PNG).decode()
    messages = chat(url_part(good), url_part(images.url("/page.html")))
    error = refusal(messages, names=["input[0].content[2]"])
    assert error.param == "input[0].content[2]"
    error = refusal(chat(url_part(images.url("/page.html")), url_part(good)), names=["input[0].content[2]"])
    assert error.param == "messages[1].content[1].image_url"


def test_no_images_is_no_work() -> None:
    messages = chat()
    assert inline(messages) == 0 and messages == chat()


@pytest.mark.parametrize(
    "address,allowed",
    [
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # shared address space (carrier NAT)
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("::ffff:93.184.216.34", True),
    ],
)
def test_only_public_unicast_addresses_pass_by_default(address: str, allowed: bool) -> None:
    ip = ipaddress.ip_address(address)
    assert check_address(ip, ()) is allowed
    assert check_address(ip, True) is True
    assert check_address(ip, (ipaddress.ip_network("10.1.2.0/24"),)) is (allowed or address == "10.1.2.3")
