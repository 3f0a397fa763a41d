"""The one chat-template renderer: each limit stops a hostile template cleanly (a 400 naming the limit) and before
it allocates, caller variables cannot replace the renderer's own, and real templates render as before."""

from __future__ import annotations

import pickle
import threading
import time
import tracemalloc
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from xinference.errors import InvalidRequest
from xinference.model.chat_template import find_chat_template
from xinference.model.download import resolve_model_path
from xinference.model.prompt_render import (
    DEFAULT_LIMITS,
    RESERVED_VARIABLES,
    ChatTemplateError,
    RenderLimits,
    TemplateLimitExceeded,
    render,
)
from xinference.model.registry import ModelRegistry

MESSAGES = [{"role": "user", "content": "hi"}]

#: (template, words of the error message); each exceeds one limit, all of them within milliseconds
OVER_LIMITS = {
    "measured": ("{{ 'a' * 10**7 }}", "longer than 1 MiB"),
    "range": ("{{ range(10**9)|list }}", "range of more than 100,000 items"),
    "recursive macro": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed deeper than 64"),
    "recursive loop": ("{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}", "recursed deeper"),
    "recursive block": ("{% block a %}{{ self.a() }}{% endblock %}", "recursed deeper"),
    "list repeat": ("{{ [1, 2] * 10**8 }}", "more than 100,000 items"),
    "doubling ~": (
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "string longer than 1 MiB",
    ),
    "doubling +": (
        "{% set ns = namespace(s=['ab']) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "longer than 1 MiB",
    ),
    "power": ("{{ 10 ** (10 ** 8) }}", "more than 10,000 bits"),
    "center filter": ("{{ 'a'|center(10**9) }}", "padded string"),
    "center method": ("{{ 'a'.center(10**9) }}", "padded string"),
    "str.format width": ("{{ '{:>1000000000}'.format('a') }}", "formatted string"),
    "printf width": ("{{ '%1000000000s' % 'a' }}", "longer than 1 MiB"),
    "format filter": ("{{ '%1000000000s'|format('a') }}", "longer than 1 MiB"),
    "replace": ("{{ ('x' * 1000000).replace('x', 'yy') }}", "longer than 1 MiB"),
    "join": ("{{ range(100000)|join('a' * 100000) }}", "joined string"),
    "shared references": ("{{ {}.fromkeys(range(100000), 'x' * 1000000) }}", "longer than 1 MiB"),
    "batch fill": ("{{ [1]|batch(10**9, 'x')|list }}", "batch of more than"),
    "indent": ("{{ ('a\n' * 100000)|indent(100) }}", "indented string"),
    "output": ("{% for i in range(100000) %}" + "x" * 100 + "{% endfor %}", "output exceeds 1 MiB"),
    "text in a buffer": (
        "{% macro m() %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endmacro %}{% set unused = m() %}",
        "generated more than 8 MiB",
    ),
    "loop": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "looped more than 1,000,000 times|ran longer than 5 s",
    ),  # whichever comes first on a busy machine
    "lipsum": ("{{ lipsum(10**6) }}", "lipsum takes at most"),
    "strftime width": ("{{ strftime_now('%1000000000Y') }}", "without field widths"),
}


#: MiB a case may allocate before its refusal (4 otherwise): text written into a macro's buffer is counted as it is
#: generated (up to 8 MiB), and a dict of 100,000 shared references or a joined list of 100,000 numbers is sized
#: once it exists (both are bounded by the item limit first)
_ALLOCATES = {"text in a buffer": 12, "shared references": 16, "join": 8}


@pytest.mark.parametrize("name", OVER_LIMITS)
def test_each_limit_is_a_400_naming_it_before_the_allocation(name: str) -> None:
    template, words = OVER_LIMITS[name]
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(TemplateLimitExceeded, match=words) as info:
            render(template, MESSAGES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.status_code == 400 and isinstance(info.value, InvalidRequest)
    assert info.value.code == "chat_template_limit"
    allowed = _ALLOCATES.get(name, 4) * 2**20
    assert peak < allowed, f"{name}: {peak / 2**20:.1f} MiB allocated before the refusal"
    assert time.monotonic() - started < DEFAULT_LIMITS.max_seconds + 1


def test_the_measured_case_used_to_return_ten_megabytes() -> None:
    # the same template in the sandbox as it was configured before: it returns the whole string
    assert len(ImmutableSandboxedEnvironment().from_string("{{ 'a' * 10**7 }}").render()) == 10**7


def test_iterations_and_wall_time_are_budgets_of_one_render() -> None:
    busy = "{% for i in range(100) %}{% for j in range(100) %}{{ '' }}{% endfor %}{% endfor %}"
    assert render(busy, MESSAGES, limits=RenderLimits(max_iterations=10_100)) == ""
    with pytest.raises(TemplateLimitExceeded, match="looped more than 10,000 times"):
        render(busy, MESSAGES, limits=RenderLimits(max_iterations=10_000))
    slow = (
        "{% for i in range(100000) %}{% for j in range(10) %}{{ ('x' * 1000).upper()|length }}{% endfor %}{% endfor %}"
    )
    started = time.monotonic()
    with pytest.raises(TemplateLimitExceeded, match="ran longer than 0.2 s"):
        render(slow, MESSAGES, limits=RenderLimits(max_seconds=0.2, max_chars=100 * 2**20))
    assert time.monotonic() - started < 1.5


def test_recursion_stops_cleanly_in_a_worker_thread() -> None:
    """64 levels of a macro are fine; one more is the limit's error, never Python's RecursionError."""
    template = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% else %}bottom{% endif %}{% endmacro %}{{ f(depth) }}"
    results: list[Any] = []

    def work() -> None:
        results.append(render(template, MESSAGES, template_kwargs={"depth": 60}))
        try:
            render(template, MESSAGES, template_kwargs={"depth": 10**6})
        except Exception as exc:  # noqa: BLE001 - the type is what is checked
            results.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert results[0] == "bottom"
    assert isinstance(results[1], TemplateLimitExceeded) and "recursed deeper than 64" in str(results[1])


@pytest.mark.parametrize(
    "name",
    ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "raise_exception", "range", "namespace"],
)
def test_callers_cannot_replace_the_renderers_variables(name: str) -> None:
    assert name in RESERVED_VARIABLES
    with pytest.raises(ChatTemplateError, match=f"may not set '{name}'") as info:
        render("{{ messages|length }}", MESSAGES, template_kwargs={name: "x"})
    assert info.value.status_code == 400 and info.value.param == "chat_template_kwargs"


def test_caller_variables_that_are_not_reserved_reach_the_template() -> None:
    template = "{{ enable_thinking }}|{{ documents|length }}|{{ bos_token }}|{{ tools is none }}"
    rendered = render(
        template,
        MESSAGES,
        special_tokens={"bos_token": "<s>"},
        template_kwargs={"enable_thinking": False, "documents": [{"text": "d"}]},
    )
    assert rendered == "False|1|<s>|True"


def test_limits_follow_the_models_context() -> None:
    assert RenderLimits.for_context(None) is DEFAULT_LIMITS and RenderLimits.for_context(8192) is DEFAULT_LIMITS
    big = RenderLimits.for_context(1_000_000)
    assert big.max_chars == 32_000_000
    assert render("{{ 'a' * 10**7 }}", MESSAGES, limits=big) == "a" * 10**7
    with pytest.raises(TemplateLimitExceeded, match="longer than 32,000,000 characters"):
        render("{{ 'a' * 10**8 }}", MESSAGES, limits=big)


def test_errors_cross_processes_as_themselves() -> None:
    with pytest.raises(TemplateLimitExceeded) as info:
        render("{{ 'a' * 10**7 }}", MESSAGES)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is TemplateLimitExceeded and str(copy) == str(info.value)


def test_real_templates_render_as_the_plain_sandbox_does() -> None:
    family = ModelRegistry().get("smollm2-instruct")
    template = find_chat_template(family, resolve_model_path(family.model_specs[0], "Q4_1"))
    assert template is not None
    conversation = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 30} for i in range(2000)
    ]
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(template)
    assert render(template, conversation) == plain.render(messages=conversation, add_generation_prompt=True)
    helpers = (
        "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
        "{{ messages|tojson(indent=2, separators=(',', ': ')) }}{{ strftime_now('%Y')|length }}"
    )
    assert render(helpers, MESSAGES) == 'hi[\n  {\n    "role": "user",\n    "content": "hi"\n  }\n]4'


def test_messages_are_given_as_hugging_face_gives_them() -> None:
    """Null fields are left out and reasoning is under each name templates read; the caller's dicts are kept."""
    messages = [{"role": "assistant", "content": None, "reasoning_content": "because"}]
    template = "{{ messages[0].content is defined }}|{{ messages[0].thinking }}|{{ messages[0].reasoning_content }}"
    assert render(template, messages) == "False|because|because"
    assert messages == [{"role": "assistant", "content": None, "reasoning_content": "because"}]
