"""Issue 13, fuzzing: generated requests over every route of the OpenAPI document, against the session's live
server (with the bundled chat model): no 5xx, no traceback or local path in any body. A bounded example count
here; ``python -m benchmark.fuzz_api`` runs longer."""

from __future__ import annotations

from benchmark.fuzz_api import bad_body, fuzz


def test_generated_requests_get_clean_answers(local_server) -> None:
    report = fuzz(local_server.endpoint, examples=300)
    assert report.requests > 200
    assert not report.failures, "\n".join(report.failures[:10])
    assert local_server.process.poll() is None  # still up


def test_the_checker_catches_what_it_must() -> None:
    assert bad_body(500, "{}") and bad_body(200, 'File "/work/main/x.py", line 3')
    assert bad_body(400, "no such file /root/.cache/model.gguf")
    assert bad_body(503, "loading") is None and bad_body(422, '{"error": {"message": "bad"}}') is None
