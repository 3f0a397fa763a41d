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


# -- the formats beyond hermes/llama3/mistral: each sample in the exact shape its models write (special tokens as
#    decoded text), from the models' chat templates, their published tool-call examples and the outputs quoted in
#    Xinference's and vLLM's parser tests. ``tools`` are the request's, for formats that type raw values by them.

WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "zip": {"type": "string"},
                    "hours": {"type": "array", "items": {"type": "integer"}},
                    "scale": {"type": "number"},
                },
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]

DS_CALLS, DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


@dataclass(frozen=True)
class FormatSample:
    fmt: str
    text: str
    content: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None
    ids: list[str] | None = None  # the model's own call ids, when the format carries them


FORMAT_CALLS = [
    # Qwen3-Coder: text, then two XML calls; values typed by the schema ("02139" stays a string, 3 an int)
    FormatSample(
        "qwen3_coder",
        "I'll check both.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, CA\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=zip>\n02139\n</parameter>\n<parameter=hours>\n[9, 12]\n"
        "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        "I'll check both.\n",
        [("get_weather", {"city": "San Francisco, CA", "days": 3, "zip": "02139", "hours": [9, 12]}), ("get_time", {})],
        tools=WEATHER_TOOLS,
    ),
    # ... without the request's tools: JSON-looking values are read as JSON, the rest stays text
    FormatSample(
        "qwen3_coder",
        "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.py\n</parameter>\n<parameter=content>\n"
        "def f():\n    return '<tag>'\n\n</parameter>\n<parameter=mode>\n420\n</parameter>\n</function>\n</tool_call>",
        "",
        [("write_file", {"path": "/tmp/a.py", "content": "def f():\n    return '<tag>'\n", "mode": 420})],
    ),
    # a call cut off by max_tokens inside a value: content (a cut value must never pass for a whole argument)
    FormatSample(
        "qwen3_coder",
        "Sure <tool_call>\n<function=write_file>\n<parameter=content>\nimport o",
        "Sure <tool_call>\n<function=write_file>\n<parameter=content>\nimport o",
    ),
    # ... but a call whose values all closed is read even when the end marker is missing
    FormatSample(
        "qwen3_coder",
        "<tool_call>\n<function=get_time>\n</function>\n",
        "",
        [("get_time", {})],
    ),
    FormatSample(
        "glm45",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Bei",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Bei",
    ),
    # GLM-4.5 / 4.6: newline-separated tags; string raw, others JSON
    FormatSample(
        "glm45",
        "Let me look that up.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n"
        "</tool_call>",
        "Let me look that up.",
        [("get_weather", {"city": "Beijing", "days": 2, "metric": True})],
        tools=WEATHER_TOOLS,
    ),
    # GLM-4.7: no newlines between the tags; two calls
    FormatSample(
        "glm47",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>上海</arg_value></tool_call>"
        "<tool_call>get_time</tool_call>",
        "",
        [("get_weather", {"city": "上海"}), ("get_time", {})],
    ),
    # a block with no function name: content
    FormatSample(
        "glm45", "<tool_call><arg_key>a</arg_key></tool_call> ok", "<tool_call><arg_key>a</arg_key></tool_call> ok"
    ),
    # GLM-4-9B-chat / GLM-4-0414: the name on its own line, then the JSON arguments
    FormatSample(
        "glm4", 'get_weather\n{"city": "Beijing", "days": 1}', "", [("get_weather", {"city": "Beijing", "days": 1})]
    ),
    FormatSample("glm4", "Beijing is sunny today.", "Beijing is sunny today."),
    FormatSample("glm4", "Summary\n{not json at all", "Summary\n{not json at all"),
    # Xinference's glm4 name covers the fenced JSON GLM-4 wrote under its prompt, and GLM-4.5's XML
    FormatSample(
        "glm4",
        '\n```json\n{"name": "get_weather", "arguments": {"city": "上海"}}\n```',
        "",
        [("get_weather", {"city": "上海"})],
    ),
    FormatSample(
        "glm4",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
        "",
        [("get_weather", {"city": "Paris"})],
    ),
    # DeepSeek-V3 / R1-0528
    FormatSample(
        "deepseek_v3",
        f'Checking.{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Hangzhou"}}\n```{DS_CALL_END}\n'
        f"{DS_CALL}function{DS_SEP}get_time\n```json\n{{}}\n```{DS_CALL_END}{DS_CALLS_END}",
        "Checking.",
        [("get_weather", {"city": "Hangzhou"}), ("get_time", {})],
    ),
    # Xinference's name for R1's format; broken JSON in a call: the call is content
    FormatSample(
        "deepseek-r1",
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": \n```{DS_CALL_END}{DS_CALLS_END}',
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": \n```{DS_CALL_END}{DS_CALLS_END}',
    ),
    # DeepSeek-V3.1
    FormatSample(
        "deepseek_v31",
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "杭州", "days": 2}}{DS_CALL_END}'
        f"{DS_CALL}get_time{DS_SEP}{{}}{DS_CALL_END}{DS_CALLS_END}",
        "",
        [("get_weather", {"city": "杭州", "days": 2}), ("get_time", {})],
    ),
    # DeepSeek-V3.2's DSML: string="false" values are JSON, typed by the schema
    FormatSample(
        "deepseek_v32",
        'Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">杭州</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="hours" string="false">[8, 20]</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        '<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        "Let me check.\n\n",
        [("get_weather", {"city": "杭州", "days": 3, "hours": [8, 20]}), ("get_time", {})],
        tools=WEATHER_TOOLS,
    ),
    # ... and the V3.1 sections some V3.2 templates still ask for
    FormatSample(
        "deepseek-v3.2",
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Paris"}}{DS_CALL_END}{DS_CALLS_END}',
        "",
        [("get_weather", {"city": "Paris"})],
    ),
    # Kimi K2: the model's own ids are kept
    FormatSample(
        "kimi_k2",
        "I'll get both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1'
        "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        "I'll get both.",
        [("get_weather", {"city": "Beijing"}), ("get_time", {})],
        ids=["functions.get_weather:0", "functions.get_time:1"],
    ),
    FormatSample(
        "kimi_k2",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": <|tool_call_end|><|tool_calls_section_end|>',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": <|tool_call_end|><|tool_calls_section_end|>',
    ),
    # Llama 3.2 / Llama 4 pythonic
    FormatSample(
        "pythonic",
        '[get_weather(city="San Francisco", metric=True, hours=[9, 12]), get_time()]',
        "",
        [("get_weather", {"city": "San Francisco", "metric": True, "hours": [9, 12]}), ("get_time", {})],
    ),
    FormatSample(
        "llama4_pythonic",
        '<|python_start|>[get_weather(city="Paris")]<|python_end|>',
        "",
        [("get_weather", {"city": "Paris"})],
    ),
    # not literals (never evaluated), not calls, or not at the start: content
    FormatSample(
        "pythonic", '[get_weather(city=__import__("os").getcwd())]', '[get_weather(city=__import__("os").getcwd())]'
    ),
    FormatSample("pythonic", "[1] Smith et al. showed it.", "[1] Smith et al. showed it."),
    FormatSample("pythonic", 'Answer: [get_weather(city="x")]', 'Answer: [get_weather(city="x")]'),
    # Gemma 3: tool_code fences, with and without print()
    FormatSample(
        "gemma3",
        'I will look it up.\n```tool_code\nprint(get_weather(city="London", days=2))\n```',
        "I will look it up.\n",
        [("get_weather", {"city": "London", "days": 2})],
    ),
    FormatSample(
        "gemma3",
        '```tool_code\n[get_weather(city="Rome"), get_time()]\n```',
        "",
        [("get_weather", {"city": "Rome"}), ("get_time", {})],
    ),
    FormatSample("gemma3", "```python\nprint(1)\n```", "```python\nprint(1)\n```"),
    # Gemma 4: its own tokens and <|"|> strings
    FormatSample(
        "gemma4",
        'Thought...\n<|tool_call>call:get_weather{city:<|"|>上海<|"|>,days:3,metric:true,hours:[9,<|"|>noon<|"|>],'
        "opts:{scale:1.5}}<tool_call|><|tool_call>call:get_time{}<tool_call|>",
        "Thought...\n",
        [
            ("get_weather", {"city": "上海", "days": 3, "metric": True, "hours": [9, "noon"], "opts": {"scale": 1.5}}),
            ("get_time", {}),
        ],
    ),
    FormatSample(
        "gemma", "<|tool_call>call:get_weather{city:<tool_call|>", "<|tool_call>call:get_weather{city:<tool_call|>"
    ),
    # Phi-4-mini: its special tokens, and the functools[...] vLLM's template asks for
    FormatSample(
        "phi4_mini_json",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Seattle"}}, {"name": "get_time", '
        '"arguments": {}}]<|/tool_call|>',
        "",
        [("get_weather", {"city": "Seattle"}), ("get_time", {})],
    ),
    FormatSample(
        "phi4_mini_json",
        'functools[{"name": "get_weather", "arguments": {"city": "Seattle"}}]',
        "",
        [("get_weather", {"city": "Seattle"})],
    ),
    FormatSample("phi4_mini_json", "Python's functools module helps.", "Python's functools module helps."),
    # InternLM2.5 / 3
    FormatSample(
        "internlm",
        "I need to use the get_weather tool.<|action_start|><|plugin|>\n"
        '{"name": "get_weather", "parameters": {"city": "Shanghai"}}<|action_end|>\n',
        "I need to use the get_weather tool.",
        [("get_weather", {"city": "Shanghai"})],
    ),
    # gpt-oss, as the harmony splitter passes a call on (and as the model writes it, recipient first)
    FormatSample(
        "harmony",
        '<|channel|>commentary to=functions.get_weather<|message|>{"city":"Tokyo"}<|call|>',
        "",
        [("get_weather", {"city": "Tokyo"})],
    ),
    FormatSample(
        "openai",
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
        '{"city":"Tokyo"}<|call|>',
        "",
        [("get_weather", {"city": "Tokyo"})],
    ),
]


@dataclass(frozen=True)
class TaggedReasoning:
    start: str
    end: str
    text: str
    reasoning: str | None
    content: str
    primed: bool = False


REASONING_STYLES = [
    # GLM-4.5 (thinking on): the model opens <think> itself
    TaggedReasoning(
        "<think>",
        "</think>",
        "<think>Sunny needs a lookup.</think>It is sunny.",
        "Sunny needs a lookup.",
        "It is sunny.",
    ),
    # Kimi-VL-Thinking / Kimi k1.5
    TaggedReasoning(
        "◁think▷", "◁/think▷", "◁think▷Let me see.◁/think▷The answer is 4.", "Let me see.", "The answer is 4."
    ),
    # Seed-OSS
    TaggedReasoning(
        "<seed:think>",
        "</seed:think>",
        "<seed:think>\nBudget fine.\n</seed:think>\nHello!",
        "Budget fine.",
        "Hello!",
    ),
    # Qwen3-2507-Thinking / DeepSeek-R1-0528: the template opened the block, the reply has only the end tag
    TaggedReasoning("<think>", "</think>", "First, 2+2.\n</think>\n\n4", "First, 2+2.", "4", primed=True),
    # ... and a primed reply that still writes the start tag: it is not reasoning text
    TaggedReasoning("<think>", "</think>", "<think>\nFirst, 2+2.\n</think>\n\n4", "First, 2+2.", "4", primed=True),
    # Gemma 4's thinking channel, as Xinference declares its tags
    TaggedReasoning("<|channel>thought\n", "<channel|>", "<|channel>thought\nHmm.<channel|>Yes.", "Hmm.", "Yes."),
]

HARMONY_REPLIES = [
    # (raw reply, reasoning, content after the harmony splitter, calls after the harmony tool format)
    (
        "<|channel|>analysis<|message|>User asks: what is 2+2? Simple.<|end|><|start|>assistant<|channel|>final"
        "<|message|>2 + 2 = 4.<|return|>",
        "User asks: what is 2+2? Simple.",
        "2 + 2 = 4.",
        [],
    ),
    (
        "<|channel|>analysis<|message|>Need to call get_weather.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"city":"San Francisco"}<|call|>',
        "Need to call get_weather.",
        "",
        [("get_weather", {"city": "San Francisco"})],
    ),
    ("No channels at all.", None, "No channels at all.", []),
]

FORMAT_CALLS += [
    # later Kimi models number calls without naming them: the only tool whose parameters fit, else content
    FormatSample(
        "kimi_k2",
        "Let me check. <|tool_calls_section_begin|><|tool_call_begin|>0 <|tool_call_argument_begin|>"
        '{"city": "Tokyo", "days": 2}<|tool_call_end|><|tool_calls_section_end|>',
        "Let me check. ",
        [("get_weather", {"city": "Tokyo", "days": 2})],
        tools=WEATHER_TOOLS,
        ids=["0"],
    ),
    FormatSample(
        "kimi_k2",
        "<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        tools=WEATHER_TOOLS,
    ),
]
