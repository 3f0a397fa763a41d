"""The sandbox chat templates run in: Jinja's immutable sandbox with what Hugging Face templates expect, and the
bounds that stop a template before it allocates too much or runs too long (:class:`RenderLimits`).

One job: run a template safely. What variables a chat template gets, and which a caller may not set, is
:mod:`xinference.model.prompt_render`'s, the renderer every engine calls.

How the checks reach template code: templates are parsed, then their syntax tree is rewritten so that every loop's
iterable, every ``~`` and every piece of output goes through a counting filter of this module (filters that take
the context are never evaluated at compile time), and the sandbox's operator and call hooks size ``*``, ``+``,
``%``, ``**``, ``range``, string methods and the filters that widen text. Threads cannot be killed, so the time limit
is enforced from inside: every loop iteration, call, operator and piece of output checks the deadline. The render's
counters live in a :class:`contextvars.ContextVar`, so one compiled template renders in many threads. Compiled
templates are cached by source (LRU, 64 entries).
"""

from __future__ import annotations

import contextvars
import functools
import json
import re
import string
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn, TypeGuard, cast

from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateSyntaxError
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.runtime import Context, LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_context
from jinja2.visitor import NodeTransformer

from xinference.errors import InvalidRequest

__all__ = [
    "DEFAULT_LIMITS",
    "SANDBOX_GLOBALS",
    "ChatTemplateError",
    "RenderLimits",
    "TemplateLimitExceeded",
    "UnsafeTemplate",
    "run",
]

MIB = 1 << 20


class ChatTemplateError(InvalidRequest):
    """Raised when a chat template cannot render a request: it does not compile, it refused the messages
    (``raise_exception``), it failed on them, or a caller passed a reserved variable."""

    code = "chat_template_error"


class TemplateLimitExceeded(ChatTemplateError):
    """Raised when a render would exceed one of :class:`RenderLimits`; the message names the limit."""

    code = "chat_template_limit"


class UnsafeTemplate(ChatTemplateError):
    """Raised when a chat template tries to reach Python internals or mutate its inputs (chained SecurityError)."""

    code = "unsafe_chat_template"


@dataclass(frozen=True)
class RenderLimits:
    """What one render may use.

    ``max_chars`` bounds the prompt and every string or sequence (by its printed size) built while rendering.
    1 MiB by default: a chat prompt is the conversation plus a few hundred characters of markup per message, and
    ~1 MiB of text is ~250k tokens, past the context of most models. :meth:`for_context` raises it for models
    whose context could hold more (32 characters per token: no vocabulary averages more, so a longer prompt could
    not fit and would be refused after tokenizing anyway).
    """

    max_chars: int = MIB
    #: elements of one ``range`` or repeated list
    max_items: int = 100_000
    #: loop iterations of one render, all loops together (a real template on a long conversation uses thousands)
    max_iterations: int = 1_000_000
    #: nested calls (macros, recursive loops, ``caller()``, methods); real templates nest a handful
    max_depth: int = 64
    #: wall time of one render; real templates take milliseconds
    max_seconds: float = 5.0
    #: size of integers built by ``*`` and ``**`` (a 10,000-bit number has ~3,000 digits)
    max_int_bits: int = 10_000

    @classmethod
    def for_context(cls, context_tokens: int | None) -> RenderLimits:
        """The limits for a model whose context holds ``context_tokens`` tokens (unknown: the defaults)."""
        if not context_tokens or context_tokens * 32 <= MIB:
            return DEFAULT_LIMITS
        return cls(max_chars=int(context_tokens) * 32)

    #: the text written to all outputs of one render, macros' and blocks' included (several passes of a text
    #: through macros are normal; unbounded generation in a buffer is not)
    @property
    def max_generated(self) -> int:
        return self.max_chars * 8


DEFAULT_LIMITS = RenderLimits()


def _size_text(chars: int) -> str:
    return f"{chars / MIB:g} MiB" if chars >= MIB and chars % (MIB // 4) == 0 else f"{chars:,} characters"


# -- the counters of one render ------------------------------------------------------------------------------------
class _Budget:
    """The counters of one render (iterations, call depth, generated text) and its deadline."""

    __slots__ = ("deadline", "depth", "generated", "iterations", "limits")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.iterations = 0
        self.depth = 0
        self.generated = 0

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateLimitExceeded(f"the chat template ran longer than {self.limits.max_seconds:g} s")

    def iterate(self, iterable: Iterable[Any]) -> Iterator[Any]:
        limit = self.limits.max_iterations
        for item in iterable:
            self.iterations += 1
            if self.iterations > limit:
                raise TemplateLimitExceeded(f"the chat template looped more than {limit:,} times")
            self.check_time()
            yield item

    def text(self, chars: int, what: str) -> None:
        if chars > self.limits.max_chars:
            raise TemplateLimitExceeded(
                f"the chat template built {what} longer than {_size_text(self.limits.max_chars)}"
            )

    def items(self, count: int, what: str) -> None:
        if count > self.limits.max_items:
            raise TemplateLimitExceeded(f"the chat template built {what} of more than {self.limits.max_items:,} items")

    def output(self, chars: int) -> None:
        self.generated += chars
        if self.generated > self.limits.max_generated:
            raise TemplateLimitExceeded(
                f"the chat template generated more than {_size_text(self.limits.max_generated)} of text"
            )
        self.check_time()


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("xinference_template_budget", default=None)


def _budget() -> _Budget | None:
    return _BUDGET.get()


def _measure(value: Any, cap: int) -> int:
    """About how many characters ``value`` prints as (strings by length, containers by their items, shared items
    counted each time they appear); stops counting past ``cap``. Iterative: client data may nest deeply."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes, bytearray)):
            total += len(item) + 2
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            if total <= cap:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(item)
            if total <= cap:
                stack.extend(item)
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 1
        else:
            total += 8
        if total > cap:
            return total
    return total


def _is_text(value: Any) -> TypeGuard[str | bytes]:
    return isinstance(value, (str, bytes))


# -- operators ---------------------------------------------------------------------------------------------------
_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def _printf_widths(fmt: str) -> int:
    """The total of the widths and precisions in a printf-style format; ``*`` (taken from the arguments) is
    refused, since the text it makes cannot be sized from the format."""
    total = 0
    for match in _PRINTF.finditer(fmt):
        width, precision = match.group(1), match.group(2)
        if width == "*" or precision == "*":
            raise TemplateLimitExceeded("the chat template used a '*' width in a % format, which cannot be bounded")
        total += int(width or 0) + int(precision or 0)
    return total


def _format_widths(fmt: str) -> int:
    """The total of the numbers in the format specs of a ``str.format`` string; nested fields are refused."""
    total = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return 0  # str.format raises the same error itself
    for _literal, _field, spec, _conversion in parsed:
        if not spec:
            continue
        if "{" in spec:
            raise TemplateLimitExceeded(
                "the chat template used a nested field in a format spec, which cannot be bounded"
            )
        total += sum(int(number) for number in re.findall(r"\d+", spec))
    return total


def _check_mul(budget: _Budget, left: Any, right: Any) -> None:
    limits = budget.limits
    if isinstance(left, int) and not isinstance(right, int):
        left, right = right, left
    if isinstance(right, int) and isinstance(left, (str, bytes, list, tuple)):
        count = max(int(right), 0)
        if _is_text(left):
            budget.text(len(left) * count, "a string")
        else:
            budget.items(len(left) * count, "a sequence")
            budget.text(_measure(left, limits.max_chars) * count if count and left else 0, "a sequence")
    elif isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > limits.max_int_bits:
            raise TemplateLimitExceeded(f"the chat template built a number of more than {limits.max_int_bits:,} bits")


def _check_pow(budget: _Budget, base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        bits = budget.limits.max_int_bits
        if exponent > bits or exponent * (abs(base).bit_length() - 1) > bits:
            raise TemplateLimitExceeded(f"the chat template built a number of more than {bits:,} bits")


def _check_add(budget: _Budget, left: Any, right: Any) -> None:
    if _is_text(left) and _is_text(right):
        budget.text(len(left) + len(right), "a string")
    elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
        cap = budget.limits.max_chars
        budget.text(_measure(left, cap) + _measure(right, cap), "a sequence")


def _check_mod(budget: _Budget, left: Any, right: Any) -> None:
    if _is_text(left):
        fmt = left if isinstance(left, str) else left.decode("latin-1")
        cap = budget.limits.max_chars
        budget.text(len(fmt) + _printf_widths(fmt) + _measure(right, cap), "a string")


_BINOP_CHECKS = {"*": _check_mul, "**": _check_pow, "+": _check_add, "%": _check_mod}


# -- calls: methods and globals that widen text ------------------------------------------------------------------
def _as_list(value: Any, budget: _Budget) -> list[Any]:
    items = list(value) if not isinstance(value, list) else value
    budget.items(len(items), "a joined sequence")
    return items


def _check_text_method(
    budget: _Budget, text: str | bytes, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Size checks before a string method that can return more text than it was given; returns the arguments to
    call it with (a joined iterable is read once, here)."""
    cap = budget.limits.max_chars
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        budget.text(args[0], "a padded string")
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
            budget.text(len(text) + tabs * max(size, 0), "a string")
    elif name == "replace" and len(args) >= 2 and _is_text(args[0]) and _is_text(args[1]):
        old, new = args[0], args[1]
        if not old:
            hits = len(text) + 1
        elif isinstance(text, str) and isinstance(old, str):
            hits = text.count(old)
        elif isinstance(text, bytes) and isinstance(old, bytes):
            hits = text.count(old)
        else:
            hits = 0  # str and bytes mixed: replace itself refuses them
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            hits = min(hits, args[2])
        budget.text(len(text) + hits * max(len(new) - len(old), 0), "a string")
    elif name == "join" and args:
        items = _as_list(args[0], budget)
        budget.text(_measure(items, cap) + len(items) * len(text), "a joined string")
        args = (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        widest = max((len(v) for v in args[0].values() if _is_text(v)), default=1)
        budget.text(len(text) * max(widest, 1), "a translated string")
    return args, kwargs


def _bounded_range(*args: int) -> range:
    """``range`` for templates: at most ``max_items`` numbers."""
    numbers = range(*args)
    budget = _budget()
    if budget is not None:
        budget.items(len(numbers), "a range")
    return numbers


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - Jinja's names
    """Jinja's ``lipsum``, kept for templates that use it, with small bounds."""
    if not 0 <= n <= 10 or not 0 < min <= max <= 100:
        raise TemplateLimitExceeded("lipsum takes at most 10 paragraphs of at most 100 words")
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


class _TemplateRaised(Exception):
    """A template called ``raise_exception(message)``."""


def _raise_exception(message: str) -> NoReturn:
    raise _TemplateRaised(message)


_STRFTIME_WIDTH = re.compile(r"%[-_0^#]*[1-9]")


def _strftime_now(fmt: str) -> str:
    """The local time formatted with ``fmt`` (HF's helper; templates put today's date in system prompts). Field
    widths are refused: C's strftime pads to any width asked."""
    if not isinstance(fmt, str) or len(fmt) > 256 or _STRFTIME_WIDTH.search(fmt):
        raise TemplateLimitExceeded("strftime_now takes a format of at most 256 characters without field widths")
    return datetime.now().strftime(fmt)


class _Namespace(Namespace):
    """``namespace()`` without underscore-prefixed attributes (as Hugging Face's), so a template cannot shadow a
    dunder of the object it holds."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - Jinja's own signature trick
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"a chat template may not store {name!r} on a namespace")


# -- filters: each is wrapped so that it takes the context (never run at compile time) and checks its size --------
def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """Hugging Face's ``tojson``: no HTML escaping, non-ASCII kept, optional indent/separators/sort_keys."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _json_shape(value: Any) -> tuple[int, int]:
    """(nodes, deepest nesting) of a value, iteratively."""
    count, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        count += 1
        deepest = max(deepest, depth)
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return count, deepest


def _pre_filter(budget: _Budget, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Size checks before the filters that can return much more than they were given."""
    cap = budget.limits.max_chars

    def arg(index: int, key: str, default: Any) -> Any:
        return args[index] if len(args) > index else kwargs.get(key, default)

    value: Any = args[0] if args else None
    if name == "center":
        width = arg(1, "width", 80)
        if isinstance(width, int):
            budget.text(width, "a padded string")
    elif name == "indent" and isinstance(value, str):
        width = arg(1, "width", 4)
        pad = len(width) if _is_text(width) else width if isinstance(width, int) else 0
        budget.text(len(value) + (value.count("\n") + 1) * max(pad, 0), "an indented string")
    elif name == "replace" and _is_text(value):
        old, new = str(arg(1, "old", "")), str(arg(2, "new", ""))
        hits = len(value) + 1 if not old else str(value).count(old)
        budget.text(len(value) + hits * max(len(new) - len(old), 0), "a string")
    elif name == "wordwrap" and _is_text(value):
        wrap = arg(3, "wrapstring", None)
        budget.text(len(value) + (len(value) + 1) * (len(wrap) if _is_text(wrap) else 2), "a wrapped string")
    elif name == "format" and _is_text(value):
        budget.text(
            len(value) + _printf_widths(str(value)) + _measure(args[1:], cap) + _measure(kwargs, cap), "a string"
        )
    elif name == "join" and value is not None:
        items = _as_list(value, budget)
        sep = arg(1, "d", "")
        budget.text(_measure(items, cap) + len(items) * (len(sep) if _is_text(sep) else 0), "a joined string")
        args = (items, *args[1:])
    elif name in ("batch", "slice"):
        count = arg(1, "linecount" if name == "batch" else "slices", 1)
        if isinstance(count, int):
            budget.items(count, f"a {name}")
    elif name == "tojson":
        indent = arg(2, "indent", None)
        pad = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
        size = _measure(value, cap)
        budget.text(size, "a JSON text")
        if pad:
            count, deepest = _json_shape(value)
            budget.text(size + count * (1 + deepest * max(pad, 0)), "an indented JSON text")
    return args


def _check_result(budget: _Budget, result: Any, what: str) -> Any:
    if _is_text(result):
        budget.text(len(result), what)
    elif isinstance(result, (list, tuple, dict, set, frozenset)):
        budget.text(_measure(result, budget.limits.max_chars), what)
    return result


def _guarded_filter(name: str, func: Any) -> Any:
    """``func`` as a context filter that checks sizes before and after it runs."""
    pass_arg = getattr(func, "jinja_pass_arg", None)

    @pass_context
    def guarded(context: Context, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        if budget is not None:
            budget.check_time()
            args = _pre_filter(budget, name, args, kwargs)
        if pass_arg is not None:
            lead = {"context": context, "eval_context": context.eval_ctx, "environment": context.environment}[
                pass_arg.name
            ]
            result = func(lead, *args, **kwargs)
        else:
            result = func(*args, **kwargs)
        return _check_result(budget, result, f"a string or sequence (filter {name!r})") if budget else result

    guarded.__name__ = f"guarded_{name}"
    return guarded


@pass_context
def _loop_filter(context: Context, iterable: Any) -> Any:
    """Wraps every ``{% for %}``'s iterable: counts iterations against the budget."""
    budget = _budget()
    return iterable if budget is None else budget.iterate(iterable)


@pass_context
def _out_filter(context: Context, value: Any) -> Any:
    """Wraps every piece of output (template text and ``{{ }}``), wherever it is written: counts its size."""
    budget = _budget()
    if budget is not None:
        size = len(value) if isinstance(value, str) else _measure(value, budget.limits.max_chars)
        budget.text(size, "an output value")
        budget.output(size)
    return value


@pass_context
def _concat_filter(context: Context, parts: list[Any]) -> str:
    """``a ~ b ~ ...``: strings joined, sized before they are built."""
    budget = _budget()
    if budget is not None:
        budget.check_time()
        budget.text(
            sum(len(p) if isinstance(p, str) else _measure(p, budget.limits.max_chars) for p in parts), "a string"
        )
    return "".join(str(part) for part in parts)


_LOOP, _OUT, _CONCAT = "__xinference_loop", "__xinference_out", "__xinference_concat"


class _Instrument(NodeTransformer):
    """Routes loops, ``~`` and output through the counting filters above."""

    @staticmethod
    def _wrap(node: nodes.Node, name: str) -> nodes.Filter:
        return nodes.Filter(cast(nodes.Expr, node), name, [], [], None, None, lineno=node.lineno)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = self._wrap(node.iter, _LOOP)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._wrap(nodes.List(node.nodes, lineno=node.lineno), _CONCAT)

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [self._wrap(child, _OUT) for child in node.nodes]
        return node


class _GenerationTag(Extension):
    """``{% generation %}...{% endgeneration %}`` (HF's marker of assistant text for training masks): its body is
    output as is."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with this module's checks on operators and calls; unsafe attribute access fails at once
    (the stock sandbox returns an undefined that may render as '')."""

    intercepted_binops = frozenset(_BINOP_CHECKS)

    def unsafe_undefined(self, obj: Any, attribute: str) -> NoReturn:
        raise SecurityError(f"a chat template may not access {attribute!r} of a {type(obj).__name__} object")

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        if budget is not None:
            budget.check_time()
            _BINOP_CHECKS[operator](budget, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = _budget()
        if budget is None:
            return super().call(__context, __obj, *args, **kwargs)
        budget.check_time()
        target = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format at attribute access
        owner: Any = getattr(target, "__self__", None)
        name = getattr(target, "__name__", "")
        if _is_text(owner):
            if name in ("format", "format_map"):
                cap = budget.limits.max_chars
                budget.text(
                    len(owner) + _format_widths(str(owner)) + _measure(args, cap) + _measure(kwargs, cap),
                    "a formatted string",
                )
            else:
                args, kwargs = _check_text_method(budget, owner, name, args, kwargs)
        elif isinstance(__obj, LoopContext) and args:  # a recursive loop's loop(children)
            args = (budget.iterate(args[0]), *args[1:])
        budget.depth += 1
        try:
            if budget.depth > budget.limits.max_depth:
                raise TemplateLimitExceeded(f"the chat template recursed deeper than {budget.limits.max_depth} calls")
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        return _check_result(budget, result, "a string or sequence")


def _make_environment() -> _Sandbox:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _GenerationTag])
    env.globals.update(
        range=_bounded_range,
        lipsum=_lipsum,
        namespace=_Namespace,
        raise_exception=_raise_exception,
        strftime_now=_strftime_now,
    )
    env.filters["tojson"] = _tojson
    env.filters = {name: _guarded_filter(name, func) for name, func in env.filters.items()}
    env.filters.update({_LOOP: _loop_filter, _OUT: _out_filter, _CONCAT: _concat_filter})
    return env


_ENV = _make_environment()

#: The names the sandbox itself defines for templates (``raise_exception``, ``range``, ...).
SANDBOX_GLOBALS: frozenset[str] = frozenset(_ENV.globals)


@functools.lru_cache(maxsize=64)
def _compile(source: str) -> Any:
    try:
        tree = _ENV.parse(source)
        tree = _Instrument().visit(tree)
        tree.set_environment(_ENV)
        return _ENV.from_string(tree)
    except TemplateSyntaxError as exc:
        raise ChatTemplateError(f"the chat template does not compile: {exc}") from exc
    except RecursionError:
        raise ChatTemplateError("the chat template does not compile: it nests too deeply") from None


def run(source: str, variables: dict[str, Any], limits: RenderLimits = DEFAULT_LIMITS) -> str:
    """Render template ``source`` (compiled once per source) with ``variables`` inside the sandbox and ``limits``.

    Raises :class:`ChatTemplateError` (a 400) for anything the template does, with :class:`TemplateLimitExceeded`
    naming the limit when one is reached."""
    compiled = _compile(source)
    budget = _Budget(limits)
    token = _BUDGET.set(budget)
    pieces: list[str] = []
    size = 0
    try:
        stream = compiled.generate(**variables)
        try:
            for piece in stream:
                size += len(piece)
                if size > limits.max_chars:
                    raise TemplateLimitExceeded(f"the chat template's output exceeds {_size_text(limits.max_chars)}")
                pieces.append(piece)
        finally:
            stream.close()
    except ChatTemplateError:
        raise
    except SecurityError as exc:
        raise UnsafeTemplate(f"the chat template was stopped: {exc}") from exc
    except _TemplateRaised as exc:
        raise ChatTemplateError(f"the chat template refused the request: {exc}") from exc
    except RecursionError:
        raise TemplateLimitExceeded(
            f"the chat template recursed deeper than Python allows (limit {limits.max_depth} calls)"
        ) from None
    except MemoryError:
        raise TemplateLimitExceeded("the chat template ran out of memory") from None
    except Exception as exc:  # noqa: BLE001 - whatever a template does wrong with its inputs is the request's 400
        raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from exc
    finally:
        _BUDGET.reset(token)
    return "".join(pieces)
