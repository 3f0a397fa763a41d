"""llama.cpp's own parameters by dotted path, checked against the installed xllamacpp's tree; GPU layers sized from
the GGUF header when ``n_gpu_layers`` is unset; the GPU build's environment recipe."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.machines import GIB, linux, mac
from xinference.cli.options import parse_engine_options
from xinference.engines.llama_cpp.config import ALL_LAYERS, estimate_gpu_layers
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.params_tree import load_tree
from xinference.errors import InvalidRequest
from xinference.hardware import detect_hardware
from xinference.model.download import resolve_model_path
from xinference.model.gguf_info import read_gguf_info
from xinference.model.registry import ModelRegistry


@pytest.fixture(scope="module")
def smol_path() -> str:
    return resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1")


def parse(options: dict) -> dict:
    return LlamaCppEngine.parse_config(options).params  # type: ignore[attr-defined, no-any-return]


# -- the tree and its validation --------------------------------------------------------------------------------
def test_the_tree_is_read_from_xllamacpp() -> None:
    tree = load_tree()
    assert tree is not None
    assert tree.leaves["sampling.top_k"].annotation == "int"
    assert tree.leaves["speculative.types"].enum is not None
    assert "speculative.draft.mparams.path" in tree.leaves


def test_dotted_nested_and_mixed_forms_agree() -> None:
    dotted = parse({"sampling.top_k": 20, "speculative.draft.n_max": 6, "speculative.types": "ngram-simple"})
    nested = parse({"sampling": {"top_k": 20}, "speculative": {"draft": {"n_max": 6}, "types": ["ngram_simple"]}})
    assert (
        dotted == nested == {"sampling.top_k": 20, "speculative.draft.n_max": 6, "speculative.types": ["ngram_simple"]}
    )


def test_values_are_converted_to_the_fields_types() -> None:
    # the CLI hands over strings: each becomes what its field holds
    params = parse(
        {
            "sampling.temp": "0.3",
            "ctx_shift": "true",
            "tensor_split": "0.6,0.4",
            "split_mode": "ROW",
            "sampling.seed": "42",
            "default_template_kwargs": '{"enable_thinking": false}',
        }
    )
    assert params == {
        "sampling.temp": 0.3,
        "ctx_shift": True,
        "tensor_split": [0.6, 0.4],
        "split_mode": "row",
        "sampling.seed": 42,
        "default_template_kwargs": {"enable_thinking": False},
    }


def test_moved_paths_of_older_xllamacpp_still_work() -> None:
    assert parse({"speculative.n_max": 8, "speculative.model.path": "/x.gguf"}) == {
        "speculative.draft.n_max": 8,
        "speculative.draft.mparams.path": "/x.gguf",
    }


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"sampling.top_kk": 3}, "no parameter 'sampling.top_kk'; did you mean sampling.top_k"),
        ({"speculative": {"nmax": 3}}, "did you mean speculative.draft.n_max"),
        ({"n_thread": 2}, "did you mean n_threads"),
        ({"sampling.top_k": "many"}, "'sampling.top_k' takes an integer, got 'many'"),
        ({"ctx_shift": "maybe"}, "takes true or false"),
        ({"speculative.types": "telepathy"}, "takes one of: none, draft_simple"),
        ({"port": 8080}, "'port' is managed by the platform"),
        ({"model.path": "/etc/passwd"}, "'model.path' is managed by the platform"),
        ({"api_keys": ["k"]}, "managed by the platform"),
        ({"cpuparams.n_threads": 2}, "with the launch option 'n_threads'"),
        ({"sampling.logit_bias": []}, "cannot be given as a launch option"),
    ],
)
def test_bad_options_are_400s_naming_the_path(options: dict, needle: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(options)
    assert caught.value.status_code == 400
    assert needle in caught.value.message


def test_cli_takes_dotted_names() -> None:
    assert parse_engine_options(["--sampling.top_k", "20", "--speculative.draft.n-max=4"]) == {
        "sampling.top_k": 20,
        "speculative.draft.n_max": 4,
    }


# -- they reach llama.cpp ---------------------------------------------------------------------------------------
def test_options_reach_xllamacpps_params(smol_path: str) -> None:
    family = ModelRegistry().get("smollm2-instruct")
    engine = LlamaCppEngine(
        model_uid="opts",
        family=family,
        spec=family.model_specs[0],
        quantization="Q4_1",
        model_path=smol_path,
        config=LlamaCppEngine.parse_config(
            {
                "n_ctx": 1024,
                "n_parallel": 1,
                "sampling.top_k": 1,
                "sampling": {"temp": 0.0},
                "speculative.draft.n_max": 5,
            }
        ),
        hardware=detect_hardware(),
    )
    asyncio.run(engine.load())
    try:
        # read back from the CommonParams handed to llama.cpp, not echoed from the request
        assert engine.resolved.params == {
            "cache_ram_mib": 1024,
            "sampling.top_k": 1,
            "sampling.temp": 0.0,
            "speculative.draft.n_max": 5,
        }
        assert engine.resolved.n_gpu_layers == 0 and engine.resolved.gpu_offload == "none (no GPU)"
        # top_k=1, temp=0 as server defaults: a request that sets no sampling is greedy, hence repeatable
        request = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
        first = asyncio.run(engine.chat(request))["choices"][0]["message"]["content"]
        assert all(asyncio.run(engine.chat(request))["choices"][0]["message"]["content"] == first for _ in range(2))
    finally:
        asyncio.run(engine.unload())


@pytest.mark.slow
def test_launch_over_http_validates_and_reports_params(local_server) -> None:
    api = local_server.api
    bad = httpx.post(
        f"{api}/models",
        timeout=60,
        json={"model_name": "smollm2-instruct", "model_uid": "opts-bad", "sampling.top_kk": 3},
    )
    assert bad.status_code == 400
    assert "sampling.top_k" in bad.json()["error"]["message"]
    assert bad.json()["error"]["param"] == "sampling.top_kk"
    launched = httpx.post(
        f"{api}/models",
        timeout=120,
        json={
            "model_name": "smollm2-instruct",
            "model_uid": "opts-good",
            "n_ctx": 1024,
            "n_parallel": 1,
            "sampling.top_k": 7,
            "speculative": {"draft": {"n_min": 1}},
        },
    )
    assert launched.status_code == 200, launched.text
    try:
        config = httpx.get(f"{api}/models/opts-good", timeout=10).json()["engine_config"]
        assert config["params"] == {"cache_ram_mib": 1024, "sampling.top_k": 7, "speculative.draft.n_min": 1}
    finally:
        httpx.delete(f"{api}/models/opts-good", timeout=60)


# -- GPU layers -------------------------------------------------------------------------------------------------
def test_gpu_layers_estimate_from_the_gguf_header(smol_path: str) -> None:
    info = read_gguf_info(smol_path)
    assert info.block_count == 30 and info.n_head_kv == 3 and info.n_vocab == 49152
    assert 130e6 < info.n_params < 140e6  # SmolLM2-135M
    everything = estimate_gpu_layers(info, 80 * GIB, n_ctx=8192)
    assert everything.layers == ALL_LAYERS and "all 30 layers" in everything.note
    # room for the reserve, the embeddings and ten blocks (weights + their KV cache) only
    kv_per_layer = 8192 * info.n_head_kv * (info.key_length + info.value_length) * 2
    room = (1 << 30) + info.other_bytes + 10 * (info.layer_bytes + kv_per_layer) + 1000
    partial = estimate_gpu_layers(info, room, n_ctx=8192)
    assert partial.layers == 10 and "10 of 30 layers" in partial.note
    # a q8_0 KV cache takes about half: more blocks fit in the same room
    assert estimate_gpu_layers(info, room, n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0").layers > 10
    assert estimate_gpu_layers(info, GIB // 2, n_ctx=8192).layers == 0


def test_unset_gpu_layers_are_estimated_on_a_cuda_worker(smol_path: str) -> None:
    family = ModelRegistry().get("smollm2-instruct")

    def engine_on(hardware, **options) -> LlamaCppEngine:
        return LlamaCppEngine(
            model_uid="gpu",
            family=family,
            spec=family.model_specs[0],
            quantization="Q4_1",
            model_path=smol_path,
            config=LlamaCppEngine.parse_config(options),
            hardware=hardware,
        )

    # a hardware shape of a GPU worker (this machine has none); only the sizing runs, nothing loads
    gpu = engine_on(linux(gpus=1, vram=8, vram_free=7))
    resolved = gpu.config.resolve(cpu_count=2, context_length=8192, gpu=True)  # type: ignore[attr-defined]
    auto = gpu._auto_gpu_layers(resolved)
    assert auto is not None and auto.layers == ALL_LAYERS and "7.0 GiB free" in auto.note
    assert engine_on(linux(gpus=1), n_gpu_layers=12)._auto_gpu_layers(resolved) is None  # the user's choice
    assert engine_on(mac())._auto_gpu_layers(resolved) is None  # unified memory: every layer on Metal
    assert engine_on(linux())._auto_gpu_layers(resolved) is None


# -- the GPU build's environment --------------------------------------------------------------------------------
def test_gpu_build_env_recipe_follows_the_index_setting(monkeypatch) -> None:
    monkeypatch.delenv("XINFERENCE_LLAMA_CPP_INDEX_URL", raising=False)
    assert LlamaCppEngine.env_recipe(linux(gpus=1)) is None  # the main environment, as before
    monkeypatch.setenv("XINFERENCE_LLAMA_CPP_INDEX_URL", "https://wheels.example/cu128")
    recipe = LlamaCppEngine.env_recipe(linux(gpus=1))
    assert recipe is not None and recipe.overlay and recipe.packages == ("xllamacpp",)
    assert recipe.pip_args[:2] == ("--index-url", "https://wheels.example/cu128")
    assert LlamaCppEngine.env_recipe(linux()) is None  # a CPU worker keeps PyPI's CPU build


# -- the measured defaults (benchmark/llama_defaults.py, doc/performance.md) ------------------------------------------
def test_defaults_are_the_measured_ones_for_the_common_chat_case() -> None:
    from xinference.engines.llama_cpp.config import (
        DEFAULT_CPU_SLOTS,
        DEFAULT_GPU_SLOTS,
        MAX_DEFAULT_CTX,
        LlamaCppConfig,
    )

    cpu = LlamaCppConfig().resolve(cpu_count=2, context_length=131072, gpu=False)
    # unified KV: each request may use the whole context (per-slot KV measured no cache or speed gain)
    assert (cpu.kv_unified, cpu.cache_prompt, cpu.n_parallel, cpu.n_ctx) == (
        True,
        True,
        DEFAULT_CPU_SLOTS,
        MAX_DEFAULT_CTX,
    )
    assert (DEFAULT_CPU_SLOTS, DEFAULT_GPU_SLOTS, MAX_DEFAULT_CTX) == (4, 8, 8192)
    # batch sizes are llama.cpp's own (2048/512); its host-memory prompt cache is capped at 1 GiB (8 GiB grew a
    # model process by ~1 MiB per fresh prompt in the soak), and a value given at launch wins
    assert cpu.n_batch is None and cpu.n_ubatch is None and cpu.params["cache_ram_mib"] == 1024
    given = LlamaCppConfig(cache_ram_mib=0).resolve(cpu_count=2, context_length=2048, gpu=False)
    assert given.params["cache_ram_mib"] == 0
    assert LlamaCppConfig().resolve(cpu_count=2, context_length=2048, gpu=True).n_parallel == DEFAULT_GPU_SLOTS


def test_the_default_params_reach_llama_cpp_with_its_own_batch_sizes(smol_path: str) -> None:
    import xllamacpp

    engine = LlamaCppEngine.__new__(LlamaCppEngine)
    engine.model_path = smol_path
    engine.family = ModelRegistry().get("smollm2-instruct")
    resolved = LlamaCppEngine.parse_config({}).resolve(cpu_count=2, context_length=8192, gpu=False)
    params = engine._build_params(xllamacpp, resolved)
    load_tree().apply(params, resolved.params)  # as LlamaCppEngine.load does
    assert (params.kv_unified, params.cache_prompt, params.n_parallel) == (True, True, 4)
    assert (params.n_batch, params.n_ubatch, params.n_cache_reuse) == (2048, 512, 0)
    assert params.cache_ram_mib == 1024
