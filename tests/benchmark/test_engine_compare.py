"""The pure parts of the vLLM and MLX comparisons and of the per-engine launch figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark import _engines, _raw_mlx, _raw_vllm, engine_launch
from benchmark.bench_serving import build_body
from benchmark.compare_engine import CompareConfig, format_comparison
from benchmark.compare_mlx import resolved_settings
from benchmark.compare_vllm import launch_options, managed_platform_cpu

PLATFORM_ARGV = [
    "/envs/vllm/bin/python",
    "-m",
    "vllm.entrypoints.openai.api_server",
    "--model",
    "/w/smollm2",
    "--served-model-name",
    "bench-vllm",
    "--host",
    "127.0.0.1",
    "--port",
    "41234",
    "--tensor-parallel-size",
    "1",
    "--max-model-len",
    "2048",
    "--dtype",
    "bfloat16",
    "--enforce-eager",
    "--disable-uvicorn-access-log",
]


def test_raw_vllm_command_is_the_platforms_with_its_own_port_and_name() -> None:
    command = _raw_vllm.raw_command(PLATFORM_ARGV, 5000, "raw")
    assert command[command.index("--port") + 1] == "5000"
    assert command[command.index("--served-model-name") + 1] == "raw"
    changed = [(a, b) for a, b in zip(PLATFORM_ARGV, command, strict=True) if a != b]
    assert changed == [("bench-vllm", "raw"), ("41234", "5000")]


def test_raw_vllm_command_handles_equals_form_and_missing_flags() -> None:
    command = _raw_vllm.raw_command(["python", "-m", _raw_vllm.MODULE, "--port=1", "--dtype", "bfloat16"], 7, "r")
    assert command == [
        "python",
        "-m",
        _raw_vllm.MODULE,
        "--port",
        "7",
        "--dtype",
        "bfloat16",
        "--served-model-name",
        "r",
    ]


def test_raw_vllm_env_copies_engine_variables_but_never_the_api_key() -> None:
    env = _raw_vllm.copied_env(
        {
            "VLLM_API_KEY": "secret",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            "PATH": "/bin",
            "HOME": "/root",
            "VLLM_USE_AOT_COMPILE": "0",
        }
    )
    assert env == {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_USE_AOT_COMPILE": "0"}


def test_find_server_raises_when_the_platform_has_no_vllm_process() -> None:
    with pytest.raises(RuntimeError, match="no vllm"):
        _raw_vllm.find_server([])


def test_vllm_launch_options_follow_the_shared_config() -> None:
    options = launch_options(CompareConfig(n_parallel=3, n_ctx=1024), kv_gib=2)
    assert options == {"max_model_len": 1024, "max_num_seqs": 3, "cpu_kvcache_space_gib": 2}


def test_managed_platform_cpu_counts_api_and_actor_and_compares_engines() -> None:
    cpu = {"ours": {"api": 0.2, "actor": 0.5, "engine": 12.0}, "raw": {"engine": 11.0}}
    assert managed_platform_cpu(cpu) == pytest.approx({"api": 0.2, "actor": 0.5, "total": 0.7, "engine_minus_raw": 1.0})
    assert managed_platform_cpu({"ours": {}, "raw": {}})["total"] is None
    idle = {"api": 0.05, "actor": 0.1, "engine": 0.3}  # the level's idle_cpu_ms_per_token
    assert managed_platform_cpu(cpu, idle)["idle_background"] == pytest.approx(0.15)


def test_mlx_server_command_uses_the_platforms_batch_settings(tmp_path: Path) -> None:
    command = _raw_mlx.server_command(
        "/envs/mlx/bin/python", tmp_path, 8123, max_num_seqs=16, prefill_step_size=512, prompt_cache_size=0
    )
    assert command[:3] == ["/envs/mlx/bin/python", "-m", "mlx_lm.server"]
    pairs = dict(zip(command[3::2], command[4::2], strict=True))
    assert pairs["--decode-concurrency"] == "16" and pairs["--prompt-concurrency"] == "8"
    assert pairs["--prefill-step-size"] == "512" and pairs["--port"] == "8123" and pairs["--host"] == "127.0.0.1"
    assert pairs["--prompt-cache-size"] == "0"  # prefix reuse off on the platform: off on the raw side too


def test_mlx_server_env_preloads_openblas_with_the_platforms_threads() -> None:
    env = _raw_mlx.server_env(2, Path("/usr/lib/libopenblas.so.0"))
    assert env["LD_PRELOAD"] == "/usr/lib/libopenblas.so.0" and env["OPENBLAS_NUM_THREADS"] == "2"
    assert "LD_PRELOAD" not in _raw_mlx.server_env(2, None)


def _model_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"eos_token_id": 2, "rope_parameters": {"rope_theta": 1e5}}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|end|>"}))
    (folder / "tokenizer.json").write_text(
        json.dumps({"added_tokens": [{"id": 9, "content": "<|end|>"}, {"id": 1, "content": "<s>"}]})
    )
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_patched_model_dir_links_the_weights_and_lifts_the_overrides(tmp_path: Path) -> None:
    source = _model_folder(tmp_path / "model")
    patched = _raw_mlx.patched_model_dir(source, tmp_path / "patched", {"rope_theta": 1e5})
    assert (patched / "model.safetensors").is_symlink()
    assert (patched / "model.safetensors").read_bytes() == b"weights"
    config = json.loads((patched / "config.json").read_text())
    assert config["rope_theta"] == 1e5 and config["eos_token_id"] == 2
    assert "rope_theta" not in json.loads((source / "config.json").read_text())
    assert _raw_mlx.patched_model_dir(source, tmp_path / "unused", {}) == source


def test_eos_ids_come_from_both_configs_and_the_tokenizer(tmp_path: Path) -> None:
    ids = _raw_mlx.eos_token_ids(_model_folder(tmp_path / "model"))
    assert ids == [2, 7, 9]
    assert _raw_mlx.eos_bias(ids) == {"logit_bias": {"2": -100.0, "7": -100.0, "9": -100.0}}


def test_extra_body_reaches_every_request() -> None:
    body = build_body("chat", "m", "hi", 8, False, extra_body=_raw_mlx.eos_bias([2]))
    assert body["logit_bias"] == {"2": -100.0} and "ignore_eos" not in body
    assert "logit_bias" not in build_body("chat", "m", "hi", 8, True)


def test_mlx_settings_prefer_what_the_platform_reports() -> None:
    reported = {"max_num_seqs": 6, "prefill_step_size": 256, "prompt_cache_size": 0, "n_threads": 3}
    assert resolved_settings(reported, CompareConfig(n_parallel=4), cpu_count=2) == reported
    fallback = resolved_settings({}, CompareConfig(n_parallel=4), cpu_count=2)
    assert fallback == {"max_num_seqs": 4, "prefill_step_size": 512, "prompt_cache_size": 10, "n_threads": 2}


def test_comparison_table_shows_itl_side_by_side() -> None:
    side = {"output_throughput": 100.0, "ttft_ms_p50": 20.0, "tpot_ms_p50": 9.0, "itl_ms_p50": 8.5, "itl_ms_p99": 30.25}
    ours = {**side, "itl_ms_p50": 9.0, "itl_ms_p99": 41.0}
    level = {
        "concurrency": 1,
        "raw": side,
        "ours": ours,
        "rounds": [],
        "compare": {"output_throughput_ratio": 0.99, "ttft_p50_added_ms": 1.0, "tpot_p50_ratio": 1.01},
    }
    table = format_comparison([level])
    assert "ITL50 raw/ours" in table.splitlines()[0] and "ITL99 raw/ours" in table.splitlines()[0]
    assert "8.5/9.0" in table and "30.2/41.0" in table


def test_launch_plan_uses_the_gguf_for_llama_cpp_and_small_contexts_elsewhere() -> None:
    assert engine_launch.launch_plan("llama.cpp")[0] == "smollm2-instruct"
    name, options = engine_launch.launch_plan("vLLM")
    assert name == engine_launch.PYTORCH_NAME and options["max_model_len"] == 2048


def test_install_figure_without_install_reports_the_env_state(tmp_path: Path) -> None:
    assert engine_launch.install_figure("Transformers", False, tmp_path) == {
        "status": "main environment",
        "seconds": None,
    }
    missing = engine_launch.install_figure("vLLM", False, tmp_path)
    assert missing["installed"] is False and missing["seconds"] is None


def test_envs_dir_follows_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))
    assert _engines.envs_dir() == tmp_path
    monkeypatch.delenv("XINFERENCE_ENVS_DIR")
    assert _engines.envs_dir() == Path(_engines.DEFAULT_ENVS_DIR).expanduser()


def test_prompt_tokens_are_compared_only_where_both_sides_completed_alike() -> None:
    from benchmark.compare_engine import RunRecord, Step, ab_result
    from benchmark.stats import RequestResult

    def run(side: str, ok: int, failed: int) -> RunRecord:
        results = [
            RequestResult(start_time=0.0, ok=True, ttft=0.1, e2e=1.0, completion_tokens=4, prompt_tokens=10)
            for _ in range(ok)
        ] + [RequestResult(start_time=0.0, error="503") for _ in range(failed)]
        return RunRecord(Step(0, 4, side), results, 1.0)

    config = CompareConfig(rounds=1, concurrency=(4,), max_tokens=4)
    assert ab_result(config, [run("raw", 4, 0), run("ours", 2, 2)])["prompt_tokens_equal"] is True
    assert ab_result(config, [run("raw", 4, 0), run("ours", 4, 0)])["prompt_tokens_equal"] is True
