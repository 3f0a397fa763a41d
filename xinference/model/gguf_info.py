"""What a GGUF file's header says about its model: size, layers, attention shape and tokenizer.

Used before llama.cpp loads anything: to check that a draft model shares its target's vocabulary and is smaller
(speculative decoding), and to estimate how many layers fit in free GPU memory. Only the header is read (key/values
and the tensor table, a few MB at most for a 256k-token vocabulary); tensor data is never touched.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

from xinference.model.chat_template import _ARRAY, _SCALARS, _STRING, _read, _read_string, _skip_value

__all__ = ["GgufInfo", "gguf_info_of", "read_gguf_info", "read_gguf_metadata"]

_WANTED_ARRAYS = frozenset({"tokenizer.ggml.tokens"})


@dataclass(frozen=True)
class GgufInfo:
    """The parts of a GGUF header the platform reasons about."""

    architecture: str
    n_params: int
    #: bytes of tensor data in the file (weights as stored, quantized)
    weight_bytes: int
    block_count: int
    #: bytes of the largest repeating block (``blk.N.*``) and of everything outside the blocks (embeddings, output)
    layer_bytes: int
    other_bytes: int
    n_embd: int
    n_head: int
    n_head_kv: int
    key_length: int
    value_length: int
    tokenizer_model: str
    tokens: tuple[str, ...]
    bos_token_id: int | None
    eos_token_id: int | None
    #: ``<arch>.pooling_type`` (llama.cpp's numbering: 0 none, 1 mean, 2 cls, 3 last, 4 rank), None when absent
    pooling_type: int | None = None
    #: ``<arch>.context_length``: the positions the model was trained for (0 when absent)
    context_length: int = 0
    #: whether the file holds a classification head (``cls`` / ``cls.output`` tensors): a reranker's
    has_classifier: bool = False

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)


def _value(handle: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        return _read(handle, _SCALARS[kind])
    if kind == _STRING:
        return _read_string(handle).decode("utf-8", "replace")
    if kind == _ARRAY:
        item_kind, count = _read(handle, "<I"), _read(handle, "<Q")
        return [_value(handle, item_kind) for _ in range(count)]
    raise ValueError(f"unknown GGUF value type {kind}")


def read_gguf_info(path: str) -> GgufInfo:
    """Read ``path``'s header; ValueError when it is not a GGUF file (v2/v3) or is truncated."""
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF" or _read(handle, "<I") < 2:
            raise ValueError("not a GGUF file")
        n_tensors, n_kv = _read(handle, "<Q"), _read(handle, "<Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = _read_string(handle).decode("utf-8", "replace")
            kind = _read(handle, "<I")
            if kind == _ARRAY and key not in _WANTED_ARRAYS:
                _skip_value(handle, kind)
            else:
                meta[key] = _value(handle, kind)
        tensors: list[tuple[str, int, int]] = []  # name, elements, offset
        for _ in range(n_tensors):
            name = _read_string(handle).decode("utf-8", "replace")
            dims = [_read(handle, "<Q") for _ in range(_read(handle, "<I"))]
            _read(handle, "<I")  # ggml type
            elements = 1
            for dim in dims:
                elements *= dim
            tensors.append((name, elements, _read(handle, "<Q")))
        alignment = int(meta.get("general.alignment", 32)) or 32
        data_start = -(-handle.tell() // alignment) * alignment
    data_bytes = max(0, os.path.getsize(path) - data_start)
    # Tensors are stored back to back: each one's size is the distance to the next offset.
    ordered = sorted(tensors, key=lambda t: t[2])
    sizes: dict[str, int] = {}
    for index, (name, _, offset) in enumerate(ordered):
        end = ordered[index + 1][2] if index + 1 < len(ordered) else data_bytes
        sizes[name] = max(0, end - offset)
    per_block: dict[str, int] = {}
    for name, size in sizes.items():
        if name.startswith("blk."):
            block = name.split(".", 2)[1]
            per_block[block] = per_block.get(block, 0) + size
    arch = str(meta.get("general.architecture", ""))

    def number(key: str, default: int = 0) -> int:
        value = meta.get(f"{arch}.{key}", default)
        if isinstance(value, list):  # per-layer arrays (some architectures): the largest
            value = max(value) if value else default
        return int(value)

    n_embd, n_head = number("embedding_length"), number("attention.head_count", 1) or 1
    n_head_kv = number("attention.head_count_kv", n_head) or n_head
    head_dim = n_embd // n_head if n_head else 0
    bos, eos = meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")
    return GgufInfo(
        architecture=arch,
        n_params=sum(t[1] for t in tensors),
        weight_bytes=data_bytes,
        block_count=number("block_count", len(per_block)),
        layer_bytes=max(per_block.values(), default=0),
        other_bytes=data_bytes - sum(per_block.values()),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        key_length=number("attention.key_length", head_dim),
        value_length=number("attention.value_length", head_dim),
        tokenizer_model=str(meta.get("tokenizer.ggml.model", "")),
        tokens=tuple(str(t) for t in meta.get("tokenizer.ggml.tokens", ())),
        bos_token_id=int(bos) if isinstance(bos, int) else None,
        eos_token_id=int(eos) if isinstance(eos, int) else None,
        pooling_type=int(pooling) if isinstance(pooling := meta.get(f"{arch}.pooling_type"), int) else None,
        context_length=number("context_length"),
        has_classifier=any(name in ("cls.weight", "cls.output.weight") for name, _, _ in tensors),
    )


def read_gguf_metadata(path: str) -> dict[str, Any]:
    """The scalar key/values of ``path``'s header (arrays are skipped); ValueError when it is not a GGUF file (v2/v3)
    or is truncated. What a multimodal projector is (``general.architecture`` ``clip``, ``clip.projector_type``, ...)
    is read this way before llama.cpp loads it."""
    with open(path, "rb") as handle:
        if handle.read(4) != b"GGUF" or _read(handle, "<I") < 2:
            raise ValueError("not a GGUF file")
        _read(handle, "<Q")  # tensors
        n_kv = _read(handle, "<Q")
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = _read_string(handle).decode("utf-8", "replace")
            kind = _read(handle, "<I")
            if kind == _ARRAY:
                _skip_value(handle, kind)
            else:
                meta[key] = _value(handle, kind)
    return meta


@functools.lru_cache(maxsize=32)
def _cached_info(path: str, mtime_ns: int, size: int) -> GgufInfo:
    return read_gguf_info(path)


def gguf_info_of(path: str) -> GgufInfo:
    """:func:`read_gguf_info`, kept per version of the file (its path, size and mtime). For callers on an actor's
    event loop, such as the supervisor's memory check at every booking: a header with a large vocabulary takes tens
    of milliseconds to read, which each launch and restart would otherwise spend blocking that loop."""
    stat = os.stat(path)
    return _cached_info(path, stat.st_mtime_ns, stat.st_size)
