"""Causal-LM rerankers (Qwen3-Reranker) on the sentence-transformers engine, on a tiny Qwen3ForCausalLM built with
random weights from transformers' own classes and a word-level tokenizer that has the prompt's words and the
``yes``/``no`` tokens. The scores mean nothing semantically; the tests check the formula (softmax over the no/yes
logits at the last prompt position), the prompt, truncation, batching and the engine's refusals."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from tests.machines import linux  # noqa: E402
from xinference.engines.sentence_transformers.causal_rerank import (  # noqa: E402
    DEFAULT_INSTRUCTION,
    PROMPT_PREFIX,
    PROMPT_SUFFIX,
    YesNoScorer,
    unsupported_causal_reranker,
)
from xinference.engines.sentence_transformers.engine import SentenceTransformersEngine  # noqa: E402
from xinference.errors import LaunchFailed  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PAIRS = [
    ("what is the capital of china", "the capital of china is beijing"),
    ("what is the capital of china", "gravity is a force that attracts two bodies"),
    ("explain gravity", "gravity is a force that attracts two bodies towards each other and gives weight"),
    ("explain gravity", "beijing"),
]


def _build_tiny_qwen3_reranker(target: Path) -> Path:
    """A 2-layer Qwen3ForCausalLM (seeded random weights) and a word-level tokenizer over the prompt's words."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    if (target / "config.json").exists():
        return target
    specials = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    corpus = " ".join(
        [PROMPT_PREFIX, PROMPT_SUFFIX, DEFAULT_INSTRUCTION, "Instruct Query Document yes no"]
        + [f"{q} {d}" for q, d in PAIRS]
    )
    words = [w for w, _ in Whitespace().pre_tokenize_str(corpus) if w not in specials]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(specials + words))}
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()
    backend.add_special_tokens(specials)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    config = Qwen3Config(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"],
        architectures=["Qwen3ForCausalLM"],
    )
    torch.manual_seed(7)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.15)  # yes/no logits a few units apart: scores well inside (0, 1)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_tiny_qwen3_reranker(tmp_path_factory.mktemp("tiny-qwen3-reranker"))


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_path: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    model.eval()
    return model, AutoTokenizer.from_pretrained(tiny_path)


def _reference_score(model: Any, tokenizer: Any, query: str, document: str, instruction: str) -> float:
    """The model card's formula on one unpadded prompt: softmax over (no, yes) logits at the last position."""
    text = PROMPT_PREFIX + f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}" + PROMPT_SUFFIX
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, -1]
    yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
    return float(torch.exp(logits[yes]) / (torch.exp(logits[yes]) + torch.exp(logits[no])))


def test_scores_are_p_yes_at_the_last_position_alone_or_in_a_padded_batch(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    scorer = YesNoScorer(model, tokenizer, device="cpu", max_length=256)
    rows = scorer.encode(PAIRS)
    assert len({len(row) for row in rows}) > 1  # mixed lengths: the batch is padded
    with torch.no_grad():
        batched = scorer.score(rows)
    expected = [_reference_score(model, tokenizer, q, d, DEFAULT_INSTRUCTION) for q, d in PAIRS]
    assert batched == pytest.approx(expected, abs=1e-5)
    assert all(0.0 < s < 1.0 for s in batched)
    assert max(expected) - min(expected) > 1e-3  # the check above compares distinct numbers


def test_the_instruction_is_part_of_the_prompt(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    plain = YesNoScorer(model, tokenizer, device="cpu", max_length=256)
    custom = YesNoScorer(model, tokenizer, device="cpu", max_length=256, instruction="explain gravity")
    assert plain.body("q", "d").startswith(f"<Instruct>: {DEFAULT_INSTRUCTION}\n<Query>: q\n<Document>: d")
    with torch.no_grad():
        got = custom.score(custom.encode(PAIRS[:1]))[0]
    assert got == pytest.approx(_reference_score(model, tokenizer, *PAIRS[0], "explain gravity"), abs=1e-5)


def test_long_documents_are_cut_inside_the_user_turn(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    scorer = YesNoScorer(model, tokenizer, device="cpu", max_length=80)
    suffix = tokenizer.encode(PROMPT_SUFFIX, add_special_tokens=False)
    prefix = tokenizer.encode(PROMPT_PREFIX, add_special_tokens=False)
    (row,) = scorer.encode([("explain gravity", "gravity " * 500)])
    assert len(row) == 80
    assert row[: len(prefix)] == prefix and row[-len(suffix) :] == suffix


def test_a_tokenizer_without_yes_no_is_refused(model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer

    class NoYes:
        unk_token_id = tokenizer.unk_token_id
        pad_token_id = tokenizer.pad_token_id
        eos_token_id = tokenizer.eos_token_id

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return list(tokenizer.encode(text, add_special_tokens=add_special_tokens))

        def convert_tokens_to_ids(self, token: str) -> int:
            return int(tokenizer.unk_token_id)

    with pytest.raises(ValueError, match="no 'yes' token"):
        YesNoScorer(model, NoYes(), device="cpu", max_length=256)


def _family(path: Path, architectures: list[str], name: str = "tiny-qwen3-reranker") -> ModelFamily:
    return ModelFamily.model_validate(
        {
            "model_name": name,
            "model_type": "rerank",
            "model_ability": ["rerank"],
            "max_tokens": 256,
            "architectures": architectures,
            "model_specs": [
                {
                    "model_format": "pytorch",
                    "model_size_in_billions": "0_01",
                    "quantizations": ["none"],
                    "model_uri": f"file://{path}",
                }
            ],
        }
    )


def _engine(family: ModelFamily, path: Path, **kwargs: object) -> SentenceTransformersEngine:
    return SentenceTransformersEngine(
        model_uid="tiny-qwen3-reranker",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(path),
        config=SentenceTransformersEngine.parse_config(kwargs),
        hardware=detect_hardware(),
    )


def test_engine_reranks_with_the_yes_no_scorer(tiny_path: Path, model_and_tokenizer) -> None:
    model, tokenizer = model_and_tokenizer
    engine = _engine(_family(tiny_path, ["Qwen3ForCausalLM"]), tiny_path, max_batch_size=8)

    async def run() -> dict[str, Any]:
        await engine.load()
        try:
            return await engine.rerank(
                {"query": PAIRS[0][0], "documents": [d for _, d in PAIRS], "return_documents": True}
            )
        finally:
            await engine.unload()

    result = asyncio.run(run())
    expected = [_reference_score(model, tokenizer, PAIRS[0][0], d, DEFAULT_INSTRUCTION) for _, d in PAIRS]
    order = sorted(range(len(PAIRS)), key=lambda i: expected[i], reverse=True)
    assert [r["index"] for r in result["results"]] == order
    for item in result["results"]:
        assert item["relevance_score"] == pytest.approx(expected[item["index"]], abs=1e-5)
        assert item["document"] == {"text": PAIRS[item["index"]][1]}
    assert result["meta"]["tokens"]["input_tokens"] > 0


def test_match_refuses_causal_rerankers_without_a_known_prompt() -> None:
    gemma = _family(Path("/nonexistent"), ["GemmaForCausalLM"], name="bge-reranker-v2-gemma-like")
    verdict = SentenceTransformersEngine.match(gemma, gemma.model_specs[0], linux())
    assert not verdict and "GemmaForCausalLM" in verdict.reason and "Qwen3-Reranker" in verdict.reason
    qwen = _family(Path("/nonexistent"), ["Qwen3ForCausalLM"])
    assert SentenceTransformersEngine.match(qwen, qwen.model_specs[0], linux())
    assert unsupported_causal_reranker(["XLMRobertaForSequenceClassification"]) is None


def test_remote_code_models_need_trust_remote_code(tiny_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "remote"
    shutil.copytree(tiny_path, copy)
    config = json.loads((copy / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.CustomModel"}
    (copy / "config.json").write_text(json.dumps(config))
    engine = _engine(_family(copy, ["Qwen3ForCausalLM"]), copy)
    with pytest.raises(LaunchFailed, match="trust_remote_code=true"):
        asyncio.run(engine.load())
