"""What the managed-server engines (vLLM, SGLang) send their server: thinking switches moved into
``chat_template_kwargs``, and SGLang's ``count_tokens`` request (its prompt rendered here, counted by ``/tokenize``).

No server runs: the engines are built as the worker builds them, and SGLang's HTTP client is replaced by an
``httpx.MockTransport`` that records the request and answers as SGLang's ``/tokenize`` does.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.machines import linux
from xinference.engines.managed.engine import server_template_kwargs
from xinference.engines.sglang.engine import SGLangEngine
from xinference.engines.sglang.prompt import ChatPrompt, special_tokens
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.model.registry import ModelRegistry

CUDA = linux(cores=8, ram_total=64, ram_free=60, gpus=1, gpu_name="A100", vram=40, vram_free=39)
QWEN3 = ModelRegistry().get("qwen3").model_copy(update={"chat_template": None})  # the folder's template is used
SPEC = next(s for s in QWEN3.model_specs if s.model_format == "pytorch")
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
#: a Qwen3-like template: thinking off writes an empty think block, tools are listed, content may be parts
TEMPLATE = (
    "{{ bos_token }}{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function.arguments | tojson }}</call>{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
    "{% if reasoning_effort is defined %}[effort={{ reasoning_effort }}]{% endif %}"
)


def _engine(cls: type, model_path: str = "/m") -> Any:
    return cls(
        model_uid="q",
        family=QWEN3,
        spec=SPEC,
        quantization="none",
        model_path=model_path,
        config=cls.parse_config({}),
        hardware=CUDA,
    )


@pytest.mark.parametrize("cls", [VLLMEngine, SGLangEngine])
def test_top_level_enable_thinking_moves_into_chat_template_kwargs(cls: type) -> None:
    engine = _engine(cls)
    request = {"messages": QUESTION, "enable_thinking": False, "chat_template_kwargs": {"custom": 1}}
    body = engine.translate_request(request, "chat")
    assert "enable_thinking" not in body
    assert body["chat_template_kwargs"] == {"custom": 1, "enable_thinking": False}  # the user's kwargs kept
    assert request == {"messages": QUESTION, "enable_thinking": False, "chat_template_kwargs": {"custom": 1}}
    # the top level wins over the kwargs, as thinking_enabled reads it for the output parser
    body = engine.translate_request(
        {"messages": QUESTION, "enable_thinking": True, "chat_template_kwargs": {"enable_thinking": False}}, "chat"
    )
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    # nothing to move: no kwargs are invented
    assert "chat_template_kwargs" not in engine.translate_request({"messages": QUESTION}, "chat")


@pytest.mark.parametrize("cls", [VLLMEngine, SGLangEngine])
def test_reasoning_effort_reaches_the_template(cls: type) -> None:
    engine = _engine(cls)
    high = engine.translate_request({"messages": QUESTION, "reasoning_effort": "high", "enable_thinking": True}, "chat")
    assert high["chat_template_kwargs"] == {"enable_thinking": True, "reasoning_effort": "high"}
    assert high["reasoning_effort"] == "high"  # a value the servers also read at the top level (gpt-oss)
    none = engine.translate_request(
        {"messages": QUESTION, "reasoning_effort": "none", "enable_thinking": False}, "chat"
    )
    assert "reasoning_effort" not in none and none["chat_template_kwargs"]["reasoning_effort"] == "none"
    kept = engine.translate_request(
        {"messages": QUESTION, "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "medium"}},
        "chat",
    )
    assert kept["chat_template_kwargs"] == {"reasoning_effort": "medium"}


def test_server_template_kwargs_does_not_touch_the_request() -> None:
    kwargs = {"thinking": True}
    request = {"chat_template_kwargs": kwargs, "enable_thinking": False}
    assert server_template_kwargs(request) == {"thinking": True, "enable_thinking": False}
    assert kwargs == {"thinking": True}


def _folder(tmp_path: Path, template: str = TEMPLATE) -> str:
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps(
            {"chat_template": template, "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "<|im_end|>"}
        )
    )
    return str(tmp_path)


def test_special_tokens_read_from_the_tokenizer_config(tmp_path: Path) -> None:
    assert special_tokens(_folder(tmp_path)) == {
        "bos_token": "<s>",
        "eos_token": "<|im_end|>",
        "unk_token": "",
        "pad_token": "",
    }
    assert special_tokens(str(tmp_path / "absent"))["bos_token"] == ""


def test_sglang_count_tokens_renders_then_asks_tokenize(tmp_path: Path) -> None:
    engine = _engine(SGLangEngine, _folder(tmp_path))
    sent: list[tuple[str, dict[str, Any]]] = []

    def tokenize(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append((request.url.path, body))
        return httpx.Response(
            200, json={"tokens": list(range(len(body["prompt"]))), "count": len(body["prompt"]), "max_model_len": 4096}
        )

    engine._client = httpx.AsyncClient(transport=httpx.MockTransport(tokenize), base_url="http://sglang")
    engine._server = object()  # loaded, as far as the engine can tell
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    history = [
        *QUESTION,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    count = asyncio.run(engine.count_tokens({"messages": history, "tools": tools, "enable_thinking": False}))
    [(path, body)] = sent
    assert path == "/tokenize" and body["model"] == "q" and body["add_special_tokens"] is False
    prompt = body["prompt"]
    assert count == len(prompt)
    assert prompt.startswith("<s><tools>get_weather;</tools><|im_start|>user\nWhat is the capital of France?")
    assert '<call>{"city": "Paris"}</call>' in prompt  # arguments given to the template as an object, as SGLang does
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # enable_thinking reached the template


def test_sglang_prompt_content_parts(tmp_path: Path) -> None:
    prompt = ChatPrompt(QWEN3, _folder(tmp_path), "q")
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}]
    assert "<|im_start|>user\nHello there<|im_end|>" in prompt.render({"messages": parts})  # joined as SGLang does
    looping = "{% for m in messages %}{% for part in m['content'] %}{{ part.text }}|{% endfor %}{% endfor %}"
    (tmp_path / "parts").mkdir()
    assert ChatPrompt(QWEN3, _folder(tmp_path / "parts", looping), "q").render({"messages": parts}) == "Hello|there|"
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
    with pytest.raises(UnsupportedOption) as refused:
        prompt.render({"messages": image})
    assert refused.value.param == "messages[0]"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidRequest, match="no chat template"):
        ChatPrompt(QWEN3, str(empty), "q").render({"messages": QUESTION})


def test_sglang_prompt_gives_tools_as_sglang_does(tmp_path: Path) -> None:
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in ("get_weather", "get_time")
    ]
    # tools is null without tools, as Hugging Face's apply_chat_template passes it: real templates test it first
    bare = (
        "{% if tools %}{% for t in tools %}{{ t | tojson }};{% endfor %}{% endif %}|"
        "{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    prompt = ChatPrompt(QWEN3, _folder(tmp_path, bare), "q")
    rendered = prompt.render({"messages": QUESTION, "tools": tools})
    assert rendered.startswith(
        '{"description": null, "name": "get_weather", "parameters": {"type": "object"}, '
        '"strict": false};{"description": null, "name": "get_time"'
    )
    named = prompt.render(
        {"messages": QUESTION, "tools": tools, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}
    )
    assert "get_time" in named and "get_weather" not in named.split("|")[0]
    assert prompt.render({"messages": QUESTION, "tools": tools, "tool_choice": "none"}).startswith("|")
    # TEMPLATE reads t.function.name: the bare form fails there, so the tools are wrapped (SGLang's retry)
    (tmp_path / "wrapped").mkdir()
    wrapped = ChatPrompt(QWEN3, _folder(tmp_path / "wrapped"), "q")
    assert "<tools>get_weather;get_time;</tools>" in wrapped.render({"messages": QUESTION, "tools": tools})
