"""vLLM-CPU's memory, sized by the platform (``xinference/engines/vllm/cpu_memory.py``), over machine shapes.

The NUMA node of the 24 GiB / 2-core test machines reports 9.59 GiB (7.89 available) although the machine has 24:
vLLM 0.32 checks its node, so the node's numbers bound the KV cache there. No server is started here;
``test_vllm.py`` launches the real one without a memory option.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.machines import linux
from xinference.engines.memory import check_fit
from xinference.engines.vllm import cpu_memory
from xinference.engines.vllm.config import ResolvedVLLMConfig
from xinference.engines.vllm.cpu_memory import CPU_RUNTIME_BYTES, KV_SHARE, NodeMemory, plan_cpu_memory
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest
from xinference.model.registry import ModelRegistry

GIB = 1 << 30
MIB = 1 << 20
#: SmolLM2-135M: 30 layers x 3 KV heads x 64 x (K, V) x bfloat16
SMOL_KV_PER_TOKEN = 30 * 3 * 64 * 2 * 2
SMOL_WEIGHTS = 538 * MIB  # its float32 safetensors
TEST_NODE = NodeMemory(node=0, total=int(9.59 * GIB), available=int(7.89 * GIB))
SMOLLM2 = ModelRegistry().get("smollm2-instruct")


def _smol(**kwargs: object) -> cpu_memory.CpuMemoryPlan:
    options: dict = {"weights": SMOL_WEIGHTS, "kv_per_token": SMOL_KV_PER_TOKEN, "context": 8192, **kwargs}
    return plan_cpu_memory(**options)


def test_the_test_machine_is_bounded_by_its_numa_node() -> None:
    plan = _smol(free_ram=22 * GIB, node=TEST_NODE)
    left = TEST_NODE.available - SMOL_WEIGHTS - CPU_RUNTIME_BYTES
    assert plan.problem is None
    assert plan.kv_cache_bytes == int(left * KV_SHARE) // MIB * MIB  # 256 sequences would need 45 GiB: the share
    assert 2 * GIB < plan.kv_cache_bytes < 2.3 * GIB
    # what vLLM checks at KV allocation: the cache fits in the node after the weights and its processes
    assert plan.kv_cache_bytes + SMOL_WEIGHTS + CPU_RUNTIME_BYTES < TEST_NODE.available
    assert plan.max_model_len == 8192 and "NUMA node 0" in plan.note and "256 sequences" in plan.note


def test_a_large_machine_gets_what_the_sequences_need() -> None:
    node = NodeMemory(node=0, total=256 * GIB, available=250 * GIB)
    plan = _smol(free_ram=250 * GIB, node=node)
    assert plan.kv_cache_bytes == SMOL_KV_PER_TOKEN * 8192 * 256 == 45 * GIB  # less than half of what is left
    small = _smol(free_ram=250 * GIB, node=node, max_num_seqs=4)
    assert small.kv_cache_bytes == SMOL_KV_PER_TOKEN * 8192 * 4
    assert "worker's free RAM" in _smol(free_ram=100 * GIB, node=node).note  # the smaller of the two counts


def test_one_full_sequence_is_the_floor() -> None:
    # 0.98 GiB left: the share (0.49 GiB) is below one 32k-token sequence (0.70 GiB), so the cache holds one
    plan = _smol(free_ram=int(4.5 * GIB), context=32768)
    assert plan.problem is None and plan.kv_cache_bytes == -(-SMOL_KV_PER_TOKEN * 32768 // MIB) * MIB


def test_too_little_memory_is_refused_with_the_numbers() -> None:
    plan = _smol(free_ram=3 * GIB, node=NodeMemory(node=1, total=4 * GIB, available=int(2.5 * GIB)))
    assert plan.problem is not None
    for part in (
        "needs ~3.70 GiB",
        "weights 0.53 GiB",
        "its processes 3.00 GiB",
        "0.18 GiB for one sequence of 8192 tokens",
        "only 2.50 GiB are usable (available on NUMA node 1 of 4.00 GiB)",
        "max_model_len",
    ):
        assert part in plan.problem, plan.problem
    with pytest.raises(InvalidRequest) as caught:
        plan.check()
    assert caught.value.status_code == 400 and caught.value.param == "cpu_kvcache_space_gib"


def test_explicit_values_win() -> None:
    given = _smol(free_ram=3 * GIB, explicit_kv_bytes=GIB)
    assert given.kv_cache_bytes == GIB and given.problem is None and "as given (cpu_kvcache_space_gib)" in given.note
    fraction = _smol(free_ram=22 * GIB, node=TEST_NODE, gpu_memory_utilization=0.5)
    assert fraction.kv_cache_bytes is None and "gpu_memory_utilization 0.5 of 9.59 GiB" in fraction.note


def test_cpu_context_caps_the_models_own() -> None:
    assert cpu_memory.cpu_context(None, 131072) == 8192
    assert cpu_memory.cpu_context(None, 2048) == 2048 and cpu_memory.cpu_context(None, None) == 4096
    assert cpu_memory.cpu_context(65536, 131072) == 65536


def _sysfs(tmp_path: Path, total_kb: int, free_kb: int) -> Path:
    node = tmp_path / "node" / "node1"
    node.mkdir(parents=True)
    (tmp_path / "node" / "node0").mkdir()
    (tmp_path / "node" / "node0" / "cpulist").write_text("0-3\n")
    (node / "cpulist").write_text("4-5,7\n")
    (node / "meminfo").write_text(
        f"Node 1 MemTotal:       {total_kb} kB\nNode 1 MemFree:        {free_kb} kB\n"
        "Node 1 Active(file):     100 kB\nNode 1 Inactive(file):   200 kB\nNode 1 SReclaimable:     300 kB\n"
    )
    return tmp_path / "node"


def test_node_memory_is_read_as_vllm_reads_it(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, 10_000_000, 5_000_000)
    found = cpu_memory.read_node_memory(cpu=7, root=root, cgroup=tmp_path / "no-cgroup")
    assert found == NodeMemory(node=1, total=10_000_000 * 1024, available=(5_000_000 + 600) * 1024)
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{4 * GIB}\n")
    (cgroup / "memory.current").write_text(f"{3 * GIB}\n")
    clamped = cpu_memory.read_node_memory(cpu=7, root=root, cgroup=cgroup)
    assert clamped == NodeMemory(node=1, total=4 * GIB, available=GIB)
    (cgroup / "memory.max").write_text("max\n")
    assert cpu_memory.read_node_memory(cpu=7, root=root, cgroup=cgroup) == found
    assert cpu_memory.read_node_memory(cpu=0, root=tmp_path / "none") is None


def test_the_model_shape_comes_from_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 30, "num_attention_heads": 9, '
        '"num_key_value_heads": 3, "hidden_size": 576, '
        '"max_position_embeddings": 8192}'
    )
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    assert cpu_memory.read_model_shape(str(tmp_path)) == cpu_memory.ModelShape(SMOL_KV_PER_TOKEN, 8192)
    assert cpu_memory.read_model_shape(str(tmp_path), kv_bytes_per_value=1).kv_per_token == SMOL_KV_PER_TOKEN // 2
    assert cpu_memory.weights_bytes(str(tmp_path)) == 1000
    assert cpu_memory.read_model_shape(str(tmp_path / "missing")) is None


def _engine(tmp_path: Path, hardware=None, **options: object) -> VLLMEngine:  # type: ignore[no-untyped-def]
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 30, "num_attention_heads": 9, '
        '"num_key_value_heads": 3, "head_dim": 64, "hidden_size": 576, '
        '"max_position_embeddings": 8192}'
    )
    (tmp_path / "model.safetensors").write_bytes(b"")
    spec = next(s for s in SMOLLM2.model_specs if s.model_format == "pytorch")
    return VLLMEngine(
        model_uid="uid-1",
        family=SMOLLM2,
        spec=spec,
        quantization="none",
        model_path=str(tmp_path),
        config=VLLMEngine.parse_config(options),
        hardware=hardware or linux(ram_free=22),
    )


@pytest.fixture
def test_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_memory, "read_node_memory", lambda: TEST_NODE)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)


@pytest.mark.usefixtures("test_node")
def test_the_engine_starts_vllm_with_the_sized_cache(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.resolved = resolved = engine.resolve()
    assert isinstance(resolved, ResolvedVLLMConfig)
    assert resolved.max_model_len == 8192 and resolved.kv_cache_memory_bytes is not None
    assert 2 * GIB < resolved.kv_cache_memory_bytes < 2.5 * GIB and "NUMA node 0" in (resolved.cpu_memory or "")
    args = engine.server_args(python="p", port=9, api_key="k")
    assert args[args.index("--kv-cache-memory-bytes") + 1] == str(resolved.kv_cache_memory_bytes)
    assert args[args.index("--max-model-len") + 1] == "8192" and "--gpu-memory-utilization" not in args
    assert "VLLM_CPU_KVCACHE_SPACE" not in engine.server_env()
    shown = resolved.model_dump()  # what the model's engine_config shows
    assert shown["kv_cache_memory_bytes"] == resolved.kv_cache_memory_bytes and shown["gpu_memory_utilization"] is None


@pytest.mark.usefixtures("test_node")
def test_the_engine_passes_explicit_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _engine(tmp_path, cpu_kvcache_space_gib=2, max_model_len=2048)
    engine.resolved = engine.resolve()
    args = engine.server_args(python="p", port=9, api_key="k")
    assert args[args.index("--kv-cache-memory-bytes") + 1] == str(2 * GIB)
    assert args[args.index("--max-model-len") + 1] == "2048"
    fraction = _engine(tmp_path, gpu_memory_utilization=0.5)
    fraction.resolved = fraction.resolve()
    args = fraction.server_args(python="p", port=9, api_key="k")
    assert "--kv-cache-memory-bytes" not in args and args[args.index("--gpu-memory-utilization") + 1] == "0.5"
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")  # vLLM reads it over its arguments: it is the user's value
    from_env = _engine(tmp_path).resolve()
    assert from_env.kv_cache_memory_bytes == 3 * GIB and "VLLM_CPU_KVCACHE_SPACE" in (from_env.cpu_memory or "")


def test_the_engine_refuses_before_starting_when_nothing_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_memory, "read_node_memory", lambda: NodeMemory(node=0, total=4 * GIB, available=2 * GIB))
    with pytest.raises(InvalidRequest, match=r"only 2.00 GiB are usable \(available on NUMA node 0 of 4.00 GiB\)"):
        _engine(tmp_path).resolve()


def test_the_memory_check_uses_the_same_sizing() -> None:
    spec = next(s for s in SMOLLM2.model_specs if s.model_format == "pytorch")
    roomy = VLLMEngine.estimate_memory(SMOLLM2, spec, "none", {}, linux(ram_free=22))
    assert roomy.context == 8192 and roomy.overhead == CPU_RUNTIME_BYTES
    assert roomy.total <= 22 * GIB * KV_SHARE + roomy.weights + CPU_RUNTIME_BYTES
    assert check_fit(SMOLLM2, spec, "none", linux(ram_free=22), {}, engine=VLLMEngine) is None
    tight = check_fit(SMOLLM2, spec, "none", linux(ram_total=4, ram_free=3), {}, engine=VLLMEngine)
    assert tight is not None and "worker has 3.0 GiB free RAM" in tight and "for 8192 tokens" in tight
    given = VLLMEngine.estimate_memory(SMOLLM2, spec, "none", {"cpu_kvcache_space_gib": 5}, linux(ram_free=22))
    assert given.kv_cache == 5 * GIB
