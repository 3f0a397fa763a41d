"""Issue 13, item 6: a prefill that fails (out of memory on a long prompt, a bad token) fails only its own
request, at once, and the running batch goes on.

Real scheduler, real model (the bundled SmolLM2 converted to safetensors). The failing prefill is a real failure
of the real model: a prompt holding a token id past the vocabulary makes the embedding lookup raise, as an
allocation failure would, in the middle of the prefill's forward pass.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from benchmark._weights import smollm2_torch  # noqa: E402
from xinference.engines.transformers.batching import SamplingParams, Scheduler, Sequence  # noqa: E402
from xinference.errors import XinferenceError  # noqa: E402

pytestmark = pytest.mark.slow


class RecordingSink:
    """The requester's side: records what the scheduler hands over and signals the end."""

    def __init__(self) -> None:
        self.text = ""
        self.reason: str | None = None
        self.error: XinferenceError | None = None
        self.ended = threading.Event()
        self.first_text = threading.Event()

    @property
    def cancelled(self) -> bool:
        return False

    def on_text(self, seq: Sequence, text: str) -> None:
        self.text += text
        self.first_text.set()

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.reason = reason
        self.ended.set()

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.error = error
        self.ended.set()


def test_failed_prefill_fails_only_its_request() -> None:
    scheduler = Scheduler(smollm2_torch, max_num_seqs=4, device="cpu", name="prefill-failure-test")
    scheduler.start()
    try:
        scheduler.wait_loaded()
        tokenizer, vocab = scheduler.tokenizer, scheduler.model.config.vocab_size
        prompt = tokenizer("Once upon a time")["input_ids"]
        running = RecordingSink()
        scheduler.submit(Sequence(prompt, SamplingParams(max_tokens=40, temperature=0), running))
        assert running.first_text.wait(120), "the first request never produced text"
        broken = RecordingSink()
        scheduler.submit(Sequence([*prompt, vocab + 7], SamplingParams(max_tokens=8, temperature=0), broken))
        # the broken request hears about its failure; before the fix it waited forever (bounded here)
        assert broken.ended.wait(120), "the request whose prefill failed was left hanging"
        assert broken.error is not None and broken.reason is None
        assert running.ended.wait(120)
        assert running.error is None and running.reason == "length", running.error
    finally:
        scheduler.stop()
