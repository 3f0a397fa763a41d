"""The sentence-transformers adapter in-process, on the bundled all-MiniLM-L6-v2 and a locally built tiny
cross-encoder: real vectors and scores, batching observed through the engine's forward-pass counter."""

from __future__ import annotations

import asyncio
import base64
import os
import struct
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tests.custom_models import build_tiny_cross_encoder, rerank_family  # noqa: E402
from xinference.engines.sentence_transformers.batcher import Batcher  # noqa: E402
from xinference.engines.sentence_transformers.engine import SentenceTransformersEngine  # noqa: E402
from xinference.errors import InvalidRequest, WrongModelType  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.download import resolve_model_path  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rerank_model_family(path: Path) -> ModelFamily:
    return ModelFamily.model_validate({**rerank_family("tiny-cross-encoder", path), "model_type": "rerank"})


def make_engine(family: ModelFamily, path: str, uid: str, **kwargs: object) -> SentenceTransformersEngine:
    return SentenceTransformersEngine(
        model_uid=uid,
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=path,
        config=SentenceTransformersEngine.parse_config(kwargs),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def embedder(loop):
    family = ModelRegistry().get("all-MiniLM-L6-v2")
    engine = make_engine(family, resolve_model_path(family.model_specs[0], "none"), "unit-minilm", batch_window_ms=20)
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


@pytest.fixture(scope="module")
def reranker(loop, tmp_path_factory):
    path = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "model")
    engine = make_engine(rerank_model_family(path), str(path), "unit-rerank", batch_window_ms=20)
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def embed(loop, engine, inputs, **extra):
    return loop.run_until_complete(engine.embed({"input": inputs, **extra}))


def test_embeddings_are_384d_and_semantic(loop, embedder) -> None:
    reply = embed(
        loop,
        embedder,
        ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly tax filings are due in April."],
    )
    vectors = np.array([d["embedding"] for d in reply["data"]])
    assert vectors.shape == (3, 384) and [d["index"] for d in reply["data"]] == [0, 1, 2]
    assert reply["model"] == "unit-minilm" and reply["object"] == "list"
    assert reply["usage"]["prompt_tokens"] == reply["usage"]["total_tokens"] > 10
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)


def test_base64_and_token_arrays(loop, embedder) -> None:
    text = "hello world"
    floats = embed(loop, embedder, [text])["data"][0]["embedding"]
    b64 = embed(loop, embedder, [text], encoding_format="base64")["data"][0]["embedding"]
    decoded = struct.unpack("<384f", base64.b64decode(b64))
    assert np.allclose(decoded, floats, atol=1e-6)
    ids = embedder._model.tokenizer(text, add_special_tokens=False)["input_ids"]
    from_ids = embed(loop, embedder, [ids])["data"][0]["embedding"]
    assert np.allclose(from_ids, floats, atol=1e-5)
    with pytest.raises(InvalidRequest, match="token ids"):
        embed(loop, embedder, [[10**9]])


def test_dimensions(loop, embedder) -> None:
    assert len(embed(loop, embedder, ["x"], dimensions=384)["data"][0]["embedding"]) == 384
    with pytest.raises(InvalidRequest, match="384-dimensional") as info:
        embed(loop, embedder, ["x"], dimensions=128)
    assert info.value.param == "dimensions"


def test_concurrent_requests_share_forward_passes(loop, embedder) -> None:
    before = embedder.stats()

    async def burst():
        return await asyncio.gather(*(embedder.embed({"input": [f"sentence number {i}"]}) for i in range(12)))

    replies = loop.run_until_complete(burst())
    after = embedder.stats()
    assert all(len(r["data"]) == 1 for r in replies)
    assert after["requests"] - before["requests"] == 12
    passes = after["forward_passes"] - before["forward_passes"]
    assert passes <= 2, after  # 12 requests, one 20 ms window: one pass (two if the window split them)
    assert after["max_requests_per_pass"] >= 6
    # each request got its own vector back, not its neighbour's
    solo = embed(loop, embedder, ["sentence number 7"])["data"][0]["embedding"]
    assert np.allclose(replies[7]["data"][0]["embedding"], solo, atol=1e-4)


def test_embedder_cannot_rerank(loop, embedder) -> None:
    with pytest.raises(WrongModelType):
        loop.run_until_complete(embedder.rerank({"query": "q", "documents": ["d"]}))


def test_tiny_cross_encoder_rerank_orders_by_model_scores(loop, reranker) -> None:
    from sentence_transformers import CrossEncoder

    query = "What is the capital of France?"
    docs = [
        "Paris is the capital of France.",
        "Bananas are yellow.",
        "The Eiffel Tower is in Paris.",
        "Berlin is in Germany.",
        "Water boils at 100 degrees.",
    ]
    reply = loop.run_until_complete(reranker.rerank({"query": query, "documents": docs, "return_documents": True}))
    expected = CrossEncoder(reranker.model_path, device="cpu").predict([(query, d) for d in docs])
    got = {r["index"]: r["relevance_score"] for r in reply["results"]}
    assert np.allclose([got[i] for i in range(len(docs))], expected, atol=1e-4)
    assert [r["index"] for r in reply["results"]] == sorted(range(len(docs)), key=lambda i: -expected[i])
    assert all(r["document"] == {"text": docs[r["index"]]} for r in reply["results"])
    assert reply["meta"]["tokens"]["input_tokens"] > 20 and reply["id"]

    top = loop.run_until_complete(reranker.rerank({"query": query, "documents": docs, "top_n": 2}))
    assert [r["index"] for r in top["results"]] == [r["index"] for r in reply["results"][:2]]
    assert all(r["document"] is None for r in top["results"])


def test_rerank_batches_concurrent_requests(loop, reranker) -> None:
    before = reranker.stats()

    async def burst():
        return await asyncio.gather(*(reranker.rerank({"query": f"q{i}", "documents": ["a", "b"]}) for i in range(6)))

    loop.run_until_complete(burst())
    after = reranker.stats()
    assert after["forward_passes"] - before["forward_passes"] <= 2
    assert after["max_requests_per_pass"] >= 3


def test_batcher_splits_large_rounds_and_fails_all_on_error() -> None:
    calls: list[int] = []

    def forward(items: list[int]) -> list[int]:
        calls.append(len(items))
        if -1 in items:
            raise ValueError("boom")
        return [i * 2 for i in items]

    async def scenario():
        batcher = Batcher(forward, max_batch_size=4, window_s=0.01)
        big, small = await asyncio.gather(batcher.submit(list(range(10))), batcher.submit([100]))
        assert big == [i * 2 for i in range(10)] and small == [200]
        results = await asyncio.gather(batcher.submit([1]), batcher.submit([-1]), return_exceptions=True)
        assert all(isinstance(r, ValueError) for r in results)
        stats = batcher.snapshot()
        await batcher.close()
        return stats

    stats = asyncio.run(scenario())
    # the 10-input request alone in passes of 4, 4, 2; then the lone one; then the failing pair
    assert calls == [4, 4, 2, 1, 2] and stats["forward_passes"] == 5 and stats["requests"] == 2


# -- one tokenization, length-sorted sub-batches, the arrival window, typed errors (issue 14 item 4, 13 item 9) --
def test_plan_groups_covers_every_input_once_and_cuts_where_padding_costs_more() -> None:
    from xinference.engines.sentence_transformers.grouping import plan_groups

    lengths = [70, 8, 9, 68, 10, 66, 8, 69]
    groups = plan_groups(lengths, pass_cost=24)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert [sorted(lengths[i] for i in g) for g in groups] == [[8, 8, 9, 10], [66, 68, 69, 70]]
    assert plan_groups(lengths, pass_cost=10**6) == [sorted(range(8), key=lambda i: lengths[i])]
    assert plan_groups([], 24) == [] and plan_groups([5], 24) == [[0]]


def test_one_tokenization_per_forward_pass(loop, embedder, monkeypatch) -> None:
    tokenizer_class = type(embedder._model.tokenizer)
    calls: list[int] = []
    real_call = tokenizer_class.__call__

    def counting_call(self, *args, **kwargs):
        calls.append(1)
        return real_call(self, *args, **kwargs)

    monkeypatch.setattr(tokenizer_class, "__call__", counting_call)
    reply = embed(loop, embedder, ["one short text", "and a second, rather longer text to embed"])
    assert len(reply["data"]) == 2
    assert len(calls) == 1  # before: once inside encode and again to count the usage


def test_mixed_lengths_embed_like_encode_one_at_a_time(loop, embedder) -> None:
    assert embedder._direct  # MiniLM: our padded token ids give what encode gives
    texts = ["Hi.", "A cat.", " ".join(["river bank"] * 40), "Short one here.", " ".join(["long text"] * 90)]
    reply = embed(loop, embedder, texts)
    got = np.array([d["embedding"] for d in reply["data"]])
    alone = np.array([embedder._model.encode([t], convert_to_numpy=True)[0] for t in texts])
    assert np.allclose(got, alone, atol=1e-4)
    tokenizer = embedder._model.tokenizer
    expected = sum(len(tokenizer(t, truncation=True, max_length=embedder._max_length)["input_ids"]) for t in texts)
    assert reply["usage"]["prompt_tokens"] == expected
    assert expected < 256 + 200  # the longest text was truncated to the model's 256 tokens


def test_window_grows_while_requests_arrive_and_never_opens_for_a_lone_client() -> None:
    passes: list[int] = []

    def forward(items: list[int]) -> list[int]:
        passes.append(len(items))
        return items

    async def scenario() -> dict[str, int]:
        # a gap of 0.3 s keeps the window open; arrivals every 0.1 s for 0.5 s outlast one gap but not the cap
        batcher = Batcher(forward, max_batch_size=64, window_s=0.3, max_window_s=5.0)

        async def late(i: int) -> list[int]:
            await asyncio.sleep(0.1 * i)
            return await batcher.submit([i])

        results = await asyncio.gather(*(late(i) for i in range(6)))
        assert results == [[i] for i in range(6)]
        grouped = batcher.snapshot()
        for i in range(4):  # one request at a time: nobody waits for company
            assert await batcher.submit([i]) == [i]
        stats = batcher.snapshot()
        await batcher.close()
        return {"passes_at_burst": grouped["forward_passes"], **{k: stats[k] - grouped[k] for k in stats}}

    stats = asyncio.run(scenario())
    assert stats["passes_at_burst"] == 1 and passes[0] == 6
    # after the burst, the first lone request may still get one window (the burst looked concurrent); no more
    assert stats["windows_opened"] <= 1 and stats["rounds_without_window"] >= 3


def test_closed_batcher_fails_queued_and_running_requests_with_503() -> None:
    import threading

    from xinference.errors import EngineError, ModelUnavailable

    release = threading.Event()

    def slow(items: list[int]) -> list[int]:
        release.wait(10)
        return items

    async def scenario() -> list[object]:
        batcher = Batcher(slow, max_batch_size=1, window_s=0.0)
        running = asyncio.ensure_future(batcher.submit([1]))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if batcher._serving:
                break
        queued = asyncio.ensure_future(batcher.submit([2]))
        await asyncio.sleep(0)
        await batcher.close()
        release.set()
        outcomes = await asyncio.wait_for(asyncio.gather(running, queued, return_exceptions=True), 10)
        try:
            await batcher.submit([3])
        except ModelUnavailable as exc:
            outcomes.append(exc)
        return outcomes

    outcomes = asyncio.run(scenario())
    assert len(outcomes) == 3 and all(isinstance(o, ModelUnavailable) for o in outcomes), outcomes
    assert all(o.status_code == 503 for o in outcomes)  # type: ignore[attr-defined]

    async def short_forward() -> None:
        batcher = Batcher(lambda items: items[:-1], max_batch_size=4, window_s=0.0)
        with pytest.raises(EngineError, match="returned 1 results for 2 inputs"):
            await batcher.submit([1, 2])
        await batcher.close()

    asyncio.run(short_forward())


def test_threads_follow_the_usable_cores_and_the_openmp_wait_policy() -> None:
    from xinference.engines.sentence_transformers.config import SentenceTransformersConfig, usable_cores

    def sized(config: SentenceTransformersConfig, cores: int, **kw: bool) -> tuple[int, int]:
        resolved = config.resolve(cpu_count=cores, gpu=kw.pop("gpu", False), **kw)
        return resolved.n_workers, resolved.n_threads

    config = SentenceTransformersConfig()
    assert sized(config, 2) == (1, 1)  # spinning threads: leave a core to the API
    assert sized(config, 2, passive_wait=True) == (1, 2)  # sleeping threads: every core
    assert sized(SentenceTransformersConfig(n_threads=3), 2, passive_wait=True) == (1, 3)
    # several passes at once share the threads, unless the user sized them; never on a GPU
    assert sized(SentenceTransformersConfig(n_workers=2), 2, passive_wait=True) == (2, 1)
    assert sized(SentenceTransformersConfig(n_workers=3, n_threads=2), 2, passive_wait=True) == (3, 2)
    assert sized(SentenceTransformersConfig(n_workers=2), 8, passive_wait=True, gpu=True) == (1, 8)
    assert 1 <= usable_cores(10_000) <= (os.cpu_count() or 1) and usable_cores(1) == 1


# -- several forward passes at once (issue 24 item 6) ----------------------------------------------------------------
def test_batcher_workers_run_passes_side_by_side_and_share_the_queue() -> None:
    import threading

    # Each pass waits until a second pass is running too: with one pass at a time this would time out.
    both_running = threading.Barrier(2, timeout=10)
    passes: list[list[int]] = []

    def forward(items: list[int]) -> list[int]:
        passes.append(list(items))
        both_running.wait()
        return [i * 10 for i in items]

    async def scenario() -> dict[str, int]:
        batcher = Batcher(forward, max_batch_size=32, window_s=0.05, workers=2)
        results = await asyncio.gather(*(batcher.submit([i]) for i in range(16)))
        assert results == [[i * 10] for i in range(16)]
        stats = batcher.snapshot()
        await batcher.close()
        return stats

    stats = asyncio.run(scenario())
    # the two idle workers took half the queue each, in arrival order
    assert sorted(len(p) for p in passes) == [8, 8] and sorted(passes) == [list(range(8)), list(range(8, 16))]
    assert stats["forward_passes"] == 2 and stats["max_parallel_passes"] == 2 and stats["requests"] == 16
    with pytest.raises(ValueError, match="workers"):
        Batcher(forward, max_batch_size=4, window_s=0.0, workers=0)


def test_closing_a_batcher_with_two_passes_running_fails_both_with_503() -> None:
    import threading

    from xinference.errors import ModelUnavailable

    release = threading.Event()

    def slow(items: list[int]) -> list[int]:
        release.wait(10)
        return items

    async def scenario() -> list[object]:
        batcher = Batcher(slow, max_batch_size=1, window_s=0.0, workers=2)
        running = [asyncio.ensure_future(batcher.submit([i])) for i in range(3)]
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(batcher._serving) == 2:
                break
        assert len(batcher._serving) == 2  # the third request waits for a free worker
        await batcher.close()
        release.set()
        return list(await asyncio.wait_for(asyncio.gather(*running, return_exceptions=True), 10))

    outcomes = asyncio.run(scenario())
    assert len(outcomes) == 3 and all(isinstance(o, ModelUnavailable) for o in outcomes), outcomes


@pytest.fixture(scope="module")
def pair_embedder(loop):
    family = ModelRegistry().get("all-MiniLM-L6-v2")
    path = resolve_model_path(family.model_specs[0], "none")
    engine = make_engine(family, path, "unit-minilm-pair", batch_window_ms=20, n_workers=2, n_threads=1)
    loop.run_until_complete(engine.load())
    yield engine
    loop.run_until_complete(engine.unload())


def test_two_workers_embed_concurrent_requests_like_one_at_a_time(loop, pair_embedder) -> None:
    engine = pair_embedder
    assert engine._direct and engine.stats()["workers"] == 2
    words = "river engine quietly harbour lantern orbit copper meadow signal winter ledger falcon".split()
    texts = [f"Note {i}: " + " ".join(words[: 2 + (i * 5) % 11] * (1 + i % 3)) for i in range(16)]
    before = engine.stats()

    async def burst() -> list[dict[str, object]]:
        return list(await asyncio.gather(*(engine.embed({"input": [text]}) for text in texts)))

    replies = loop.run_until_complete(burst())
    after = engine.stats()
    got = np.array([r["data"][0]["embedding"] for r in replies])  # type: ignore[index]
    alone = np.array([engine._model.encode([t], convert_to_numpy=True)[0] for t in texts])
    assert np.allclose(got, alone, atol=1e-4)
    tokenizer = engine._model.tokenizer
    assert [r["usage"]["prompt_tokens"] for r in replies] == [len(tokenizer(t)["input_ids"]) for t in texts]  # type: ignore[index]
    assert after["requests"] - before["requests"] == 16
    assert after["forward_passes"] - before["forward_passes"] <= 4  # 16 requests: two passes (a few more at most)
    assert after["max_parallel_passes"] >= 2 and after["max_requests_per_pass"] >= 4


def test_next_round_is_formed_while_the_current_one_computes() -> None:
    """One worker, two rounds in flight (the engine's default ``queued_rounds=1``): a burst is split over two
    passes, and the second is already formed and queued while the first computes, so the model never idles
    between them waiting for requests to come back."""
    passes: list[list[int]] = []
    in_flight: list[int] = []
    holder: dict[str, Batcher[int, int]] = {}

    def forward(items: list[int]) -> list[int]:
        passes.append(list(items))
        in_flight.append(len(holder["batcher"]._serving))
        return items

    async def scenario() -> dict[str, int]:
        batcher = holder["batcher"] = Batcher(forward, max_batch_size=32, window_s=0.05, workers=1, rounds=2)
        results = await asyncio.gather(*(batcher.submit([i]) for i in range(8)))
        assert results == [[i] for i in range(8)]
        stats = batcher.snapshot()
        await batcher.close()
        return stats

    stats = asyncio.run(scenario())
    assert passes == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert in_flight[0] == 2 and stats["max_parallel_passes"] == 2
