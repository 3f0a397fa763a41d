"""Issue 24, item 3: prompts that wait together are prefilled together (one left-padded forward pass), a long
prefill goes a chunk per turn between decode steps, and none of it changes what a sequence generates.

Real scheduler, real model (the bundled SmolLM2-135M converted to safetensors, float32, one torch thread): the
one-at-a-time path (``Sequence.alone``, what every prompt took before) is the reference each batched run must equal
token for token under greedy decoding.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from benchmark._weights import smollm2_torch  # noqa: E402
from xinference.engines.transformers.batching import SamplingParams, Scheduler, Sequence  # noqa: E402
from xinference.errors import XinferenceError  # noqa: E402

pytestmark = pytest.mark.slow

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain why the sky is blue in two sentences, to a child of five.",
    "List three fruits.",
    "What is the capital of France? Tell me about its history, its food and its museums.",
]


class RecordingSink:
    """The requester's side: the text, how it ended, and the scheduler's step count at its first text."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.text = ""
        self.reason: str | None = None
        self.error: XinferenceError | None = None
        self.first_step: int | None = None
        self.ended = threading.Event()
        self.cancel = False

    @property
    def cancelled(self) -> bool:
        return self.cancel

    def on_text(self, seq: Sequence, text: str) -> None:
        if self.first_step is None:
            self.first_step = self.scheduler.steps
        self.text += text

    def on_finish(self, seq: Sequence, reason: str) -> None:
        self.reason = reason
        self.ended.set()

    def on_error(self, seq: Sequence, error: XinferenceError) -> None:
        self.error = error
        self.ended.set()


def _scheduler(prefill_tokens: int) -> Iterator[Scheduler]:
    scheduler = Scheduler(
        smollm2_torch, max_num_seqs=4, device="cpu", name="batched-prefill-test", prefill_tokens=prefill_tokens
    )
    scheduler.start()
    try:
        scheduler.wait_loaded()
        yield scheduler
    finally:
        scheduler.stop()


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    yield from _scheduler(512)


@pytest.fixture(scope="module")
def chunky() -> Iterator[Scheduler]:
    """Prefill forward passes of 64 padded tokens: every group here is prefilled in chunks."""
    yield from _scheduler(64)


def _ids(scheduler: Scheduler, texts: list[str]) -> list[list[int]]:
    tok = scheduler.tokenizer
    return [
        tok(tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True))[
            "input_ids"
        ]
        for t in texts
    ]


def _run(
    scheduler: Scheduler, prompts: list[list[int]], params: list[SamplingParams], *, alone: bool
) -> tuple[list[Sequence], list[RecordingSink]]:
    sinks = [RecordingSink(scheduler) for _ in prompts]
    seqs = [Sequence(ids, p, sink, alone=alone) for ids, p, sink in zip(prompts, params, sinks, strict=True)]
    for seq in seqs:
        scheduler.submit(seq)
    for sink in sinks:
        assert sink.ended.wait(300), "a request never ended"
    return seqs, sinks


def test_prompts_waiting_together_are_prefilled_in_one_pass_with_the_same_output(scheduler: Scheduler) -> None:
    prompts = _ids(scheduler, PROMPTS)
    params = [SamplingParams(max_tokens=24, temperature=0)] * len(prompts)
    alone, _ = _run(scheduler, prompts, params, alone=True)
    before = scheduler.prefills
    together, sinks = _run(scheduler, prompts, params, alone=False)
    assert scheduler.prefills - before == 1  # four prompts, one forward pass
    assert [s.generated for s in together] == [s.generated for s in alone]
    assert all(len(s.generated) == 24 for s in together)
    assert len({sink.first_step for sink in sinks}) == 1  # every first token came out of that one pass
    assert [sink.reason for sink in sinks] == ["length"] * 4


def test_sampling_params_and_stops_stay_per_request(scheduler: Scheduler) -> None:
    prompts = _ids(scheduler, PROMPTS)
    tok = scheduler.tokenizer
    reference, _ = _run(scheduler, prompts[:1], [SamplingParams(max_tokens=24, temperature=0)], alone=True)
    stop_text = tok.decode(reference[0].generated[3:6]).strip()
    assert stop_text
    params = [
        SamplingParams(max_tokens=24, temperature=0, stop=(stop_text,)),  # stops before its fourth token's text
        SamplingParams(max_tokens=5, temperature=0),
        SamplingParams(max_tokens=12, temperature=0.9, top_p=0.9, seed=7),
        SamplingParams(max_tokens=12, temperature=0.9, top_p=0.9, seed=7),
    ]
    seqs, sinks = _run(scheduler, [prompts[0], prompts[1], prompts[2], prompts[2]], params, alone=False)
    assert sinks[0].reason == "stop" and stop_text not in sinks[0].text
    assert sinks[0].text == tok.decode(reference[0].generated, skip_special_tokens=True).split(stop_text)[0]
    assert sinks[1].reason == "length" and len(seqs[1].generated) == 5
    assert seqs[2].generated == seqs[3].generated  # the same seed, the same draws, wherever the row sits
    solo, _ = _run(scheduler, [prompts[2]], [params[2]], alone=True)
    assert solo[0].generated == seqs[2].generated


def test_an_abandoned_request_leaves_while_the_others_prefill_with_it(scheduler: Scheduler) -> None:
    prompts = _ids(scheduler, PROMPTS[:3])
    params = [SamplingParams(max_tokens=16, temperature=0)] * 3
    reference, _ = _run(scheduler, prompts, params, alone=True)
    sinks = [RecordingSink(scheduler) for _ in prompts]
    sinks[1].cancel = True  # its client went away before the prefill
    seqs = [Sequence(ids, p, sink) for ids, p, sink in zip(prompts, params, sinks, strict=True)]
    aborted = scheduler.aborted
    for seq in seqs:
        scheduler.submit(seq)
    for i in (0, 2):
        assert sinks[i].ended.wait(300)
    assert seqs[0].generated == reference[0].generated and seqs[2].generated == reference[2].generated
    assert not seqs[1].generated and scheduler.aborted == aborted + 1
    assert scheduler.stats()["running"] == 0


def test_chunked_prefill_of_uneven_prompts_equals_one_at_a_time(chunky: Scheduler) -> None:
    tok = chunky.tokenizer
    prompts = [tok("The history of lighthouses is long and varied. " * 12)["input_ids"], tok("Hi")["input_ids"]]
    params = [SamplingParams(max_tokens=16, temperature=0)] * 2
    alone, _ = _run(chunky, prompts, params, alone=True)
    before = chunky.prefills
    together, _ = _run(chunky, prompts, params, alone=False)
    assert [s.generated for s in together] == [s.generated for s in alone]
    assert chunky.prefills - before > 2  # it went in several chunks


def test_a_long_prefill_does_not_stall_running_requests(chunky: Scheduler) -> None:
    tok = chunky.tokenizer
    running = RecordingSink(chunky)
    seq = Sequence(tok("Once upon a time")["input_ids"], SamplingParams(max_tokens=80, temperature=0), running)
    chunky.submit(seq)
    deadline = time.monotonic() + 120
    while not running.text and time.monotonic() < deadline:
        time.sleep(0.01)
    long_prompt = tok("The history of lighthouses is long and varied. " * 40)["input_ids"]  # ~400 tokens: 7 chunks
    late = RecordingSink(chunky)
    steps_at_submit = chunky.steps
    chunky.submit(Sequence(long_prompt, SamplingParams(max_tokens=2, temperature=0), late))
    assert late.ended.wait(300) and late.error is None
    assert running.ended.wait(300) and running.reason == "length"
    assert late.first_step is not None and running.first_step is not None
    # the running request kept getting tokens while the long prompt went in, a chunk between two of its steps
    assert late.first_step - steps_at_submit >= 5


def test_a_failing_prompt_in_a_batch_fails_alone(scheduler: Scheduler) -> None:
    prompts = _ids(scheduler, PROMPTS[:3])
    vocab = scheduler.model.config.vocab_size
    prompts[1] = [*prompts[1], vocab + 7]  # the embedding lookup raises inside the batched forward pass
    params = [SamplingParams(max_tokens=8, temperature=0)] * 3
    reference, _ = _run(scheduler, [prompts[0], prompts[2]], params[:2], alone=True)
    seqs, sinks = _run(scheduler, prompts, params, alone=False)
    assert sinks[1].error is not None and sinks[1].reason is None
    assert [seqs[0].generated, seqs[2].generated] == [s.generated for s in reference]
    assert sinks[0].reason == sinks[2].reason == "length"
