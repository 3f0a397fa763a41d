"""The embeddings part of ``benchmark.bench_batching``: the CPU accounting and the in-process reference."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from benchmark.bench_batching import _cpu_seconds, inprocess_reference


def test_cpu_seconds_sum_the_processes_and_count_an_exited_one_as_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    process = psutil.Process(gone.pid)
    gone.wait()
    me = psutil.Process()
    before = _cpu_seconds([me, process])
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    after = _cpu_seconds([me, process])
    assert after - before >= 0.15  # psutil reads the kernel's clock ticks (10 ms each), not the exact CPU clock
    assert _cpu_seconds([process]) == 0.0 and _cpu_seconds([]) == 0.0


@pytest.mark.slow
def test_inprocess_reference_embeds_the_sentences_with_sentence_transformers() -> None:
    pytest.importorskip("sentence_transformers")
    sentences = ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly tax filings are due in April."]
    result = inprocess_reference(sentences, warmup=["warm up"], batch=16)
    assert result["req_s"] > 0 and result["tok_s"] > result["req_s"] and result["cpu_ms_per_req"] > 0
    assert result["threads"] >= 1
    cat, kitten, tax = result["vectors"]
    assert len(cat) == 384

    def dot(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert dot(cat, kitten) > dot(cat, tax) + 0.3
