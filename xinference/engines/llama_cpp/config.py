"""Launch options of the llama.cpp engine, and how their defaults are sized to the worker.

Users pass these as extra launch kwargs (``xinference launch ... --n_ctx 4096``). Besides the typed options below,
any field of llama.cpp's own ``common_params`` may be given by its dotted path (``sampling.top_k``,
``speculative.draft.n_max``) or as a nested dict (``{"speculative": {"draft": {"n_max": 8}}}``), as in the original
Xinference; they are checked against the installed xllamacpp's tree (``params_tree.py``): an unknown path or a bad
value is a 400 naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from xinference.engines.llama_cpp.params_tree import flatten_options, load_tree
from xinference.errors import InvalidRequest
from xinference.model.draft import DraftAttachment

if TYPE_CHECKING:
    from xinference.model.gguf_info import GgufInfo

__all__ = [
    "ALL_LAYERS",
    "DEFAULT_CACHE_RAM_MIB",
    "DEFAULT_CPU_SLOTS",
    "DEFAULT_GPU_SLOTS",
    "DEFAULT_POOLED_BATCH",
    "DEFAULT_POOLED_SLOTS",
    "GPU_RESERVE_BYTES",
    "MAX_DEFAULT_CTX",
    "GpuLayers",
    "LlamaCppConfig",
    "ResolvedLlamaCppConfig",
    "estimate_gpu_layers",
]

#: Concurrent decoding slots on CPU. Measured on 2 cores with SmolLM2-135M: 4 slots give 1.45x the aggregate
#: tokens/s of 1 slot, and with 2 slots (the original Xinference's default) the 3rd and 4th concurrent users wait
#: ~2.3 s for their first token.
DEFAULT_CPU_SLOTS = 4
DEFAULT_GPU_SLOTS = 8
#: Slots of an embedding or rerank model: each input of a request is one llama.cpp task, and the inputs in slots
#: at the same time share one forward pass (up to ``n_ubatch`` tokens). An encoder keeps no KV cache, so an idle
#: slot costs nothing. On 2 busy CPU cores 4 and 16 slots gave the same ~23-26 requests/s at 16 concurrent
#: one-sentence requests (MiniLM f16): llama.cpp's encoder attends over every token of the pass, masked per input,
#: so a fuller pass does not come cheaper there; on a GPU a fuller pass is what is fast.
DEFAULT_POOLED_SLOTS = 16
#: Tokens per forward pass of an embedding or rerank model: at least one whole input (a non-causal model must see
#: an input in one pass), and no more by default: 512 was as fast as 2048 or faster (see above: the attention of a
#: pass grows with the square of its tokens).
DEFAULT_POOLED_BATCH = 512
#: Default context when the user does not set ``n_ctx``: the model's own, capped so the KV cache of a small
#: machine stays modest. The KV cache is unified: any one request may use all of it.
#: (``benchmark/llama_defaults.py``, results in ``benchmark/results/defaults.md`` and ``doc/performance.md``: with 1-4
#: chat users sharing a system prompt, unified and per-slot KV left the same ~92 of ~420 prompt tokens to compute per
#: request, so the prompt caches gain nothing from per-slot KV, which would cut each request to n_ctx / n_parallel.)
MAX_DEFAULT_CTX = 8192
#: llama.cpp's host-memory prompt cache (``cache_ram_mib``): it keeps the KV state of prompts that left their slot,
#: for reuse by a later request with the same prefix. llama.cpp's own default, 8192 MiB, is sized for one model per
#: machine: measured in the 10-minute soak (``benchmark/soak.py``), fresh prompts grew a SmolLM2 process by ~1 MiB
#: each, 422 -> 2,650 MiB and still rising, while a 256 MiB cap levelled off ~290 MiB over the start. With 1-4 chat
#: users the slots already keep their prefixes (the defaults study computed the same prompt tokens with and without
#: it), so the platform caps it at 1 GiB per model. Any value may be given at launch (``cache_ram_mib``; 0 turns the
#: cache off, -1 leaves it unbounded).
DEFAULT_CACHE_RAM_MIB = 1024
#: VRAM left free when estimating GPU layers: llama.cpp's compute buffers, the CUDA context and some slack.
GPU_RESERVE_BYTES = 1 << 30
#: llama.cpp reads a layer count past the model's own as "every layer, and the output layer too".
ALL_LAYERS = 999

KvCacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
#: Bytes per KV cache element by type (block-quantized types include their scales).
_KV_BYTES: dict[str, float] = {
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "iq4_nl": 18 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
}


class LlamaCppConfig(BaseModel):
    """What a user may set at launch; ``None`` means "size it for this worker"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_ctx: int | None = Field(default=None, ge=256, le=1 << 21, description="context tokens shared by all slots")
    n_parallel: int | None = Field(default=None, ge=1, le=256, description="concurrent decoding slots")
    n_threads: int | None = Field(default=None, ge=1, le=1024, description="decode threads")
    n_threads_batch: int | None = Field(default=None, ge=1, le=1024, description="prompt-processing threads")
    n_batch: int | None = Field(default=None, ge=1, le=1 << 16)
    n_ubatch: int | None = Field(default=None, ge=1, le=1 << 16)
    n_gpu_layers: int | None = Field(
        default=None, ge=-1, description="layers on the GPU; -1: all; unset: all that fit in free VRAM (estimated)"
    )
    #: unified (measured: no cache or speed gain from per-slot KV for the common chat case; see MAX_DEFAULT_CTX)
    kv_unified: bool = True
    flash_attn: Literal["auto", "on", "off"] = "auto"
    cache_type_k: KvCacheType | None = None
    cache_type_v: KvCacheType | None = None
    #: reuse each slot's cached prefix (shared system prompt, repeated turns): ~78% of prompt tokens measured
    cache_prompt: bool = True
    # -- embedding and rerank models only
    pooling_type: Literal["mean", "cls", "last"] | None = Field(
        default=None,
        description="embedding models: how token vectors become one (default: the GGUF header's pooling_type)",
    )
    normalize: bool = Field(default=True, description="embedding models: L2-normalize every vector")
    score_activation: Literal["sigmoid", "none"] = Field(
        default="sigmoid",
        description="rerank models: sigmoid maps the classifier's logit to a 0-1 score, as sentence-transformers' "
        "CrossEncoder does for one-label models; none returns the logit",
    )
    #: llama.cpp's own ``common_params`` fields by dotted path, collected from every other launch option
    params: dict[str, Any] = Field(default_factory=dict, description="llama.cpp common_params by dotted path")
    #: a draft model for speculative decoding; set by the platform from ``enable_mtp`` / ``draft_model_path``
    #: (left out of the options' JSON schema: the launch form offers those two fields instead)
    draft: SkipJsonSchema[DraftAttachment | None] = None
    #: the local path of a vision model's multimodal projector (mmproj); set by the platform from the launch's
    #: ``multimodal_projector`` (``model/projector.py``), left out of the options' JSON schema like ``draft``
    projector: SkipJsonSchema[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _collect_params(cls, data: Any) -> Any:
        """Every option that is not a typed field is a path into llama.cpp's parameter tree."""
        if not isinstance(data, dict):
            return data
        typed = {key: value for key, value in data.items() if key in cls.model_fields}
        rest = {key: value for key, value in data.items() if key not in cls.model_fields}
        if not rest:
            return data
        typed["params"] = {**flatten_options(dict(typed.get("params") or {})), **flatten_options(rest)}
        return typed

    @field_validator("params")
    @classmethod
    def _check_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        flat = flatten_options(value)
        tree = load_tree()
        if tree is None:  # no xllamacpp in this process: the model process checks them when it loads
            return flat
        try:
            return tree.validate(flat)
        except InvalidRequest as exc:
            typo = exc.param or ""
            if "." not in typo and "no parameter" in exc.message:
                raise InvalidRequest(_unknown_option_message(typo, tree.leaves), param=typo) from None
            raise

    def resolve(
        self, *, cpu_count: int, context_length: int | None, gpu: bool, pooled: bool = False
    ) -> ResolvedLlamaCppConfig:
        """Fill every unset option from the worker's hardware and the model's context length.

        On a GPU worker an unset ``n_gpu_layers`` means every layer here; the engine then narrows it to what fits
        in free VRAM (:func:`estimate_gpu_layers`, which needs the GGUF file). ``pooled``: an embedding or rerank
        model, whose ``context_length`` is the tokens of one input: more slots, and passes that hold whole inputs.
        """
        model_ctx = context_length or 4096
        threads = self.n_threads or max(1, cpu_count)
        if self.n_gpu_layers is not None:
            layers = ALL_LAYERS if self.n_gpu_layers == -1 else self.n_gpu_layers
            offload = "all layers (n_gpu_layers=-1)" if self.n_gpu_layers == -1 else "set by n_gpu_layers"
        elif not gpu:
            layers, offload = 0, "none (no GPU)"
        else:
            layers, offload = ALL_LAYERS, "all layers"
        n_ctx = self.n_ctx or min(model_ctx, MAX_DEFAULT_CTX)
        n_batch: int | None
        n_ubatch: int | None
        if pooled:
            # every core but one, as the torch engines: on 2 cores shared with the API (load average 4-7), MiniLM
            # embedded 60-80 single requests/s with 1 thread and 3-12 with 2 (ggml's threads wait for each other
            # at every operation, and the API takes one of the two cores at every request)
            threads = self.n_threads or max(1, cpu_count - 1)
            slots = self.n_parallel or DEFAULT_POOLED_SLOTS
            n_batch = self.n_batch or max(n_ctx, DEFAULT_POOLED_BATCH)
            n_ubatch = self.n_ubatch or n_batch
        else:
            slots = self.n_parallel or (DEFAULT_GPU_SLOTS if gpu else DEFAULT_CPU_SLOTS)
            n_batch, n_ubatch = self.n_batch, self.n_ubatch
        return ResolvedLlamaCppConfig(
            **self.model_dump(
                exclude={
                    "n_ctx",
                    "n_parallel",
                    "n_threads",
                    "n_threads_batch",
                    "n_gpu_layers",
                    "draft",
                    "projector",
                    "params",
                    "n_batch",
                    "n_ubatch",
                },
            ),
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            draft=self.draft,
            projector=self.projector,
            params={"cache_ram_mib": DEFAULT_CACHE_RAM_MIB, **self.params},
            n_ctx=n_ctx,
            n_parallel=slots,
            n_threads=threads,
            n_threads_batch=self.n_threads_batch or threads,
            n_gpu_layers=layers,
            gpu_offload=offload,
        )


class ResolvedLlamaCppConfig(LlamaCppConfig):
    """The options actually used: every sizing field is set, ``params`` reads back what llama.cpp's parameters
    hold, and ``speculative`` says how tokens are drafted (empty when they are not)."""

    n_ctx: int
    n_parallel: int
    n_threads: int
    n_threads_batch: int
    n_gpu_layers: int
    #: the draft's local path stays out of the launch result (``speculative`` names the draft instead)
    draft: SkipJsonSchema[DraftAttachment | None] = Field(default=None, exclude=True)
    #: the projector's path stays out of the launch result too (``vision`` names it instead)
    projector: SkipJsonSchema[str | None] = Field(default=None, exclude=True)
    gpu_offload: str = ""
    #: how the model sees images: the projector's file name and type (``mmproj-f16.gguf (mlp)``); empty: it does not
    vision: str = ""
    speculative: dict[str, Any] = Field(default_factory=dict)


def _unknown_option_message(name: str, leaves: dict[str, Any]) -> str:
    import difflib

    names = sorted(set(LlamaCppConfig.model_fields) - {"params", "draft", "projector"}) + sorted(leaves)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (
        f"llama.cpp does not take a launch option {name!r}{hint} (its typed options, or any field of llama.cpp's "
        "common_params by dotted path such as sampling.top_k)"
    )


@dataclass(frozen=True)
class GpuLayers:
    """How many layers go on the GPU when the user did not say, and why (shown in the resolved config)."""

    layers: int
    note: str


def kv_bytes_per_layer(
    info: GgufInfo, n_ctx: int, cache_type_k: str | None = None, cache_type_v: str | None = None
) -> int:
    """Bytes of KV cache one repeating block holds for ``n_ctx`` tokens, from the GGUF header (K and V heads times
    their lengths, at the cache types' sizes; 16-bit by default)."""
    k_bytes = _KV_BYTES.get(cache_type_k or "f16", 2.0)
    v_bytes = _KV_BYTES.get(cache_type_v or "f16", 2.0)
    return int(n_ctx * info.n_head_kv * (info.key_length * k_bytes + info.value_length * v_bytes))


def estimate_gpu_layers(
    info: GgufInfo, free_bytes: int, *, n_ctx: int, cache_type_k: str | None = None, cache_type_v: str | None = None
) -> GpuLayers:
    """Layers of a GGUF model that fit in ``free_bytes`` of VRAM with a KV cache of ``n_ctx`` tokens.

    Each repeating block costs its weights plus its share of the KV cache; the embeddings and output layer, llama.cpp's
    compute buffers and :data:`GPU_RESERVE_BYTES` come off the top. An estimate, not a guarantee: llama.cpp may
    still run out of memory with unusual architectures, and ``n_gpu_layers`` overrides it.
    """
    gib = 1 << 30
    kv_per_layer = kv_bytes_per_layer(info, n_ctx, cache_type_k, cache_type_v)
    per_layer = info.layer_bytes + kv_per_layer
    budget = free_bytes - GPU_RESERVE_BYTES - info.other_bytes
    blocks = info.block_count
    fit = max(0, budget // per_layer) if per_layer > 0 else blocks
    weights = f"{info.weight_bytes / gib:.2f} GiB of weights"
    free = f"{free_bytes / gib:.1f} GiB free"
    if fit >= blocks:
        return GpuLayers(ALL_LAYERS, f"all {blocks} layers (estimated: {weights}, {free})")
    return GpuLayers(
        int(fit),
        f"{int(fit)} of {blocks} layers (estimated: {weights} and "
        f"{kv_per_layer * blocks / gib:.2f} GiB of KV cache, {free})",
    )
