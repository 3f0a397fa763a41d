"""Image parts on their way to vLLM's server (no server runs): every spelling the platform accepts becomes
OpenAI's ``image_url`` part, the caller's messages are never edited, and the vision launch options become vLLM's
arguments (``--limit-mm-per-prompt``, ``--mm-processor-kwargs``) or a 400."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.machines import linux
from xinference.engines.managed.vision import openai_image_messages
from xinference.engines.vllm.config import VLLMConfig
from xinference.engines.vllm.engine import VLLMEngine
from xinference.errors import InvalidRequest
from xinference.model.registry import ModelRegistry

QWEN3 = ModelRegistry().get("qwen3")
SPEC = next(s for s in QWEN3.model_specs if s.model_format == "pytorch")
PNG = "data:image/png;base64,iVBORw0KGgo="


def _engine(**options: Any) -> VLLMEngine:
    return VLLMEngine(
        model_uid="vl",
        family=QWEN3,
        spec=SPEC,
        quantization="none",
        model_path="/m",
        config=VLLMEngine.parse_config(options),
        hardware=linux(),
    )


def test_every_image_spelling_becomes_an_openai_part() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_image", "image_url": PNG, "detail": "low"},
                {"type": "text", "text": "and"},
                {"type": "image_url", "image_url": PNG},
                {"type": "image", "image": PNG},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
            ],
        },
    ]
    original = json.loads(json.dumps(messages))
    result = openai_image_messages(messages)
    assert messages == original  # the caller's request is untouched
    assert result[0] is messages[0]  # messages without images are passed on as they are
    assert result[1]["content"] == [
        {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
        {"type": "text", "text": "and"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
    ]
    canonical = [{"role": "user", "content": [result[1]["content"][4]]}]
    assert openai_image_messages(canonical)[0] is canonical[0]


def test_an_image_part_without_a_url_is_a_400_naming_it() -> None:
    with pytest.raises(InvalidRequest) as caught:
        openai_image_messages([{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image"}]}])
    assert caught.value.param == "messages[0].content[1].image"


def test_the_server_body_carries_openai_parts() -> None:
    request = {"messages": [{"role": "user", "content": [{"type": "input_image", "image_url": PNG}]}]}
    body = _engine().translate_request(request, "chat")
    assert body["messages"][0]["content"] == [{"type": "image_url", "image_url": {"url": PNG}}]
    assert request["messages"][0]["content"][0]["type"] == "input_image"


def test_vision_options_become_server_arguments() -> None:
    args = _engine(
        limit_mm_per_prompt={"image": 2, "video": 0}, mm_processor_kwargs={"max_pixels": 1003520}
    ).server_args(python="p", port=9, api_key="k")
    assert json.loads(args[args.index("--limit-mm-per-prompt") + 1]) == {"image": 2, "video": 0}
    assert json.loads(args[args.index("--mm-processor-kwargs") + 1]) == {"max_pixels": 1003520}
    plain = VLLMConfig().to_cli_args(model_path="/m", served_model_name="u", host="h", port=1)
    assert "--limit-mm-per-prompt" not in plain and "--mm-processor-kwargs" not in plain


def test_the_cli_gives_the_options_as_json_text() -> None:
    from xinference.cli.options import parse_engine_options

    options = parse_engine_options(["--limit_mm_per_prompt", '{"image": 3}', "--mm_processor_kwargs", '{"a": 1}'])
    config = VLLMEngine.parse_config(options)
    assert isinstance(config, VLLMConfig)
    assert config.limit_mm_per_prompt == {"image": 3} and config.mm_processor_kwargs == {"a": 1}
    with pytest.raises(InvalidRequest, match="limit_mm_per_prompt"):
        VLLMEngine.parse_config({"limit_mm_per_prompt": "image=3"})


@pytest.mark.parametrize(
    "limits",
    [{"image": -1}, {"image": 65}, {"image": True}, {"image": "2"}, {"picture": 1}, {"image": 1.5}],
)
def test_bad_limits_are_400(limits: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest, match="limit_mm_per_prompt"):
        VLLMEngine.parse_config({"limit_mm_per_prompt": limits})


def test_every_engine_with_a_vision_path_says_it_reads_images() -> None:
    """The catalog check (a vision family needs an engine that reads images) trusts this flag."""
    from xinference.engines.registry import get_engine_class

    readers = {"vLLM", "SGLang", "MLX", "Transformers", "llama.cpp"}
    for name in readers:
        assert get_engine_class(name).reads_images, name
    assert not get_engine_class("sentence_transformers").reads_images
