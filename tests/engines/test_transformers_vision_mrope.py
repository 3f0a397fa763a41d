"""The Transformers scheduler with a model whose rotary positions follow the image (Qwen2-VL's M-RoPE).

Such a model numbers the text after an image from a shifted position (``rope_deltas``); the scheduler's decode
step passes every row's position itself, so each row must carry its own shift, and rows with different images
(different shifts) and a text-only row decode side by side. Checked against ``generate`` on each prompt alone
(greedy, so the tokens must be equal) with a tiny random ``Qwen2VLForConditionalGeneration``.

Only the model is Qwen2-VL's: Transformers 5's ``Qwen2VLProcessor`` needs torchvision, which cannot be installed
here, so the prompt is laid out as the processor would (vision start, one image pad per merged patch, vision end)
and the pixels come from Qwen2-VL's own image processor.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("transformers")

from tests.vision_models import build_tiny_llava  # noqa: E402
from xinference.engines.transformers.batching import SamplingParams, Scheduler, Sequence  # noqa: E402

IMAGE, VIDEO, START, END = 508, 509, 510, 511  # token ids the config names (the tokenizer only decodes output)
MERGE = 2


class Sink:
    cancelled = False

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.error: Any = None

    def on_text(self, seq: Any, text: str) -> None:
        pass

    def on_finish(self, seq: Any, reason: str) -> None:
        self.ended.set()

    def on_error(self, seq: Any, error: Any) -> None:
        self.error = error
        self.ended.set()


@pytest.fixture(scope="module")
def model() -> Any:
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    torch.manual_seed(3)
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": 512,
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "bos_token_id": 0,
            "eos_token_id": 2,
            "pad_token_id": 0,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]},
        },
        vision_config={
            "depth": 2,
            "embed_dim": 64,
            "hidden_size": 128,
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": MERGE,
            "temporal_patch_size": 2,
        },
        image_token_id=IMAGE,
        video_token_id=VIDEO,
        vision_start_token_id=START,
        vision_end_token_id=END,
    )
    return Qwen2VLForConditionalGeneration(config).eval()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_llava(tmp_path_factory.mktemp("tok")))


def image_prompt(width: int, height: int, colour: tuple[int, int, int]) -> tuple[list[int], dict[str, Any]]:
    """Prompt ids laid out as Qwen2VLProcessor lays them out, and the model inputs for the picture."""
    import torch
    from PIL import Image
    from transformers import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil(size={"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 64})
    pixels = processor(images=[Image.new("RGB", (width, height), colour)], return_tensors="pt")
    count = int(pixels["image_grid_thw"].prod()) // MERGE**2
    ids = [5, 6, 7, START] + [IMAGE] * count + [END] + [40, 41, 42, 43, 44]
    types = torch.tensor([[1 if t == IMAGE else 0 for t in ids]], dtype=torch.int32)
    return ids, {
        "pixel_values": pixels["pixel_values"],
        "image_grid_thw": pixels["image_grid_thw"],
        "mm_token_type_ids": types,
    }


def generate_alone(model: Any, ids: list[int], media: dict[str, Any], tokens: int) -> list[int]:
    import torch

    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([ids]), **media, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False
        )
    generated: list[int] = out[0, len(ids) :].tolist()
    return generated


def test_rows_with_shifted_positions_decode_as_alone(model: Any, tokenizer: Any) -> None:
    tokens = 10
    wide = image_prompt(112, 56, (200, 30, 30))  # 2x4 merged patches: a shift of its own
    tall = image_prompt(56, 140, (20, 30, 200))
    text = ([5, 6, 7, 8, 9, 10, 11, 12], {})
    expected = [generate_alone(model, ids, dict(media), tokens) for ids, media in (wide, tall, text)]

    scheduler = Scheduler(lambda: (model, tokenizer), max_num_seqs=3, device="cpu", name="mrope-test")
    scheduler.start()
    scheduler.wait_loaded()
    try:
        params = SamplingParams(max_tokens=tokens, temperature=0)
        seqs = []
        for ids, media in (wide, tall, text):
            seq = Sequence(list(ids), params, Sink())
            seq.media = dict(media) or None
            seqs.append(seq)
        for seq in seqs:
            scheduler.submit(seq)
        for seq in seqs:
            assert seq.sink.ended.wait(60) and seq.sink.error is None
    finally:
        scheduler.stop()
    assert [seq.generated for seq in seqs] == expected
    assert scheduler.max_batch_seen >= 2  # they decoded together
    assert all(seq.media is None for seq in seqs)  # the pixels were dropped after the prefill


def test_the_prompts_are_shifted(model: Any) -> None:
    """Both image prompts leave a shift (so the check above is not vacuous), and they differ from each other."""
    import torch

    shifts = []
    for width, height in ((112, 56), (56, 140)):
        ids, media = image_prompt(width, height, (0, 0, 0))
        model.model.rope_deltas = None
        with torch.inference_mode():
            model(input_ids=torch.tensor([ids]), use_cache=False, **media)
        shifts.append(int(model.model.rope_deltas.reshape(-1)[0]))
    assert 0 not in shifts and shifts[0] != shifts[1]
