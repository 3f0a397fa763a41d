"""Fuzzing the HTTP API from its OpenAPI document with Hypothesis: every route, generated path parameters, query
strings and JSON bodies (the schema's own field names with values of any JSON type, unknown fields, non-objects).

Checked for every answer: no 5xx, and no traceback or local path in the body. ``tests/api/test_fuzz_api.py``
runs a bounded number of examples in the suite; ``python -m benchmark.fuzz_api --endpoint URL --examples N``
runs longer and writes ``benchmark/results/fuzz.md``. Generation lengths are capped (``max_tokens`` at most 4) so
a request the server accepts finishes quickly; nothing generated names an existing model, so nothing is stopped.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

__all__ = ["FuzzReport", "bad_body", "fuzz", "load_routes"]

_PARAM = re.compile(r"\{([^}]+)\}")
#: what must never reach a client: a Python traceback or a path of this machine
_LEAKS = re.compile(r"Traceback \(most recent call last\)|File \"/|/site-packages/|/work/|/root/|/home/|/tmp/")
#: routes never fuzzed: they would change the machine itself (installing engines)
_SKIPPED = {("POST", "/v1/engines/{engine}/install"), ("POST", "/v1/engines/{engine}/uninstall")}

_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=30)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@dataclass
class FuzzReport:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def load_routes(endpoint: str, headers: dict[str, str] | None = None) -> list[tuple[str, str, list[str]]]:
    """(method, path, body field names) of every route in the server's OpenAPI document."""
    document = httpx.get(f"{endpoint}/openapi.json", headers=headers or {}, timeout=30).json()
    schemas = document.get("components", {}).get("schemas", {})
    routes = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if (method.upper(), path) in _SKIPPED:
                continue
            body = (operation.get("requestBody") or {}).get("content", {}).get("application/json", {})
            ref = (body.get("schema") or {}).get("$ref", "")
            names = sorted(schemas.get(ref.rsplit("/", 1)[-1], {}).get("properties") or {})
            routes.append((method.upper(), path, names))
    return sorted(routes)


def bad_body(status: int, text: str) -> str | None:
    """Why an answer is wrong, or None."""
    if status >= 500 and status != 503:  # 503: a model loading or unavailable is a proper answer
        return f"status {status}"
    if _LEAKS.search(text):
        return "traceback or local path in the body"
    return None


def _cap(body: Any) -> Any:
    if isinstance(body, dict):
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens", "n"):
            if key in body and not (isinstance(body[key], int) and 0 <= body[key] <= 4):
                body[key] = 4 if key != "n" else 1
    return body


@st.composite
def _request(draw: Any, routes: list[tuple[str, str, list[str]]]) -> tuple[str, str, Any, dict[str, Any]]:
    method, path, names = draw(st.sampled_from(routes))
    url = _PARAM.sub(
        lambda _: draw(st.text(st.characters(codec="utf-8", exclude_characters="/?#%"), min_size=1, max_size=20)), path
    )
    query = draw(
        st.dictionaries(
            st.sampled_from(["detailed", "model_type", "lines", "n", "x"]), st.text(max_size=10), max_size=2
        )
    )
    body: Any = None
    if method in ("POST", "PUT", "PATCH"):
        known = st.fixed_dictionaries({}, optional={name: _json for name in names})
        body = draw(
            st.one_of(
                known,
                st.builds(lambda a, b: {**a, **b}, known, st.dictionaries(st.text(max_size=8), _json, max_size=2)),
                _json,
            )
        )
    return method, url, _cap(body), query


def fuzz(endpoint: str, examples: int, headers: dict[str, str] | None = None, seed: int = 0) -> FuzzReport:
    """Send ``examples`` generated requests; every wrong answer is in ``report.failures``."""
    routes = load_routes(endpoint, headers)
    report = FuzzReport()
    client = httpx.Client(base_url=endpoint, headers=headers or {}, timeout=120)

    @settings(
        max_examples=examples, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(_request(routes))
    def one(request: tuple[str, str, Any, dict[str, Any]]) -> None:
        method, url, body, query = request
        try:
            content = None if body is None else json.dumps(body).encode()
            response = client.request(
                method, url, content=content, params=query, headers={"content-type": "application/json"}
            )
        except httpx.InvalidURL:
            return  # the client refuses to send it; nothing reached the server
        report.requests += 1
        report.statuses[response.status_code] += 1
        why = bad_body(response.status_code, response.text)
        if why is not None:
            report.failures.append(f"{method} {url} {json.dumps(body)[:300]} -> {why}: {response.text[:300]}")

    try:
        one()
    finally:
        client.close()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "fuzz.md")
    args = parser.parse_args()
    report = fuzz(args.endpoint, args.examples)
    lines = [
        "# API fuzzing",
        "",
        f"{report.requests} generated requests over every route of the OpenAPI document (Hypothesis, derandomized).",
        "",
        f"Wrong answers (5xx other than 503, traceback or local path): {len(report.failures)}",
        "",
        "| status | count |",
        "|---|---|",
    ]
    lines += [f"| {status} | {count} |" for status, count in sorted(report.statuses.items())]
    lines += ["", *[f"- `{failure}`" for failure in report.failures[:50]]]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{report.requests} requests, {len(report.failures)} wrong answers; report in {args.out}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
