"""SGLang's fit, environment recipe, GPU count and server arguments (no server started: SGLang has no CPU build)."""

from __future__ import annotations

import asyncio

import pytest

from tests.machines import linux, mac
from xinference.engines.sglang.config import SGLangConfig
from xinference.engines.sglang.engine import NO_CPU_BUILD, SGLangEngine
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.registry import ModelRegistry

CPU = linux()
CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=2, gpu_name="A100", vram=40, vram_free=39)
MAC = mac(cores=8, ram_total=16, ram_free=10, unified_gpu=False)
REGISTRY = ModelRegistry()
QWEN3 = REGISTRY.get("qwen3")


def _spec(fmt: str):  # type: ignore[no-untyped-def]
    return next(s for s in QWEN3.model_specs if s.model_format == fmt)


def _engine(hardware, **options):  # type: ignore[no-untyped-def]
    return SGLangEngine(
        model_uid="q",
        family=QWEN3,
        spec=_spec("pytorch"),
        quantization="none",
        model_path="/m",
        config=SGLangEngine.parse_config(options),
        hardware=hardware,
    )


def test_gpu_only() -> None:
    assert SGLangEngine.env_recipe(CUDA).packages == ("sglang[all]",)
    assert SGLangEngine.env_recipe(CPU) is None and SGLangEngine.env_recipe(MAC) is None
    assert SGLangEngine.match(QWEN3, _spec("pytorch"), CPU).reason == NO_CPU_BUILD
    assert NO_CPU_BUILD == "SGLang has no CPU build; it needs an NVIDIA GPU"
    assert "runs macOS" in SGLangEngine.match(QWEN3, _spec("pytorch"), MAC).reason
    assert SGLangEngine.match(QWEN3, _spec("awq"), CUDA)
    assert "not ggufv2" in SGLangEngine.match(QWEN3, _spec("ggufv2"), CUDA).reason


def test_load_on_cpu_says_why() -> None:
    with pytest.raises(LaunchFailed, match="SGLang cannot start on this worker: SGLang has no CPU build"):
        asyncio.run(_engine(CPU).load())


def test_arguments() -> None:
    config = SGLangEngine.parse_config(
        {"tp_size": 4, "mem_fraction_static": 0.8, "context_length": 32768, "disable_radix_cache": True}
    )
    assert isinstance(config, SGLangConfig)
    args = config.to_cli_args(model_path="/m", served_model_name="q", host="127.0.0.1", port=30000)
    joined = " ".join(args)
    for part in (
        "--model-path /m",
        "--tp-size 4",
        "--mem-fraction-static 0.8",
        "--context-length 32768",
        "--disable-radix-cache",
        "--port 30000",
    ):
        assert part in joined
    assert SGLangEngine.gpus_needed(config) == 4
    assert SGLangEngine.gpus_needed(SGLangConfig()) is None
    assert SGLangEngine.gpus_needed(SGLangConfig(tp_size=2, dp_size=2)) == 4


def test_server_command_and_parsers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    args = _engine(CUDA).server_args(python="/env/bin/python", port=31000, api_key="secret")
    assert args[:3] == ["/env/bin/python", "-m", "sglang.launch_server"]
    joined = " ".join(args)
    for part in (
        "--served-model-name q",
        "--host 127.0.0.1",
        "--port 31000",
        "--tp-size 2",
        "--api-key secret",
        "--tool-call-parser qwen25",
        "--reasoning-parser qwen3",
    ):
        assert part in joined
    chosen = _engine(CUDA, tool_call_parser="qwen", tp_size=1).server_args(python="p", port=1, api_key="k")
    assert "--tool-call-parser qwen" in " ".join(chosen) and "--tp-size 1" in " ".join(chosen)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-3f2a")  # the worker gave this replica one of the two GPUs
    assert "--tp-size 1" in " ".join(_engine(CUDA).server_args(python="p", port=1, api_key="k"))


def test_bad_options_are_400() -> None:
    with pytest.raises(InvalidRequest, match="does not take a launch option 'max_model_len'"):
        SGLangEngine.parse_config({"max_model_len": 4096})


def test_image_limit_is_a_json_argument() -> None:
    config = SGLangEngine.parse_config({"limit_mm_data_per_request": {"image": 4, "video": 0}})
    assert isinstance(config, SGLangConfig)
    args = config.to_cli_args(model_path="/m", served_model_name="q", host="127.0.0.1", port=1)
    at = args.index("--limit-mm-data-per-request")
    assert args[at + 1] == '{"image":4,"video":0}'
    assert "--limit-mm-data-per-request" not in SGLangConfig().to_cli_args(
        model_path="/m", served_model_name="q", host="h", port=1
    )
    for bad in ({"images": 2}, {"image": -1}, {"image": "many"}):
        with pytest.raises(InvalidRequest, match="limit_mm_data_per_request"):
            SGLangEngine.parse_config({"limit_mm_data_per_request": bad})
