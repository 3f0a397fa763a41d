"""Issue 13, auth matrix: with keys set, every route in the OpenAPI document (and /metrics) is 401 without a key
or with a wrong one, and passes with the key; keys are compared in constant time."""

from __future__ import annotations

import pytest

from benchmark.auth_matrix import OPEN_ROUTES, run_matrix
from tests.conftest import start_local_server
from xinference.api.auth import ApiKeyMiddleware


def test_every_route_needs_the_key(tmp_path) -> None:
    key = "matrix-key-1"
    server = start_local_server(tmp_path, env={"XINFERENCE_API_KEYS": f"{key},second-key"})
    try:
        rows = run_matrix(server.endpoint, key)
    finally:
        server.stop()
    assert len(rows) > 30  # the whole document was walked
    bad = [row for row in rows if not row.ok]
    assert not bad, "\n".join(map(str, bad))
    assert {(r.method, r.path) for r in rows} >= OPEN_ROUTES | {("GET", "/metrics"), ("POST", "/v1/chat/completions")}


@pytest.mark.parametrize(
    "token,accepted",
    [
        (b"second-key", True),
        (b"matrix-key-1", True),
        (b"matrix-key-", False),
        (b"matrix-key-11", False),
        (b"", False),
        (b"x" * 5000, False),
    ],
)
def test_key_check_is_exact(token: bytes, accepted: bool) -> None:
    middleware = ApiKeyMiddleware(lambda *a: None, frozenset({"matrix-key-1", "second-key"}))  # type: ignore[arg-type]
    scope = {"headers": [(b"authorization", b"Bearer " + token)]}
    assert middleware._authorized(scope) is accepted
    assert middleware._authorized({"headers": [(b"x-api-key", token)]}) is accepted


def test_keys_are_compared_as_fixed_length_digests_of_every_key() -> None:
    """Constant time: the presented token is hashed, so a comparison never depends on where it differs or on its
    length, and every configured key is compared (no early exit telling which key was near)."""
    compared: list[tuple[bytes, bytes]] = []
    middleware = ApiKeyMiddleware(lambda *a: None, frozenset({"k1", "k2", "k3"}))  # type: ignore[arg-type]
    import xinference.api.auth as auth

    real = auth.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    auth.hmac.compare_digest = spy  # type: ignore[assignment]
    try:
        for token in (b"k1", b"nope", b"a-much-longer-token"):
            compared.clear()
            middleware._authorized({"headers": [(b"authorization", b"Bearer " + token)]})
            assert len(compared) == 3
            assert {len(a) for a, _ in compared} == {len(b) for _, b in compared} == {32}
    finally:
        auth.hmac.compare_digest = real
