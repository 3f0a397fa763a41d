"""The vLLM and SGLang servers' own counters that reach ``xinference:engine_<name>``: canned ``/metrics`` pages in
each server's text format (the lines a real server prints, label sets included) go through ``parse_metrics`` with
the engine's declared names, as ``ManagedServerEngine.refresh_stats`` does at every health check."""

from __future__ import annotations

from xinference.engines.managed.engine import ManagedServerEngine, parse_metrics
from xinference.engines.sglang.engine import SGLangEngine
from xinference.engines.vllm.engine import VLLMEngine

# vLLM >= 0.9.2 with data parallelism: one series per engine.
VLLM_PAGE = "\n".join(
    [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
        'vllm:num_requests_running{engine="1",model_name="m"} 1.0',
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25',
        'vllm:prompt_tokens_total{engine="0",model_name="m"} 120.0',
        'vllm:prompt_tokens_total{engine="1",model_name="m"} 30.0',
    ]
)
# A vLLM from before the rename (0.6 - 0.9.1), one engine.
OLD_VLLM_PAGE = "\n".join(
    [
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.125',
    ]
)
SGLANG_PAGE = "\n".join(
    [
        "# HELP sglang:token_usage The token usage",
        "# TYPE sglang:token_usage gauge",
        'sglang:token_usage{model_name="m"} 0.28',
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        'sglang:num_running_reqs{model_name="m"} 2.0',
    ]
)


def _stats(engine: type[ManagedServerEngine], page: str) -> dict[str, float]:
    """What ``refresh_stats`` keeps: our names for the server's metrics found on ``page``."""
    found = parse_metrics(page, set(engine.metric_names.values()), engine.averaged_metrics)
    return {ours: found[theirs] for ours, theirs in engine.metric_names.items() if theirs in found}


def test_vllm_kv_cache_usage_is_averaged_over_its_engines() -> None:
    stats = _stats(VLLMEngine, VLLM_PAGE)
    assert stats["kv_cache_usage"] == 0.375  # a fraction: the engines' mean, never their sum
    assert stats["requests_running"] == 4.0 and stats["prompt_tokens"] == 150.0  # counts stay summed
    assert "gpu_cache_usage" not in stats


def test_older_vllm_reports_its_gpu_cache_usage() -> None:
    assert _stats(VLLMEngine, OLD_VLLM_PAGE) == {"gpu_cache_usage": 0.125}


def test_sglang_token_usage_is_collected() -> None:
    assert _stats(SGLangEngine, SGLANG_PAGE) == {"requests_running": 2.0, "token_usage": 0.28}


def test_averaged_metrics_are_among_the_collected_ones() -> None:
    for engine in (VLLMEngine, SGLangEngine):
        assert engine.averaged_metrics <= set(engine.metric_names.values())


def test_parse_metrics_sums_unless_averaged() -> None:
    page = 'g{a="1"} 0.5\ng{a="2"} 0.75\nc{a="1"} 2\nc{a="2"} 3'
    assert parse_metrics(page, {"g", "c"}) == {"g": 1.25, "c": 5.0}
    assert parse_metrics(page, {"g", "c"}, frozenset({"g", "absent"})) == {"g": 0.625, "c": 5.0}
