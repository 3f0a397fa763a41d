"""Auth matrix: with API keys set, every route of the OpenAPI document (and ``/metrics``) refuses a request
without a key (401) and lets the same request through with one.

Run against a live server started with ``XINFERENCE_API_KEYS``; ``tests/api/test_auth_matrix.py`` runs it in
the test suite and ``python -m benchmark.auth_matrix`` writes ``benchmark/results/auth_matrix.md``. Path
parameters are filled with names nothing has, and bodies are empty objects, so a request that passes auth is
answered 2xx or 4xx by the route itself (never 401, never 5xx) and changes nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["OPEN_ROUTES", "Row", "run_matrix", "write_report"]

#: Routes that answer without a key, on purpose (clients probe it to learn whether a key is needed)
OPEN_ROUTES = frozenset({("GET", "/v1/cluster/auth")})
_PARAM = re.compile(r"\{[^}]+\}")
_PLACEHOLDER = "no-such-thing-7"


@dataclass(frozen=True)
class Row:
    method: str
    path: str
    without_key: int
    wrong_key: int
    with_key: int

    @property
    def ok(self) -> bool:
        if (self.method, self.path) in OPEN_ROUTES:
            return self.with_key < 500
        return (
            self.without_key == 401
            and self.wrong_key == 401
            and self.with_key not in (401, 403)
            and self.with_key < 500
        )


def _routes(client: httpx.Client, key: str) -> list[tuple[str, str]]:
    document = client.get("/openapi.json", headers={"Authorization": f"Bearer {key}"})
    document.raise_for_status()
    routes = [(method.upper(), path) for path, ops in document.json()["paths"].items() for method in ops]
    routes.append(("GET", "/metrics"))
    routes.append(("GET", "/openapi.json"))
    return sorted(set(routes))


def _send(client: httpx.Client, method: str, path: str, headers: dict[str, str]) -> int:
    url = _PARAM.sub(_PLACEHOLDER, path)
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return client.request(method, url, json=body, headers=headers).status_code


def run_matrix(endpoint: str, key: str) -> list[Row]:
    """One row per route: the status without a key, with a wrong key, and with ``key``."""
    rows = []
    with httpx.Client(base_url=endpoint, timeout=60) as client:
        for method, path in _routes(client, key):
            rows.append(
                Row(
                    method,
                    path,
                    without_key=_send(client, method, path, {}),
                    wrong_key=_send(client, method, path, {"Authorization": f"Bearer {key}x"}),
                    with_key=_send(client, method, path, {"Authorization": f"Bearer {key}"}),
                )
            )
    return rows


def write_report(rows: list[Row], path: Path) -> None:
    lines = [
        "# Auth matrix",
        "",
        "Server started with `XINFERENCE_API_KEYS`; each route called with no key, a wrong "
        "key and the key (path parameters name nothing that exists, bodies are `{}`).",
        "",
        f"{sum(r.ok for r in rows)} of {len(rows)} routes as expected.",
        "",
        "| method | path | no key | wrong key | key | ok |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.method} | `{row.path}` | {row.without_key} | {row.wrong_key} | {row.with_key} | "
            f"{'yes' if row.ok else '**no**'} |"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "auth_matrix.md")
    args = parser.parse_args()
    rows = run_matrix(args.endpoint, args.key)
    write_report(rows, args.out)
    bad = [r for r in rows if not r.ok]
    for row in bad:
        print(f"NOT OK: {row}", file=sys.stderr)
    print(f"{len(rows) - len(bad)}/{len(rows)} routes as expected; report in {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
