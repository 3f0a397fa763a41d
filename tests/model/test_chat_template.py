"""Chat templates: found where models keep them, rendered in a sandbox that hostile templates cannot escape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jinja2.sandbox import SecurityError

from xinference.errors import InvalidRequest
from xinference.model.chat_template import find_chat_template, gguf_metadata_string
from xinference.model.download import resolve_model_path
from xinference.model.prompt_render import UnsafeTemplate, render
from xinference.model.registry import ModelRegistry

CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


def _smollm2() -> tuple[object, str]:
    family = ModelRegistry().get("smollm2-instruct")
    return family, resolve_model_path(family.model_specs[0], "Q4_1")


def test_renders_the_bundled_gguf_template() -> None:
    family, path = _smollm2()
    template = find_chat_template(family, path)  # type: ignore[arg-type]
    assert template is not None and "<|im_start|>" in template
    prompt = render(template, CONVERSATION)
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    )
    assert not render(template, CONVERSATION, add_generation_prompt=False).endswith("assistant\n")


def test_gguf_reader_reads_the_template_and_misses_cleanly(tmp_path: Path) -> None:
    _, path = _smollm2()
    template = gguf_metadata_string(path, "tokenizer.chat_template")
    assert template is not None and template.startswith("{% for message in messages %}")
    assert gguf_metadata_string(path, "no.such.key") is None
    (tmp_path / "bad.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    assert gguf_metadata_string(str(tmp_path / "bad.gguf"), "tokenizer.chat_template") is None


def test_precedence_family_then_tokenizer_config(tmp_path: Path) -> None:
    family, path = _smollm2()
    own = family.model_copy(update={"chat_template": "{{ 'family' }}"})  # type: ignore[attr-defined]
    assert find_chat_template(own, path) == "{{ 'family' }}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ 'tokenizer' }}"}))
    assert find_chat_template(family, str(tmp_path)) == "{{ 'tokenizer' }}"  # type: ignore[arg-type]
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": [{"name": "tool_use", "template": "t"}, {"name": "default", "template": "d"}]})
    )
    assert find_chat_template(family, str(tmp_path)) == "d"  # type: ignore[arg-type]


def test_helpers_and_errors() -> None:
    assert render("{{ messages | tojson }}", [{"role": "user", "content": "é"}]) == '[{"role": "user", "content": "é"}]'
    with pytest.raises(InvalidRequest, match="only user and assistant"):
        render("{{ raise_exception('only user and assistant roles') }}", CONVERSATION)
    with pytest.raises(InvalidRequest, match="does not compile"):
        render("{% for %}", CONVERSATION)


HOSTILE = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ joiner.__init__.__globals__['os'].system('echo pwned') }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ self._TemplateReference__context }}",
    "{{ messages.append({'role': 'x'}) }}",
    "{{ messages[0].update({'role': 'x'}) }}",
    "{{ messages.__class__ }}",
    "{{ '{0.__class__}'.format(messages) }}",
    "{% set x = messages.pop() %}",
]


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_templates_cannot_reach_internals(template: str) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(UnsafeTemplate) as info:
        render(template, messages)
    assert isinstance(info.value, InvalidRequest) and isinstance(info.value.__cause__, SecurityError)
    assert messages == [{"role": "user", "content": "hi"}]  # nothing was mutated
