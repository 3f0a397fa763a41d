"""Host-header protection against DNS rebinding: the matching rules, and real servers refusing foreign names with
a 403 on every route, with and without API keys, while the names clients really use keep working."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import psutil
import pytest
from fastapi.testclient import TestClient

from tests.conftest import LocalServer, start_local_server
from xinference.api.app import create_app
from xinference.api.host_guard import HostPolicy, host_name, machine_names
from xinference.deploy.cluster import discover_supervisor

KEY = "host-guard-key"
EVIL = "evil.example"


# -- the matching function ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header,name",
    [
        ("localhost", "localhost"),
        ("LocalHost:9997", "localhost"),
        ("localhost.:80", "localhost"),
        ("127.0.0.1:9997", "127.0.0.1"),
        ("[::1]:9997", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("evil.example:9997", "evil.example"),
        ("localhost:", "localhost"),
    ],
)
def test_host_name_takes_the_name_part(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "[::1",
        "[::1]x",
        "[::1]:http",
        "localhost:http",
        "evil:80@127.0.0.1",
        "",
        ":9997",
        "[evil.example]:80",
        "fe80::zz",
    ],
)
def test_malformed_hosts_have_no_name(header: str) -> None:
    assert host_name(header) is None


def test_loopback_and_ip_literals_are_allowed_foreign_names_are_not() -> None:
    policy = HostPolicy.for_server("127.0.0.1", ())
    for header in (
        "localhost:9997",
        "127.0.0.1:9997",
        "127.8.9.10",
        "[::1]:9997",
        "::1",
        "192.0.2.7:9997",
        "[2001:db8::1]:80",
    ):
        assert policy.allows(header), header
    for header in (
        EVIL,
        "evil.example:9997",
        "localhost.evil.example",
        "127.0.0.1.evil.example",
        "[::1",
        "",
        "localhost:http",
    ):
        assert not policy.allows(header), header
    assert policy.allows(None)  # HTTP/1.0 without a Host header: no browser sends that


def test_bound_name_and_machine_names_are_allowed() -> None:
    policy = HostPolicy.for_server("Box.LAN", ())
    assert policy.allows("box.lan:9997") and not policy.allows("other.lan")
    hostname = socket.gethostname()
    for wildcard in ("0.0.0.0", "::"):
        everywhere = HostPolicy.for_server(wildcard, ())
        assert everywhere.allows(f"{hostname}:9997") and everywhere.allows(hostname.upper())
        assert not everywhere.allows(EVIL)
    assert socket.gethostname().lower() in machine_names()


def test_allowed_hosts_setting_names_suffixes_and_star() -> None:
    policy = HostPolicy.for_server("127.0.0.1", (" Models.Example ", ".corp.example", ""))
    assert policy.allows("models.example:443")
    assert policy.allows("corp.example") and policy.allows("a.b.corp.example:80")
    assert not policy.allows("notcorp.example") and not policy.allows("corp.example.evil.example")
    assert not policy.allows(EVIL)
    assert HostPolicy.for_server("127.0.0.1", ("*",)).allows(EVIL)


def test_bound_host_reaches_the_policy_through_create_app() -> None:
    """``create_app(bound_host=...)``: the name the server is bound to is answered; others are not (no lifespan,
    so only routes that need no supervisor are asked)."""
    app = create_app("127.0.0.1:1", bound_host="box.lan")
    assert TestClient(app, base_url="http://box.lan:9997").get("/openapi.json").status_code == 200
    refused = TestClient(app, base_url="http://other.lan:9997").get("/openapi.json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "host_not_allowed"


# -- real servers ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """Default settings: bound to 127.0.0.1, no API keys."""
    server = start_local_server(tmp_path_factory.mktemp("host-plain"))
    try:
        yield server
    finally:
        server.stop_and_reap()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """Bound to every interface, API keys on, two extra names allowed."""
    env = {"XINFERENCE_API_KEYS": KEY, "XINFERENCE_ALLOWED_HOSTS": "models.example,.corp.example"}
    server = start_local_server(tmp_path_factory.mktemp("host-keyed"), "--host", "0.0.0.0", env=env)
    try:
        yield server
    finally:
        server.stop_and_reap()


def _call(server: LocalServer, method: str, path: str, host: str, key: str | None = None) -> httpx.Response:
    headers = {"Host": host, **({"Authorization": f"Bearer {key}"} if key else {})}
    body = {"model_name": "smollm2-instruct"} if method == "POST" else None
    return httpx.request(method, f"{server.endpoint}{path}", headers=headers, json=body, timeout=30)


ROUTES = [
    ("POST", "/v1/models"),
    ("GET", "/v1/models"),
    ("GET", "/ui/"),
    ("GET", "/metrics"),
    ("GET", "/docs"),
    ("GET", "/openapi.json"),
    ("GET", "/v1/cluster/auth"),
    ("GET", "/v1/address"),
    ("GET", "/nowhere"),
]


@pytest.mark.parametrize("method,path", ROUTES)
@pytest.mark.parametrize("keys", ["without keys", "with keys"])
def test_foreign_host_is_403_on_every_route(method: str, path: str, keys: str, request: pytest.FixtureRequest) -> None:
    server: LocalServer = request.getfixturevalue("plain_server" if keys == "without keys" else "keyed_server")
    for key in (None, KEY) if keys == "with keys" else (None,):
        for host in (EVIL, f"{EVIL}:{server.endpoint.rsplit(':', 1)[1]}", "localhost.evil.example"):
            response = _call(server, method, path, host, key)
            assert response.status_code == 403, (method, path, host, response.text)
            error = response.json()["error"]
            assert error["type"] == "permission_error" and error["code"] == "host_not_allowed"
            assert "XINFERENCE_ALLOWED_HOSTS" in error["message"] and host in error["message"]
            assert "access-control-allow-origin" not in response.headers


def test_messages_route_refuses_in_anthropics_shape(plain_server: LocalServer) -> None:
    response = httpx.post(f"{plain_server.endpoint}/v1/messages", headers={"Host": EVIL}, json={}, timeout=30)
    assert response.status_code == 403
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "permission_error"


def test_names_clients_use_are_served(plain_server: LocalServer) -> None:
    port = plain_server.endpoint.rsplit(":", 1)[1]
    for host in (
        "localhost",
        f"localhost:{port}",
        f"127.0.0.1:{port}",
        "127.3.2.1",
        f"[::1]:{port}",
        socket.gethostname(),
    ):
        for path in ("/v1/models", "/ui/", "/metrics", "/openapi.json"):
            response = _call(plain_server, "GET", path, host)
            assert response.status_code == 200, (host, path, response.text)


def test_http10_request_without_host_is_served(plain_server: LocalServer) -> None:
    port = int(plain_server.endpoint.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200") or reply.startswith(b"HTTP/1.0 200"), reply[:200]


def test_cors_stays_closed(plain_server: LocalServer) -> None:
    """No CORS middleware: a page on another origin gets no permission to read answers, preflight or not."""
    origin = {"Origin": "http://evil.example"}
    preflight = httpx.options(
        f"{plain_server.api}/models",
        timeout=30,
        headers={**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert "access-control-allow-origin" not in httpx.get(f"{plain_server.api}/models", headers=origin).headers


def test_allowed_hosts_and_keys_together(keyed_server: LocalServer) -> None:
    """Allowed names still need the key (401 without it); the Host check comes first (403, key or not)."""
    for host in ("models.example", "corp.example:443", "gpu.corp.example", socket.gethostname(), "localhost"):
        assert _call(keyed_server, "GET", "/v1/models", host, KEY).status_code == 200, host
        assert _call(keyed_server, "GET", "/v1/models", host).status_code == 401, host
        assert _call(keyed_server, "GET", "/ui/", host).status_code == 200, host
    for host in ("notcorp.example", "corp.example.evil.example"):
        assert _call(keyed_server, "GET", "/v1/models", host, KEY).status_code == 403, host


def _lan_address() -> str | None:
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return str(address.address)
    return None


def test_worker_discovers_a_supervisor_bound_everywhere_by_its_lan_address(keyed_server: LocalServer) -> None:
    """What ``xinference-worker --endpoint http://<LAN IP>:<port>`` does first: the Host is an interface address."""
    address = _lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    port = keyed_server.endpoint.rsplit(":", 1)[1]
    assert discover_supervisor(f"http://{address}:{port}", KEY)
    assert discover_supervisor(f"http://{socket.gethostname()}:{port}", KEY)


def test_refusals_are_logged_once_per_name(plain_server: LocalServer) -> None:
    for _ in range(3):
        _call(plain_server, "GET", "/v1/models", "logged-once.example")
    log = plain_server.log()
    assert log.count("'logged-once.example'") == 1, log[-2000:]


# -- cross-site requests: a page elsewhere may read nothing and change nothing ----------------------------------------
def test_only_this_servers_own_pages_and_listed_names_may_change_things() -> None:
    policy = HostPolicy.for_server("127.0.0.1", ("models.example", ".corp.example"))
    assert policy.allows_origin("http://127.0.0.1:9997", "127.0.0.1:9997")  # the web UI itself
    assert policy.allows_origin("http://LocalHost:9997", "localhost:9997")
    assert not policy.allows_origin("http://localhost:3000", "localhost:9997")  # another local page
    assert not policy.allows_origin("http://127.0.0.1:8080", "127.0.0.1:9997")
    assert not policy.allows_origin(f"https://{EVIL}", "127.0.0.1:9997")
    assert not policy.allows_origin("null", "127.0.0.1:9997") and not policy.allows_origin("file://", None)
    assert policy.allows_origin("https://models.example", "127.0.0.1:9997")
    assert policy.allows_origin("https://app.corp.example:8443", "127.0.0.1:9997")
    assert not policy.allows_origin(f"http://{socket.gethostname()}:1234", "127.0.0.1:9997")  # not listed
    assert HostPolicy.for_server("127.0.0.1", ("*",)).allows_origin(f"https://{EVIL}", None)


def test_a_foreign_page_cannot_launch_or_register_but_may_read_nothing_new(plain_server: LocalServer) -> None:
    """A form or a no-cors fetch from another page carries its Origin: a 403 before the route runs (before, a
    text/plain body was all that stood between such a page and a launch, and only on recent FastAPI)."""
    foreign = {"Origin": f"http://{EVIL}"}
    for method, path in (
        ("POST", "/v1/models"),
        ("DELETE", "/v1/models/anything"),
        ("POST", "/v1/model_registrations/LLM"),
        ("POST", "/v1/engines/vLLM/install"),
    ):
        response = httpx.request(
            method,
            f"{plain_server.endpoint}{path}",
            headers=foreign,
            json={"model_name": "smollm2-instruct"},
            timeout=30,
        )
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "origin_not_allowed"
    assert httpx.get(f"{plain_server.api}/models", headers=foreign, timeout=30).status_code == 200
    own = {"Origin": plain_server.endpoint}  # the web UI's own requests
    response = httpx.post(
        f"{plain_server.api}/models",
        headers=own,
        timeout=30,
        json={"model_name": "no-such-model", "model_engine": "llama.cpp"},
    )
    assert response.status_code == 404, response.text
