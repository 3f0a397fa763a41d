"""``scripts/gpu_bench.py``, the GPU-shaped benchmark: its pure parts (no GPU here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from benchmark.compare_images import OURS, RAW, summarize_rounds


def load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "scripts" / "gpu_bench.py"
    spec = importlib.util.spec_from_file_location("gpu_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_bench = load()


def test_the_raw_server_gets_no_api_key_and_no_copied_key() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "secret", "--port", "1", "--api-key=again", "--x"]
    assert gpu_bench.without_api_key(argv) == ["python", "-m", "sglang.launch_server", "--port", "1", "--x"]
    env = {"VLLM_API_KEY": "k", "SGLANG_API_KEY": "k", "VLLM_USE_V1": "1", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/"}
    assert gpu_bench.copied_env(env) == {"VLLM_USE_V1": "1", "CUDA_VISIBLE_DEVICES": "0"}


def test_parts_and_rounds_are_checked() -> None:
    args = gpu_bench.parse_args(["--parts", "vLLM,images", "--rounds", "2"])
    assert args.parts == ["vLLM", "images"] and args.rounds == 2
    assert gpu_bench.parse_args([]).parts == list(gpu_bench.PARTS)
    for bad in (["--parts", "TensorRT"], ["--parts", ","], ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            gpu_bench.parse_args(bad)


def test_summary_rows_show_figures_or_the_error() -> None:
    interval = {"value": 0.99, "low": 0.97, "high": 1.01, "rounds": 3, "kind": "ratio"}
    added = {"value": 1.5, "low": 0.5, "high": 2.5, "rounds": 3, "kind": "difference"}
    images = [{RAW: {"seconds_per_image": 0.1, "digests": ["a"]}, OURS: {"seconds_per_image": 0.11, "digests": ["a"]}}]
    results = {
        "vLLM": {
            "levels": [
                {"concurrency": 1, "intervals": {"output_throughput_ratio": interval, "ttft_p50_added_ms": added}}
            ]
        },
        "SGLang": {"error": "RuntimeError: no env"},
        "images": {"summary": summarize_rounds(images)},
    }
    rows = gpu_bench.summary_rows(results)
    assert ["vLLM", "output tok/s ours/raw, c=1", "0.990 [0.970, 1.010]"] in rows
    assert ["vLLM", "TTFT p50 added ms, c=1", "+1.5 [+0.5, +2.5]"] in rows
    assert ["SGLang", "error", "RuntimeError: no env"] in rows
    assert ["images", "s/image raw / ours", "0.100 / 0.110"] in rows
