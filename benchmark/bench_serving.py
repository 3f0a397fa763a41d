"""Load generator for any OpenAI-compatible streaming endpoint.

Use it to measure what a deployed model actually delivers (TTFT, TPOT, ITL,
end-to-end latency, throughput) at one or more concurrency levels, e.g.::

    python -m benchmark.bench_serving --base-url http://127.0.0.1:9997/v1 \\
        --model my-model --concurrency 1,4,8 --num-prompts 64 --max-tokens 128

Requests are streamed so first-token and inter-token timings can be observed;
token counts are taken from the server's final ``usage`` chunk because chunks
do not map one-to-one onto tokens. Other scripts can import
:func:`run_benchmark` to reuse the request machinery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python benchmark/bench_serving.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from benchmark.stats import RequestResult, format_table, summarize

ENDPOINT_PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "completions": "/completions",
}
MAX_ERROR_BODY_CHARS = 300

_SUBJECTS: tuple[str, ...] = (
    "how a refrigerator keeps food cold",
    "the water cycle",
    "why the sky looks blue during the day",
    "the rules of chess",
    "how vaccines train the immune system",
    "the history of the printing press",
    "how a binary search works",
    "photosynthesis in plants",
    "the causes of ocean tides",
    "how a bicycle stays upright while moving",
    "the difference between weather and climate",
    "how compilers turn source code into machine code",
    "the life cycle of a star",
    "how bread rises when it is baked",
    "the basics of supply and demand",
    "how noise-cancelling headphones work",
)
_TASKS: tuple[str, ...] = (
    "Explain {subject} in simple terms.",
    "Write a short paragraph about {subject}.",
    "Give three key facts about {subject}.",
    ("Describe {subject} to a ten-year-old child, using a friendly tone and an everyday example they would recognise."),
    "Summarize {subject} in one sentence.",
    (
        "You are a patient teacher preparing notes for a class. Write an "
        "introduction to {subject}, then list the most common misconceptions "
        "students have about it and briefly correct each one."
    ),
    "What are the most important things to know about {subject}?",
    "Write a short story in which a curious engineer discovers {subject}.",
)


def build_prompts(num_prompts: int, seed: int) -> list[str]:
    """Return a deterministic prompt set of varied length for ``seed``.

    Built in so that runs are reproducible and need no dataset download; the
    same seed always yields the same prompts, so results stay comparable.
    """
    rng = random.Random(seed)
    return [rng.choice(_TASKS).format(subject=rng.choice(_SUBJECTS)) for _ in range(num_prompts)]


def arrival_offsets(num_requests: int, request_rate: float, seed: int) -> list[float]:
    """Send times in seconds after the run starts, one per request.

    A finite ``request_rate`` (req/s) gives a Poisson process with a seeded
    generator so the schedule is reproducible; ``inf`` sends all at once and
    leaves pacing to the concurrency limit.
    """
    if not request_rate > 0:
        raise ValueError(f"request rate must be positive, got {request_rate}")
    if math.isinf(request_rate):
        return [0.0] * num_requests
    rng = random.Random(seed)
    offsets: list[float] = []
    elapsed = 0.0
    for _ in range(num_requests):
        offsets.append(elapsed)
        elapsed += rng.expovariate(request_rate)
    return offsets


def build_body(
    endpoint: str,
    model: str,
    prompt: str,
    max_tokens: int,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """JSON body of one greedy, streamed request that asks for a usage chunk.

    ``extra_body`` adds fields a server needs in place of ones it lacks (e.g. a
    ``logit_bias`` that bans EOS where ``ignore_eos`` is not understood).
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if ignore_eos:
        body["ignore_eos"] = True
    body.update(extra_body or {})
    return body


def parse_sse_line(line: str) -> str | None:
    """Return the payload of an SSE ``data:`` line, ``None`` for other lines.

    Blank separators, comments (``:``) and ``event:``/``id:`` fields carry no
    completion data for OpenAI-style streams, so they are skipped.
    """
    if not line.startswith("data:"):
        return None
    return line.removeprefix("data:").removeprefix(" ")


def chunk_text(chunk: dict[str, Any], endpoint: str) -> str:
    """Generated text carried by one stream chunk (empty for role/usage chunks).

    For chat, ``reasoning_content`` counts as generated text too, so reasoning
    models are not charged their whole thinking phase as time-to-first-token.
    """
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    if endpoint == "chat":
        delta = choices[0].get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choices[0].get("text") or ""


async def _read_stream(response: httpx.Response, endpoint: str, result: RequestResult) -> tuple[int, bool]:
    """Record TTFT, ITL and usage from an SSE response into ``result``.

    Returns the number of content chunks and whether a usage chunk was seen.
    An in-stream ``error`` object raises, so the caller counts it as a failure.
    """
    content_chunks = 0
    usage_seen = False
    last_content = result.start_time
    async for line in response.aiter_lines():
        arrived = time.perf_counter()
        payload = parse_sse_line(line)
        if payload is None:
            continue
        if payload.strip() == "[DONE]":
            break
        chunk = json.loads(payload)
        if chunk.get("error"):
            raise RuntimeError(f"error event in stream: {chunk['error']}")
        if chunk_text(chunk, endpoint):
            if content_chunks == 0:
                result.ttft = arrived - result.start_time
            else:
                result.itl.append(arrived - last_content)
            last_content = arrived
            content_chunks += 1
        usage = chunk.get("usage")
        if usage:
            result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            result.completion_tokens = int(usage.get("completion_tokens") or 0)
            usage_seen = True
    return content_chunks, usage_seen


def _finish(result: RequestResult, content_chunks: int, usage_seen: bool) -> None:
    """Mark a fully read stream as ok, or as failed when it carried no text.

    Without a usage chunk the chunk count stands in for completion tokens and
    the result is flagged, since chunks and tokens need not correspond.
    """
    if content_chunks == 0:
        result.error = "stream ended without any content"
        return
    if not usage_seen:
        result.completion_tokens = content_chunks
        result.usage_from_chunks = True
    result.ok = True


async def send_request(client: httpx.AsyncClient, url: str, body: dict[str, Any], endpoint: str) -> RequestResult:
    """Send one streamed request and time it; failures are returned, not raised."""
    result = RequestResult(start_time=time.perf_counter())
    try:
        async with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {text[:MAX_ERROR_BODY_CHARS]}"
                return result
            content_chunks, usage_seen = await _read_stream(response, endpoint, result)
            result.e2e = time.perf_counter() - result.start_time
    # Deliberately broad: a malformed chunk or dropped connection in one request
    # is a counted failure, never a reason to abort the whole run.
    except Exception as exc:  # noqa: BLE001
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    _finish(result, content_chunks, usage_seen)
    return result


async def run_benchmark(
    base_url: str,
    model: str,
    endpoint: str,
    prompts: Sequence[str],
    concurrency: int,
    max_tokens: int,
    request_rate: float = math.inf,
    ignore_eos: bool = False,
    api_key: str | None = None,
    arrival_seed: int = 0,
    timeout: float = 300.0,
    extra_body: dict[str, Any] | None = None,
) -> tuple[list[RequestResult], float]:
    """Send one request per prompt with at most ``concurrency`` in flight.

    Requests are released on the :func:`arrival_offsets` schedule and then wait
    for a free concurrency slot. Returns per-request results in prompt order
    and the wall-clock seconds from the first release to the last completion.
    The client ignores proxy environment variables so that no proxy distorts
    the measured latencies.
    """
    if endpoint not in ENDPOINT_PATHS:
        raise ValueError(f"endpoint must be one of {sorted(ENDPOINT_PATHS)}, got {endpoint!r}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    url = base_url.rstrip("/") + ENDPOINT_PATHS[endpoint]
    offsets = arrival_offsets(len(prompts), request_rate, arrival_seed)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits, trust_env=False) as client:
        started = time.perf_counter()

        async def release(prompt: str, offset: float) -> RequestResult:
            await asyncio.sleep(max(0.0, started + offset - time.perf_counter()))
            async with slots:
                body = build_body(endpoint, model, prompt, max_tokens, ignore_eos, extra_body)
                return await send_request(client, url, body, endpoint)

        results = await asyncio.gather(*map(release, prompts, offsets))
        wall_seconds = time.perf_counter() - started
    return list(results), wall_seconds


def parse_concurrency(text: str) -> list[int]:
    """Parse ``"1,4,8"`` into a sweep of positive concurrency levels."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"concurrency levels must be >= 1: {text!r}")
    return levels


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options; see ``--help``."""
    parser = argparse.ArgumentParser(description="Benchmark an OpenAI-compatible streaming endpoint.")
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:9997/v1")
    parser.add_argument("--model", required=True, help="model name/uid sent in each request")
    parser.add_argument("--endpoint", choices=sorted(ENDPOINT_PATHS), default="chat")
    parser.add_argument("--num-prompts", type=int, default=64, help="measured requests per level")
    parser.add_argument(
        "--concurrency",
        type=parse_concurrency,
        default=[1],
        help="max in-flight requests; a comma list such as 1,4,8 runs a sweep",
    )
    parser.add_argument(
        "--request-rate",
        type=float,
        default=math.inf,
        help="Poisson arrival rate in req/s (seeded); inf sends all at once",
    )
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--ignore-eos",
        action="store_true",
        help="send ignore_eos: true so every request generates --max-tokens",
    )
    parser.add_argument("--seed", type=int, default=0, help="selects prompts and arrival times")
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="requests sent first and excluded from stats",
    )
    parser.add_argument("--api-key", default=None, help="sent as a Bearer token")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-request seconds")
    parser.add_argument("--json-out", type=Path, default=None, help="write results as JSON")
    return parser.parse_args(argv)


def _settings(args: argparse.Namespace, concurrency: int) -> dict[str, Any]:
    """JSON-safe run settings; the API key is deliberately left out."""
    return {
        "base_url": args.base_url,
        "model": args.model,
        "endpoint": args.endpoint,
        "num_prompts": args.num_prompts,
        "concurrency": concurrency,
        "request_rate": None if math.isinf(args.request_rate) else args.request_rate,
        "max_tokens": args.max_tokens,
        "ignore_eos": args.ignore_eos,
        "seed": args.seed,
        "warmup": args.warmup,
    }


async def _warm_up(args: argparse.Namespace) -> None:
    """Send ``--warmup`` unmeasured requests so cold-start costs skip the stats.

    Warm-up prompts come from a different seed than the measured set so that
    they do not pre-fill any prefix cache with the measured prompts.
    """
    prompts = build_prompts(args.warmup, args.seed + 1)
    results, _ = await run_benchmark(
        args.base_url,
        args.model,
        args.endpoint,
        prompts,
        max(args.concurrency),
        args.max_tokens,
        ignore_eos=args.ignore_eos,
        api_key=args.api_key,
        timeout=args.timeout,
    )
    failed = [r for r in results if not r.ok]
    if failed:
        print(
            f"warning: {len(failed)}/{len(results)} warm-up requests failed: {failed[0].error}",
            file=sys.stderr,
        )


async def run_sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the measured prompt set once per concurrency level, printing tables."""
    if args.warmup > 0:
        await _warm_up(args)
    prompts = build_prompts(args.num_prompts, args.seed)
    runs: list[dict[str, Any]] = []
    for concurrency in args.concurrency:
        results, wall_seconds = await run_benchmark(
            args.base_url,
            args.model,
            args.endpoint,
            prompts,
            concurrency,
            args.max_tokens,
            request_rate=args.request_rate,
            ignore_eos=args.ignore_eos,
            api_key=args.api_key,
            arrival_seed=args.seed,
            timeout=args.timeout,
        )
        summary = summarize(results, wall_seconds)
        print(f"\n=== concurrency={concurrency} ===")
        print(format_table(summary))
        runs.append({"settings": _settings(args, concurrency), "summary": summary})
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; exits non-zero when a level completed no request at all."""
    args = parse_args(argv)
    runs = asyncio.run(run_sweep(args))
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({"runs": runs}, indent=2, allow_nan=False))
    return 0 if all(run["summary"]["completed"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
