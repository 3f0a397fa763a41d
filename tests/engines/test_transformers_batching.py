"""The decode loop of the batching engines (issue 13): a cancelled non-streamed request leaves the batch at the next
step, and text is decoded a few tokens at a time, identical to a one-shot decode.

Real SmolLM2-135M (the bundled GGUF converted to safetensors, cached) on the Transformers scheduler; the
detokenizer checks need only its tokenizer (byte-level BPE: an emoji or a CJK character is several tokens).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from benchmark._weights import converted_smollm2  # noqa: E402
from xinference.engines.continuous.detokenize import IncrementalDecoder  # noqa: E402
from xinference.engines.transformers.batching import SamplingParams, Scheduler, Sequence  # noqa: E402
from xinference.engines.transformers.engine import TransformersEngine  # noqa: E402
from xinference.errors import XinferenceError  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

TRICKY = [
    "Hi 👋🏽 there, 世界 and 日本語のテキスト.",
    "  leading spaces,   runs   of spaces\tand a tab\n\nnew lines  ",
    "flags 🇫🇷🇯🇵, a family 👨‍👩‍👧 and math ∑∫√ — café naïve Ωmega",
    "한국어 문장, العربية, and emoji at the end 🎉",
]


@pytest.fixture(scope="module")
def weights() -> Path:
    return converted_smollm2()


@pytest.fixture(scope="module")
def tokenizer(weights: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(weights, local_files_only=True)


class CountingTokenizer:
    """The real tokenizer, counting the ids every ``decode`` call is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.decoded_ids = 0
        self.calls = 0

    def decode(self, ids: list[int], **kwargs: Any) -> str:
        self.calls += 1
        self.decoded_ids += len(ids)
        text: str = self.inner.decode(ids, **kwargs)
        return text

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class RecordingSink:
    """Collects a sequence's text on the scheduler thread and signals its end."""

    cancelled = False

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.reason: str | None = None
        self.ended = threading.Event()

    def on_text(self, seq: Any, text: str) -> None:
        self.pieces.append(text)

    def on_finish(self, seq: Any, reason: str) -> None:
        self.reason = reason
        self.ended.set()

    def on_error(self, seq: Any, error: XinferenceError) -> None:
        self.ended.set()


# -- incremental detokenization ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text", TRICKY)
def test_incremental_text_is_the_one_shot_decode(tokenizer: Any, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > len(text.split())  # several tokens per character somewhere: the case that matters
    decoder = IncrementalDecoder()
    pieces = [decoder.step(tokenizer, ids[:end], final=end == len(ids)) for end in range(1, len(ids) + 1)]
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True) == text
    assert not any("\ufffd" in piece for piece in pieces)  # an incomplete character waits for its bytes
    assert decoder.decoded_tokens <= 6 * len(ids)  # a bounded window per token, however long the text


def test_an_incomplete_character_is_given_out_when_the_sequence_ends(tokenizer: Any) -> None:
    ids = tokenizer("ok 👋", add_special_tokens=False)["input_ids"]
    cut = ids[:-1]  # the emoji's last byte never comes (max_tokens ran out)
    decoder = IncrementalDecoder()
    text = "".join(decoder.step(tokenizer, cut[:end]) for end in range(1, len(cut) + 1))
    text += decoder.step(tokenizer, cut, final=True)
    assert text == tokenizer.decode(cut) and text.endswith("\ufffd")


def test_decode_work_grows_linearly_with_the_output(weights: Path) -> None:
    """Decoding the whole sequence per token would decode n(n+1)/2 ids; a window decodes a few per token."""
    counting: dict[str, CountingTokenizer] = {}

    def loader() -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32, local_files_only=True).eval()
        counting["tok"] = CountingTokenizer(AutoTokenizer.from_pretrained(weights, local_files_only=True))
        return model, counting["tok"]

    scheduler = Scheduler(loader, max_num_seqs=2, device="cpu", name="detok-test")
    scheduler.start()
    try:
        scheduler.wait_loaded()
        tok = counting["tok"]
        prompt = tok.inner("Write a long story about a dragon:")["input_ids"]
        sink = RecordingSink()
        seq = Sequence(prompt, SamplingParams(max_tokens=120, temperature=0), sink)  # no stop ids: runs to 120
        scheduler.submit(seq)
        assert sink.ended.wait(300), "the request never ended"
        assert sink.reason == "length" and len(seq.generated) == 120
        assert "".join(sink.pieces) == tok.inner.decode(seq.generated, skip_special_tokens=True)
        assert tok.decoded_ids <= 4 * 120, tok.decoded_ids  # whole-sequence decoding: 7,260
        assert scheduler.stats()["generated_tokens"] == 120
    finally:
        scheduler.stop()


# -- cancelling a non-streamed request ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(weights: Path):  # type: ignore[no-untyped-def]
    loop = asyncio.new_event_loop()
    family = ModelRegistry().get("smollm2-instruct")
    spec = next(s for s in family.model_specs if s.model_format == "pytorch")
    engine = TransformersEngine(
        model_uid="unit-tf-cancel",
        family=family,
        spec=spec,
        quantization="none",
        model_path=str(weights),
        config=TransformersEngine.parse_config({"max_num_seqs": 2, "max_model_len": 1024}),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    yield loop, engine
    loop.run_until_complete(engine.unload())
    loop.close()


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_cancelled_request_leaves_the_batch_at_the_next_step(engine, kind: str) -> None:  # type: ignore[no-untyped-def]
    loop, eng = engine
    long: dict[str, Any] = {"max_tokens": 800, "ignore_eos": True, "temperature": 0}
    if kind == "chat":
        long["messages"] = [{"role": "user", "content": "Tell me a very long story."}]
    else:
        long["prompt"] = "Once upon a time"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        before = eng.stats()
        task = asyncio.ensure_future(getattr(eng, kind)(long))  # what the API's disconnect watcher cancels
        while eng.stats()["generated_tokens"] - before["generated_tokens"] < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        at_cancel = eng.stats()["generated_tokens"]
        # until it has left, or has gone on decoding for 150 tokens (what a sequence nobody removed would do)
        while eng.stats()["running"] and eng.stats()["generated_tokens"] - at_cancel < 150:
            await asyncio.sleep(0.01)
        left = eng.stats()
        short = await eng.chat({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0})
        return before, left, short, eng.stats()

    before, left, short, after = loop.run_until_complete(asyncio.wait_for(scenario(), 300))
    assert left["running"] == 0 and left["aborted"] == before["aborted"] + 1
    abandoned = left["generated_tokens"] - before["generated_tokens"]
    assert abandoned < 100  # it left at the next step, far from its 800 tokens
    # nothing more was decoded for it: only the short request's tokens came after
    assert after["generated_tokens"] - left["generated_tokens"] == short["usage"]["completion_tokens"] == 3
    assert after["running"] == 0 and after["aborted"] == left["aborted"]
