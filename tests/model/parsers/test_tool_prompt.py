"""Tools and earlier calls made renderable for chat templates with and without tool support."""

from __future__ import annotations

import json

from xinference.model.parsers.tool_prompt import history_for_template, template_renders_tools, with_tools
from xinference.model.prompt_render import render

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
]
# the way Qwen2.5's and Llama 3.1's templates write a call: arguments through tojson
TOOL_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
    "<call>{{ c.function.arguments | tojson }}</call>{% endfor %}"
    "{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}{{ tools | length }}"
)
PLAIN_TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"


def test_a_tool_template_gets_arguments_as_an_object() -> None:
    assert template_renders_tools(TOOL_TEMPLATE) and not template_renders_tools(PLAIN_TEMPLATE)
    text = render(TOOL_TEMPLATE, history_for_template(HISTORY, renders_tools=True), tools=TOOLS)
    assert '<call>{"city": "Paris"}</call>' in text  # encoded once, not a JSON string of JSON
    assert HISTORY[1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'  # input untouched


def test_a_plain_template_sees_the_call_and_the_tools() -> None:
    messages = with_tools(history_for_template(HISTORY, renders_tools=False), TOOLS)
    text = render(PLAIN_TEMPLATE, messages)
    assert text.startswith("system: You can call these functions:")
    assert json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}) in text
    assert "tool: 18 C" in text and "None" not in text


# how the new formats' templates write an earlier call (the parts that touch ``arguments``)
DEEPSEEK_V31_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tool in m.tool_calls %}"
    "{{ '<｜tool▁call▁begin｜>' + tool['function']['name'] + '<｜tool▁sep｜>' + tool['function']['arguments'] "
    "+ '<｜tool▁call▁end｜>' }}{% endfor %}{% endif %}{% endfor %}{{ tools | length }}"
)
DEEPSEEK_V3_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tool in m.tool_calls %}"
    "{{ 'function<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' "
    "+ tool['function']['arguments'] + '\\n' + '```' }}{% endfor %}{% endif %}{% endfor %}{{ tools | length }}"
)
QWEN3_CODER_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}"
    "<function={{ tc.function.name }}>{% for k, v in tc.function.arguments|items %}"
    "<parameter={{ k }}>{{ v }}</parameter>{% endfor %}</function>{% endfor %}{% endif %}{% endfor %}{{ tools }}"
)
KIMI_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}<|tool_call_begin|>{{ tc.id }}"
    "<|tool_call_argument_begin|>{% if tc.function.arguments is string %}{{ tc.function.arguments }}"
    "{% else %}{{ tc.function.arguments | tojson }}{% endif %}<|tool_call_end|>{% endfor %}{% endif %}{% endfor %}"
    "{{ tools | length }}"
)
PRINTING_TEMPLATE = (
    "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}\n"
    "{{ tc.function.arguments }}{% endfor %}{% endif %}{% endfor %}{{ tools | length }}"
)


def test_templates_of_the_new_formats_render_earlier_calls() -> None:
    history = history_for_template(HISTORY, renders_tools=True)
    args = '{"city": "Paris"}'
    rendered = {
        name: render(template, history, tools=TOOLS)
        for name, template in [
            ("deepseek_v31", DEEPSEEK_V31_TEMPLATE),
            ("deepseek_v3", DEEPSEEK_V3_TEMPLATE),
            ("qwen3_coder", QWEN3_CODER_TEMPLATE),
            ("kimi", KIMI_TEMPLATE),
            ("printing", PRINTING_TEMPLATE),
        ]
    }
    assert f"get_weather<｜tool▁sep｜>{args}<｜tool▁call▁end｜>" in rendered["deepseek_v31"]
    assert f"get_weather\n```json\n{args}\n```" in rendered["deepseek_v3"]
    assert "<function=get_weather><parameter=city>Paris</parameter></function>" in rendered["qwen3_coder"]
    assert f"<|tool_call_argument_begin|>{args}<|tool_call_end|>" in rendered["kimi"]
    assert f"get_weather\n{args}" in rendered["printing"]
