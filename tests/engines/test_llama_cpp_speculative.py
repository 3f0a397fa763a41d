"""Speculative decoding with llama.cpp on the real bundled SmolLM2: drafting for itself (the same GGUF as its own
draft model) and n-gram lookup give the plain model's greedy output and move the acceptance counters; drafts that
do not match their target are refused with a 400; enable_mtp attaches the catalog's draft over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from xinference.engines.base import chunk_dicts
from xinference.engines.llama_cpp.engine import LlamaCppEngine
from xinference.engines.llama_cpp.speculative import plan_speculation
from xinference.errors import InvalidRequest
from xinference.hardware import detect_hardware
from xinference.model.download import resolve_model_path
from xinference.model.draft import DraftAttachment, check_draft_compatible
from xinference.model.registry import ModelRegistry

#: Output that repeats its prompt: what n-gram lookup can draft from.
REPEATED = "The quick brown fox jumps over the lazy dog. " * 8
PROMPT = {
    "messages": [{"role": "user", "content": f"Repeat this text exactly: {REPEATED}"}],
    "max_tokens": 48,
    "temperature": 0,
}
OPEN = {
    "messages": [{"role": "user", "content": "Write two sentences about the sea."}],
    "max_tokens": 40,
    "temperature": 0,
}


@pytest.fixture(scope="module")
def smol_path() -> str:
    return resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1")


@pytest.fixture(scope="module")
def gemma_path() -> str:
    return resolve_model_path(ModelRegistry().get("gemma-3-270m").model_specs[0], "Q4_K_M")


def make_engine(path: str, uid: str, **options: Any) -> LlamaCppEngine:
    family = ModelRegistry().get("smollm2-instruct")
    return LlamaCppEngine(
        model_uid=uid,
        family=family,
        spec=family.model_specs[0],
        quantization="Q4_1",
        model_path=path,
        config=LlamaCppEngine.parse_config({"n_ctx": 2048, "n_parallel": 1, **options}),
        hardware=detect_hardware(),
    )


@pytest.fixture(scope="module")
def loaded(smol_path: str) -> Iterator[dict[str, LlamaCppEngine]]:
    engines = {
        "plain": make_engine(smol_path, "plain"),
        # the same GGUF drafting for itself, chosen by llama.cpp's own options
        "draft": make_engine(
            smol_path,
            "self-draft",
            **{"speculative.types": "draft_simple", "speculative.draft.mparams.path": smol_path},
        ),
        "ngram": make_engine(smol_path, "ngram", speculative={"types": ["ngram_simple"]}),
    }
    for engine in engines.values():
        asyncio.run(engine.load())
    yield engines
    for engine in engines.values():
        asyncio.run(engine.unload())


def text_of(engine: LlamaCppEngine, request: dict[str, Any]) -> str:
    reply = asyncio.run(engine.chat(request))
    assert "timings" not in reply
    return str(reply["choices"][0]["message"]["content"])


def streamed_text(engine: LlamaCppEngine, request: dict[str, Any]) -> str:
    async def run() -> str:
        stream = await engine.chat_stream(request)
        parts: list[str] = []
        done = False
        while not done:
            batch, done = await stream.next_batch()
            for chunk in chunk_dicts(batch):
                assert "timings" not in chunk
                for choice in chunk.get("choices") or ():
                    parts.append((choice.get("delta") or {}).get("content") or "")
        return "".join(parts)

    return asyncio.run(run())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["draft", "ngram"])
def test_greedy_output_is_unchanged_and_counters_move(loaded: dict[str, LlamaCppEngine], mode: str) -> None:
    plain, fast = loaded["plain"], loaded[mode]
    assert not [key for key in plain.stats() if key.startswith("spec")]  # no speculation: nothing to report
    assert fast.resolved.speculative["types"] == (["draft_simple"] if mode == "draft" else ["ngram_simple"])
    before = fast.stats()
    expected = text_of(plain, PROMPT)
    assert "quick brown fox" in expected
    assert text_of(fast, PROMPT) == expected
    after = fast.stats()
    assert after["spec_requests"] == before["spec_requests"] + 1
    assert after["spec_draft_tokens"] > before["spec_draft_tokens"]
    assert after["spec_accepted_tokens"] > before["spec_accepted_tokens"]
    assert 0 < after["spec_acceptance_rate"] <= 1
    # a streamed request is counted too (llama.cpp reports its drafts on the last chunk)
    assert streamed_text(fast, PROMPT) == expected
    assert fast.stats()["spec_requests"] == after["spec_requests"] + 1


@pytest.mark.slow
def test_self_draft_keeps_open_ended_output(loaded: dict[str, LlamaCppEngine]) -> None:
    assert text_of(loaded["draft"], OPEN) == text_of(loaded["plain"], OPEN)


# -- refused drafts ---------------------------------------------------------------------------------------------
def test_a_draft_from_another_vocabulary_is_refused(smol_path: str, gemma_path: str) -> None:
    for source in ("user", "catalog"):
        draft = DraftAttachment(path=gemma_path, source=source, name="gemma-3-270m")
        with pytest.raises(InvalidRequest) as caught:
            check_draft_compatible(smol_path, draft)
        assert caught.value.status_code == 400
        assert "tokenizer is llama, the target's is gpt2" in caught.value.message
        assert caught.value.param == ("draft_model_path" if source == "user" else "enable_mtp")


def test_a_user_draft_not_smaller_than_its_target_is_refused(smol_path: str) -> None:
    with pytest.raises(InvalidRequest, match="not fewer than the target's"):
        check_draft_compatible(smol_path, DraftAttachment(path=smol_path, source="user", name="itself"))


def test_a_refused_draft_stops_the_load(smol_path: str, gemma_path: str) -> None:
    engine = make_engine(smol_path, "refused", draft={"path": gemma_path, "source": "user", "name": "gemma"})
    with pytest.raises(InvalidRequest, match="gemma cannot draft for this model"):
        asyncio.run(engine.load())


# -- who decides the drafter ------------------------------------------------------------------------------------
def test_explicit_options_win_over_a_catalog_draft(smol_path: str) -> None:
    catalog = {"path": "/drafts/small.gguf", "source": "catalog", "name": "small 0_1"}
    config = LlamaCppEngine.parse_config({"draft": catalog, "speculative.types": "ngram_mod"})
    resolved = config.resolve(cpu_count=2, context_length=2048, gpu=False)  # type: ignore[attr-defined]
    extra, summary = plan_speculation(resolved, smol_path)
    assert extra == {} and summary["types"] == ["ngram_mod"]
    assert "small 0_1" in summary["ignored_draft"] and "draft" not in summary


def test_a_catalog_draft_fills_what_the_user_left_unset(smol_path: str) -> None:
    catalog = {"path": smol_path, "source": "catalog", "name": "smol"}
    config = LlamaCppEngine.parse_config({"draft": catalog, "speculative.draft.n_max": 6})
    resolved = config.resolve(cpu_count=2, context_length=2048, gpu=False)  # type: ignore[attr-defined]
    extra, summary = plan_speculation(resolved, smol_path)
    assert extra["speculative.types"] == ["draft_simple"]
    assert extra["speculative.draft.mparams.path"] == smol_path
    assert extra["speculative.draft.n_gpu_layers"] == 0  # a CPU target keeps its draft on the CPU
    assert summary == {"draft": "smol", "draft_source": "catalog", "types": ["draft_simple"]}
    mtp = LlamaCppEngine.parse_config({"draft": {**catalog, "kind": "mtp"}})
    extra, _ = plan_speculation(mtp.resolve(cpu_count=2, context_length=2048, gpu=False), smol_path)  # type: ignore[attr-defined]
    assert extra["speculative.types"] == ["draft_mtp"]


# -- over HTTP: enable_mtp and draft_model_path -----------------------------------------------------------------
def register(api: str, name: str, folder: str, size: str, draft: dict[str, Any]) -> None:
    spec = {
        "model_name": name,
        "model_ability": ["chat", "generate"],
        "context_length": 2048,
        "model_specs": [
            {
                "model_format": "ggufv2",
                "model_size_in_billions": size,
                "quantizations": ["Q4_1"],
                "model_uri": f"file://{folder}",
                "draft_model": draft,
            }
        ],
    }
    response = httpx.post(f"{api}/model_registrations/LLM", json={"model": json.dumps(spec), "persist": False})
    assert response.status_code == 200, response.text


@pytest.mark.slow
def test_enable_mtp_over_http(local_server, smol_path: str, gemma_path: str, tmp_path) -> None:
    api = local_server.api
    os.symlink(smol_path, tmp_path / "smol.Q4_1.gguf")
    smol_draft = {"model_name": "smollm2-instruct", "model_size_in_billions": "0_135", "quantization": "Q4_1"}

    def launch(**body: Any) -> httpx.Response:
        return httpx.post(f"{api}/models", timeout=120, json={"n_ctx": 1024, "n_parallel": 1, **body})

    def refused(response: httpx.Response, needle: str, param: str) -> None:
        assert response.status_code == 400, response.text
        assert needle in response.json()["error"]["message"]
        assert response.json()["error"]["param"] == param

    refused(
        launch(model_name="smollm2-instruct", model_uid="no-draft", enable_mtp=True),
        "smollm2-instruct 0_135 ggufv2 declares no draft model",
        "enable_mtp",
    )
    refused(
        launch(
            model_name="smollm2-instruct",
            model_uid="tf",
            model_engine="Transformers",
            model_format="pytorch",
            model_size_in_billions="0_135",
            enable_mtp=True,
        ),
        "Transformers cannot attach a draft model",
        "enable_mtp",
    )
    register(api, "smol-tiny-target", str(tmp_path), "0_1", smol_draft)
    refused(
        launch(model_name="smol-tiny-target", enable_mtp=True),
        "is not smaller than the target smol-tiny-target",
        "enable_mtp",
    )
    refused(
        launch(model_name="smollm2-instruct", model_uid="gemma-draft", draft_model_path=gemma_path),
        "its tokenizer is llama, the target's is gpt2",
        "draft_model_path",
    )

    # A target registered as a 1B model (the same small weights: a stand-in for a bigger sibling) drafted by the
    # catalog's 135M SmolLM2, attached by enable_mtp.
    register(api, "smol-as-1b", str(tmp_path), "1", smol_draft)
    launched = launch(model_name="smol-as-1b", enable_mtp="true")
    assert launched.status_code == 200, launched.text
    try:
        config = httpx.get(f"{api}/models/smol-as-1b", timeout=10).json()["engine_config"]
        assert config["speculative"] == {
            "draft": "smollm2-instruct 0_135 ggufv2 Q4_1",
            "draft_source": "catalog",
            "types": ["draft_simple"],
        }
        assert "draft" not in config and smol_path not in json.dumps(config)  # no local path in the result
        # few tokens, a long timeout: on a crowded 2-core machine llama.cpp's spinning threads can crawl
        request = {**PROMPT, "max_tokens": 12}
        drafted = httpx.post(f"{api}/chat/completions", timeout=300, json={**request, "model": "smol-as-1b"})
        plain = httpx.post(f"{api}/chat/completions", timeout=300, json={**request, "model": "smollm2-instruct"})
        assert drafted.status_code == plain.status_code == 200
        assert drafted.json()["choices"][0]["message"]["content"] == plain.json()["choices"][0]["message"]["content"]
        # the acceptance counters reach Prometheus through the engine's stats
        metrics = httpx.get(f"{local_server.endpoint}/metrics", timeout=30).text
        drafted_lines = [
            line
            for line in metrics.splitlines()
            if line.startswith("xinference:engine_spec_draft_tokens") and '"smol-as-1b"' in line
        ]
        assert drafted_lines and float(drafted_lines[0].rsplit(" ", 1)[1]) > 0, metrics[-2000:]
    finally:
        httpx.delete(f"{api}/models/smol-as-1b", timeout=60)
        for name in ("smol-as-1b", "smol-tiny-target"):
            httpx.delete(f"{api}/model_registrations/LLM/{name}", timeout=10)
