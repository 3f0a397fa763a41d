"""Model outputs in the exact shapes each format's models write (raw generated text, special tokens as decoded
text), with what a parser must find in them. Written down from the models' chat templates and published examples:
no such model runs on this machine, so none is a live recording."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["REASONING", "TOOL_CALLS", "Reasoned", "WithCalls"]


@dataclass(frozen=True)
class WithCalls:
    fmt: str
    text: str
    content: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


TOOL_CALLS = [
    # Qwen2.5-Instruct: one call, no text
    WithCalls(
        "hermes",
        '<tool_call>\n{"name": "get_current_weather", "arguments": {"location": "Paris, France", '
        '"unit": "celsius"}}\n</tool_call>',
        "",
        [("get_current_weather", {"location": "Paris, France", "unit": "celsius"})],
    ),
    # Qwen2.5: text before two parallel calls (the reported bug: text before a call was not parsed when streamed)
    WithCalls(
        "hermes",
        'Let me look both up for you.\n<tool_call>\n{"name": "get_current_weather", "arguments": '
        '{"location": "San Francisco, CA"}}\n</tool_call>\n<tool_call>\n{"name": "get_current_weather", '
        '"arguments": {"location": "Tokyo, \\"JP\\" {x}"}}\n</tool_call>',
        "Let me look both up for you.\n",
        [
            ("get_current_weather", {"location": "San Francisco, CA"}),
            ("get_current_weather", {"location": 'Tokyo, "JP" {x}'}),
        ],
    ),
    # Qwen3 with nested arguments and unicode
    WithCalls(
        "qwen3",
        '<tool_call>\n{"name": "book", "arguments": {"guests": [{"name": "Zoë", "age": 7}], '
        '"note": "</tool_call> inside a string"}}\n</tool_call>',
        "",
        [("book", {"guests": [{"name": "Zoë", "age": 7}], "note": "</tool_call> inside a string"})],
    ),
    # a marker the model opened without a call: stays content
    WithCalls("hermes", "I would call <tool_call> here but no.", "I would call <tool_call> here but no."),
    # plain answer with a less-than sign
    WithCalls("hermes", "3 < 4 and <tool is not a tag.", "3 < 4 and <tool is not a tag."),
    # Llama 3.1: built-in style with python_tag
    WithCalls(
        "llama3_json",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Berlin"}}',
        "",
        [("get_weather", {"city": "Berlin"})],
    ),
    # Llama 3.2: bare JSON, two calls separated by ';'
    WithCalls(
        "llama3_json",
        '{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"y": [true, null]}}',
        "",
        [("a", {"x": 1}), ("b", {"y": [True, None]})],
    ),
    # Llama: a JSON answer that is no call stays content; text first means no call
    WithCalls("llama3_json", '{"answer": 42}', '{"answer": 42}'),
    WithCalls("llama3_json", 'Here: {"name": "a", "parameters": {}}', 'Here: {"name": "a", "parameters": {}}'),
    # Mistral v0.3
    WithCalls(
        "mistral",
        '[TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris", '
        '"format": "celsius"}}, {"name": "get_time", "arguments": {}}]',
        "",
        [("get_current_weather", {"location": "Paris", "format": "celsius"}), ("get_time", {})],
    ),
    WithCalls("mistral", "Sure, it is sunny.", "Sure, it is sunny."),
]


@dataclass(frozen=True)
class Reasoned:
    text: str
    reasoning: str | None
    content: str
    primed: bool = False
    enabled: bool = True


REASONING = [
    # Qwen3 thinking on
    Reasoned(
        "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help?",
        "The user greets me. I should greet back.",
        "Hello! How can I help?",
    ),
    # Qwen3 with enable_thinking=false: the template closed an empty block; the model may still echo one
    Reasoned("<think>\n\n</think>\n\nHello!", None, "Hello!", enabled=False),
    Reasoned("Hello there!", None, "Hello there!", enabled=False),
    # DeepSeek-R1 distill: the template wrote "<think>\n"; the output has only the end tag
    Reasoned("Okay, 2+2 is 4.\n</think>\n\nThe answer is 4.", "Okay, 2+2 is 4.", "The answer is 4.", primed=True),
    # ... and the same when the engine cannot tell (tolerant of a missing opening tag)
    Reasoned("Okay, 2+2 is 4.\n</think>\n\nThe answer is 4.", "Okay, 2+2 is 4.", "The answer is 4."),
    # no tags at all: the answer stays the answer (never reasoning_content)
    Reasoned("Just an answer with a < sign.", None, "Just an answer with a < sign."),
    # cut by max_tokens while thinking
    Reasoned("<think>\nLet me think about this caref", "Let me think about this caref", ""),
]
