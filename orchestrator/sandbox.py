"""The bounded jinja2 sandbox every template renders in (``interpolate`` is its public face).

The sandbox refuses resource abuse as well as attribute escapes. Every render
runs under a budget taken from ``Limits`` (the variables ``scope`` builds
carry the manager's; a plain mapping gets ``DEFAULT_LIMITS``), so compiled
templates stay independent of limits:

- ``render_output``: characters one render may produce; output is streamed
  and the render stops as soon as it passes the limit.
- ``render_loops``: loop iterations plus calls (macros, methods, ``loop()``)
  one render may run, counted across all loops, with or without output.
- ``render_value``: characters of a string, or items of a container counted
  through nested containers, that one operation may build: ``*``, ``+``,
  ``%``, ``~``, literals, filters, methods, ``range``, ``{% set %}`` blocks
  and macro bodies. Sizes are checked before anything is built where the
  size is known up front (``'x' * 10**9``, ``'x'.ljust(10**9)``).
- in all, one render may build (or measure) at most ``WORK_FACTOR`` times
  ``render_value`` characters and items, so a loop cannot rebuild a big
  value again and again.
- integers may have at most ``MAX_INT_DIGITS`` digits (CPython's default
  limit for converting one to text); ``10 ** (10 ** 8)`` is refused before
  it is computed (jinja2 reads ``10**10**8`` as ``(10**10)**8``, a small
  number).

A refusal is an ``InterpolationError`` naming the limit and its value.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache, update_wrapper, wraps
from itertools import chain, islice
from string import Formatter
from types import BuiltinMethodType, MethodType
from typing import Any, NamedTuple, NoReturn

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import make_attrgetter
from jinja2.runtime import LoopContext, markup_join, new_context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace, generate_lorem_ipsum, missing
from markupsafe import EscapeFormatter, Markup

from .interpolate import ClosedEnv
from .limits import DEFAULT_LIMITS, Limits

MAX_INT_DIGITS = 4300
"""Digits an integer built by a template may have: CPython's default ``int_max_str_digits``."""

WORK_FACTOR = 10
"""One render may build at most this many times ``Limits.render_value`` characters and items in all."""

_MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
_REMEMBERED = 4096  # container sizes one render keeps (least recently used go first)


# -- the per-render budget ----------------------------------------------------


class Refused(Exception):
    """A render went over one of its limits; ``render`` turns it into an InterpolationError."""


class _Budget:
    """What one render has spent so far, and what it may spend (``Limits``).

    ``sizes`` remembers the measured size of the containers measured last
    (by id, holding each container so its id stays its own), so a value
    built from values built before is measured in one step.
    """

    __slots__ = (
        "value_cap",
        "loop_cap",
        "work_cap",
        "steps",
        "work",
        "sizes",
        "volatile",
        "seconds",
        "deadline",
        "variables",
    )

    def __init__(self, limits: Limits, variables: Mapping[str, Any]) -> None:
        self.variables = variables  # the render's own: what a misspelt name may have meant
        self.seconds = limits.render_seconds
        self.deadline = time.monotonic() + limits.render_seconds
        self.value_cap = limits.render_value
        self.loop_cap = limits.render_loops
        self.work_cap = limits.render_value * WORK_FACTOR
        self.steps = 0
        self.work = 0
        self.sizes: OrderedDict[int, tuple[Any, int]] = OrderedDict()
        self.volatile = False

    def step(self) -> None:
        """Count one loop iteration or call."""
        self.steps += 1
        if self.steps > self.loop_cap:
            raise Refused(f"template runs more than {self.loop_cap} loop iterations and calls (Limits.render_loops)")
        # Each step is bounded by render_value, but a loop can repeat a bounded scan (big.count(x)): a clock too.
        if not self.steps & 15 and time.monotonic() > self.deadline:
            raise Refused(f"template runs longer than {self.seconds} s (Limits.render_seconds)")

    def within(self, size: int) -> None:
        """Refuse to build a value of ``size`` characters or items."""
        if size > self.value_cap:
            self.too_big()

    def too_big(self) -> NoReturn:
        raise Refused(
            f"template builds a value of more than {self.value_cap} characters or items (Limits.render_value)"
        )

    def spend(self, size: int) -> None:
        """Count ``size`` characters or items built or measured."""
        self.work += size
        if self.work > self.work_cap:
            raise Refused(
                f"template works through more than {self.work_cap} characters and items in all "
                f"({WORK_FACTOR} x Limits.render_value)"
            )

    def size(self, value: Any) -> int:
        """Characters of a string, items of a container counted through nested ones, 1 for anything else.

        An item counts at least 1, a string item its characters, a container
        item its own size; a mapping's entries count by value (and string
        keys by their characters). Shared references count every time, as
        ``str()`` would print them; the walk stops once the total passes
        ``render_value``, and every item walked counts as work. Containers
        holding a ``namespace`` (which a template can change) are measured
        again each time, never remembered.
        """
        if isinstance(value, (str, bytes, bytearray)):
            return len(value)
        if isinstance(value, Namespace):
            self.volatile = True
            return 1 + self._walk(value._Namespace__attrs)  # type: ignore[attr-defined]
        if not isinstance(value, Collection) or isinstance(value, (range, jinja2.Undefined)):
            return 1
        key = id(value)
        known = self.sizes.get(key)
        if known is not None:
            self.sizes.move_to_end(key)
            return known[1]
        outer, self.volatile = self.volatile, False
        total = self._walk(value)
        if not self.volatile:
            self.sizes[key] = (value, total)
            if len(self.sizes) > _REMEMBERED:
                self.sizes.popitem(last=False)
        self.volatile = outer or self.volatile
        return total

    def _walk(self, value: Collection[Any]) -> int:
        self.spend(len(value))
        total = 0
        if isinstance(value, Mapping):
            for key, item in value.items():
                total += max(self.size(item), 1) + (len(key) if isinstance(key, str) else 0)
                if total > self.value_cap:
                    break
        else:
            for item in value:
                total += max(self.size(item), 1)
                if total > self.value_cap:
                    break
        return total

    def admit(self, value: Any) -> Any:
        """Check a value an operation built against the limits, count it, and return it."""
        if isinstance(value, (str, bytes, bytearray)):
            self.within(len(value))
            self.spend(len(value))
        elif isinstance(value, int):
            if value.bit_length() > _MAX_INT_BITS:
                raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")
        elif isinstance(value, (Collection, Namespace)):
            self.within(self.size(value))
        return value


_BUDGET: ContextVar[_Budget | None] = ContextVar("toolcascade_render_budget", default=None)


def _budget() -> _Budget:
    """The budget of the render in progress.

    Raises:
        RuntimeError: no render is in progress (jinja2 folding constants while
            compiling ends up here, and then leaves the expression to run time).
    """
    budget = _BUDGET.get()
    if budget is None:
        raise RuntimeError("templates render through orchestrator.interpolate.render")
    return budget


class _Counted:
    """An iterable whose items count against ``render_loops``; ``len`` passes through when it has one."""

    __slots__ = ("_items", "_budget")

    def __init__(self, items: Iterable[Any], budget: _Budget) -> None:
        self._items = items
        self._budget = budget

    def __iter__(self) -> Iterator[Any]:
        step = self._budget.step
        for item in self._items:
            step()
            yield item

    def __len__(self) -> int:
        return len(self._items)  # type: ignore[arg-type]  # TypeError when it has none, as LoopContext expects


class _Buffer(list):  # type: ignore[type-arg]
    """Where a ``{% set %}`` block, a macro or a ``{% filter %}`` collects its text, within ``render_value``."""

    __slots__ = ("_budget", "_size")

    def __init__(self, budget: _Budget) -> None:
        super().__init__()
        self._budget = budget
        self._size = 0

    def _add(self, size: int) -> None:
        self._size += size
        self._budget.within(self._size)
        self._budget.spend(size)

    def append(self, text: Any) -> None:
        self._add(len(text))
        super().append(text)

    def extend(self, texts: Iterable[Any]) -> None:
        texts = tuple(texts)
        self._add(sum(map(len, texts)))
        super().extend(texts)


# -- checks done before an operation builds its value --------------------------

_PERCENT = re.compile(r"%(?:\(([^)]*)\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([a-zA-Z%])")
_DIGITS = re.compile(r"\d+")


def _count(value: Any) -> int:
    """An int argument used as a size (None, floats and junk count as 0: the call itself will complain)."""
    return value if isinstance(value, int) else 0


def _check_percent(budget: _Budget, fmt: str | bytes, args: Any) -> None:
    """``fmt % args``: widths and numeric precisions must fit in ``render_value``."""
    text = fmt.decode("latin-1") if isinstance(fmt, (bytes, bytearray)) else fmt
    values = args if isinstance(args, tuple) else (args,)
    position = 0
    total = 0
    for match in _PERCENT.finditer(text):
        for part in match.group(2), match.group(3):
            if part == "*":
                total += abs(_count(values[position])) if position < len(values) else 0
                position += 1
            elif part:
                total += int(part) if len(part) <= 18 else budget.value_cap + 1
        if match.group(4) != "%" and match.group(1) is None:
            position += 1
    budget.within(total)


def _check_spec(budget: _Budget, spec: str) -> None:
    """A ``str.format`` spec: no width or precision past ``render_value``."""
    for number in _DIGITS.findall(spec):
        if len(number) > 18 or int(number) > budget.value_cap:
            budget.too_big()


def _check_mul(budget: _Budget, left: Any, right: Any) -> None:
    if isinstance(right, int) and not isinstance(left, int):
        left, right = right, left
    if not isinstance(left, int):
        return
    if isinstance(right, int):
        if left.bit_length() + right.bit_length() > _MAX_INT_BITS + 1:
            raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")
    elif isinstance(right, (str, bytes, list, tuple)) and left > 0:
        budget.within(left * budget.size(right))


def _check_pow(budget: _Budget, base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) <= 1:
        return
    if exponent > _MAX_INT_BITS or exponent * math.log2(abs(base)) > _MAX_INT_BITS:
        raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")


def _check_add(budget: _Budget, left: Any, right: Any) -> None:
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
        budget.within(budget.size(left) + budget.size(right))


_BINOP_CHECKS: dict[str, Callable[[_Budget, Any, Any], None]] = {
    "*": _check_mul,
    "**": _check_pow,
    "+": _check_add,
    "%": lambda budget, left, right: _check_percent(budget, left, right) if isinstance(left, (str, bytes)) else None,
}


def _check_replace(budget: _Budget, text: Any, old: Any, new: Any, count: Any = -1) -> None:
    if not (isinstance(text, (str, bytes)) and isinstance(old, type(text)) and isinstance(new, type(text))):
        return
    whole: Any = text  # str or bytes, with old and new of the same type
    found = whole.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    budget.within(len(text) + found * max(len(new) - len(old), 0))


def _check_width(budget: _Budget, text: Any, width: Any = 0, *args: Any, **kwargs: Any) -> None:
    budget.within(_count(width))


def _check_expandtabs(budget: _Budget, text: Any, tabsize: Any = 8) -> None:
    if isinstance(text, (str, bytes)):
        tab = "\t" if isinstance(text, str) else b"\t"
        budget.within(len(text) + text.count(tab) * max(_count(tabsize), 0))  # type: ignore[arg-type]


def _check_translate(budget: _Budget, text: Any, table: Any) -> None:
    if isinstance(text, str) and isinstance(table, Mapping):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        budget.within(len(text) * max(longest, 1))


def _check_to_bytes(budget: _Budget, number: Any, length: Any = 1, *args: Any, **kwargs: Any) -> None:
    budget.within(_count(length))


def _check_fromkeys(budget: _Budget, owner: Any, keys: Any, value: Any = None) -> None:
    if isinstance(keys, Collection):
        budget.within(len(keys) * max(budget.size(value), 1))


# Methods (of str, bytes, int and dict) that build a value whose size an argument sets.
_METHOD_CHECKS: dict[str, Callable[..., None]] = {
    "ljust": _check_width,
    "rjust": _check_width,
    "center": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": _check_replace,
    "translate": _check_translate,
    "to_bytes": _check_to_bytes,
    "fromkeys": _check_fromkeys,
}
_RECEIVERS = (str, bytes, bytearray, int, dict)
_CALL_EXTRAS = frozenset({"_loop_vars", "_block_vars"})  # passed by the generated code, not by the author


def _join_method(budget: _Budget, separator: str | bytes, items: Any) -> tuple[Any, ...]:
    """``sep.join(items)`` with the items taken first, so the result's size is known before it is built."""
    taken = tuple(islice(iter(items), budget.value_cap + 1))
    budget.within(len(taken))
    budget.within(sum(len(i) for i in taken if isinstance(i, (str, bytes))) + len(separator) * (len(taken) - 1))
    return (taken,)


# -- filters ---------------------------------------------------------------------

# Filters that hand back a value they were given (or a number): nothing new to check.
_PASS_THROUGH = frozenset(
    {"abs", "attr", "count", "d", "default", "first", "float", "last", "length", "max", "min", "random", "round"}
)


def _center(budget: _Budget, value: Any, width: Any = 80) -> None:
    budget.within(_count(width))


def _indent(budget: _Budget, text: Any, width: Any = 4, first: Any = False, blank: Any = False) -> None:
    text = str(text)
    step = len(width) if isinstance(width, str) else _count(width)
    budget.within(len(text) + (text.count("\n") + 1) * max(step, 0))


def _wordwrap(
    budget: _Budget,
    text: Any,
    width: Any = 79,
    break_long_words: Any = True,
    wrapstring: Any = None,
    break_on_hyphens: Any = True,
) -> None:
    text = str(text)
    breaks = sum(text.count(c) for c in " \t\n\r\x0b\x0c-") + len(text) // max(_count(width), 1) + 1
    budget.within(len(text) + min(breaks, len(text) + 1) * (len(wrapstring) if isinstance(wrapstring, str) else 1))


def _replace(budget: _Budget, text: Any, old: Any, new: Any, count: Any = None) -> None:
    _check_replace(budget, str(text), str(old), str(new), -1 if count is None else count)


def _format(budget: _Budget, value: Any, *args: Any, **kwargs: Any) -> None:
    _check_percent(budget, str(value), kwargs or args)


def _batch(budget: _Budget, value: Any, linecount: Any, fill_with: Any = None) -> None:
    budget.within(_count(linecount))
    if fill_with is not None:
        budget.within(max(_count(linecount) - 1, 0) * budget.size(fill_with))


def _slice(budget: _Budget, value: Any, slices: Any, fill_with: Any = None) -> None:
    budget.within(_count(slices))


def _urlize(
    budget: _Budget,
    value: Any,
    trim_url_limit: Any = None,
    nofollow: Any = False,
    target: Any = None,
    rel: Any = None,
    extra_schemes: Any = None,
) -> None:
    # every link (at least 4 characters of text) gets the target and rel attributes
    extra = sum(len(v) for v in (target, rel) if isinstance(v, str))
    budget.within((len(str(value)) // 4 + 1) * extra)


def _tojson(budget: _Budget, value: Any, indent: Any = None) -> None:
    step = len(indent) if isinstance(indent, str) else _count(indent)
    if step > 0:
        # every item may sit on its own line, indented once per level of nesting
        size = budget.size(value)
        budget.within(size * step * min(size, _depth(value, budget.value_cap)))


def _depth(value: Any, cap: int) -> int:
    if isinstance(value, (str, bytes)) or not isinstance(value, Collection) or cap <= 0:
        return 0
    items = value.values() if isinstance(value, Mapping) else value
    return 1 + max((_depth(item, cap - 1) for item in items), default=0)


_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "batch": _batch,
    "center": _center,
    "format": _format,
    "indent": _indent,
    "replace": _replace,
    "slice": _slice,
    "tojson": _tojson,
    "urlize": _urlize,
    "wordwrap": _wordwrap,
}


def _guard_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a jinja2 filter) checked before and after it runs; marked like ``fn`` (pass_context ...)."""
    check = _FILTER_CHECKS.get(name)
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        if check is not None:
            check(budget, *args[skip:], **kwargs)
        return budget.admit(fn(*args, **kwargs))

    return run


def _list_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(*args: Any) -> Any:
        budget = _budget()
        head, value = args[:-1], args[-1]  # jinja2 passes the eval context first
        items = value if isinstance(value, str) else islice(iter(value), budget.value_cap + 1)
        return budget.admit(fn(*head, items))

    return run


def _join_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
        budget = _budget()
        # with a separator, fewer items already make too long a string: take no more than that
        most = min(budget.value_cap, budget.value_cap // max(len(str(d)), 1) + 1)
        items = list(islice(iter(value), most + 1))
        budget.within(len(items) * (1 + len(str(d))) - len(str(d)) if len(items) <= most else budget.value_cap + 1)
        return budget.admit(fn(eval_ctx, items, d, attribute))

    return run


def _sum_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        budget = _budget()
        if not isinstance(start, (list, tuple)):
            return budget.admit(fn(environment, iterable, attribute, start))
        # Adding sequences one by one copies the sum so far each time: join them once instead.
        items = list(islice(iter(iterable), budget.value_cap + 1))
        if attribute is not None:
            items = list(map(make_attrgetter(environment, attribute), items))
        kind = list if isinstance(start, list) else tuple
        for item in items:
            if not isinstance(item, kind):
                raise TypeError(f'can only concatenate {kind.__name__} (not "{type(item).__name__}")')
        budget.within(budget.size(start) + sum(budget.size(item) for item in items))
        return budget.admit(kind(chain(start, *items)))

    return run


_FILTER_REPLACEMENTS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "join": _join_filter,
    "list": _list_filter,
    "sum": _sum_filter,
}


def _range(*args: Any) -> range:
    budget = _budget()
    numbers = range(*args)
    budget.within(len(numbers))
    return numbers


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    budget = _budget()
    # a word is at most 12 characters with its space
    budget.within(_count(n) * 12 * _count(max) if _count(n) <= budget.value_cap else budget.value_cap + 1)
    return str(budget.admit(generate_lorem_ipsum(n, html, min, max)))


# -- the environment -----------------------------------------------------------


class _Generator(CodeGenerator):
    """jinja2's code generator, routing loops, literals, ``~`` and block buffers through the budget."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop_iterables: set[int] = set()  # ids of the nodes a {% for %} iterates over

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        self._loop_iterables.add(id(node.iter))
        super().visit_For(node, frame)

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        # jinja2 allows no new node types, so a loop's iterable is wrapped as it is written out
        if id(node) not in self._loop_iterables:
            return super().visit(node, *args, **kwargs)
        self._loop_iterables.discard(id(node))
        self.write("environment.counted(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.new_buffer()")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_values(context.eval_ctx, (")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")

    def _built(self, visit: Callable[[Any, Frame], None], node: Any, frame: Frame) -> None:
        self.write("environment.built(")
        visit(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self._built(super().visit_List, node, frame)

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self._built(super().visit_Dict, node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx == "load":
            self._built(super().visit_Tuple, node, frame)
        else:
            super().visit_Tuple(node, frame)


class _Formatter(SandboxedFormatter):
    """``str.format`` in the sandbox, refusing widths and results past ``render_value``."""

    def __init__(self, env: jinja2.Environment, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._built = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._built = 0
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = _budget()
        _check_spec(budget, format_spec)
        text = super().format_field(value, format_spec)
        self._built += len(text)
        budget.within(self._built)
        return text


class _EscapeFormatter(_Formatter, EscapeFormatter):
    """``Markup.format``: as ``_Formatter``, escaping what it inserts."""


class _Environment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every way of building a value checked against the render's budget."""

    code_generator_class = _Generator
    intercepted_binops = frozenset(_BINOP_CHECKS)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _range
        self.globals["lipsum"] = _lipsum
        for name, fn in list(self.filters.items()):
            if name in _FILTER_REPLACEMENTS:
                self.filters[name] = _FILTER_REPLACEMENTS[name](fn)
            elif name not in _PASS_THROUGH:
                self.filters[name] = _guard_filter(name, fn)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        _BINOP_CHECKS[operator](budget, left, right)
        return budget.admit(self.binop_table[operator](left, right))

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = _budget()
        budget.step()
        if isinstance(__obj, LoopContext) and args:
            args = (_Counted(args[0], budget), *args[1:])  # a recursive loop's next level
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, _RECEIVERS) or (isinstance(owner, type) and issubclass(owner, _RECEIVERS)):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args and isinstance(owner, (str, bytes)):
                args = (*_join_method(budget, owner, args[0]), *args[1:])
            elif name in _METHOD_CHECKS:
                given = {k: v for k, v in kwargs.items() if k not in _CALL_EXTRAS}
                _METHOD_CHECKS[name](budget, owner, *args, **given)
        return budget.admit(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if not isinstance(value, (MethodType, BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
            return None
        text = value.__self__
        if not isinstance(text, str):
            return None
        formatter: Formatter
        formatter = _EscapeFormatter(self, escape=text.escape) if isinstance(text, Markup) else _Formatter(self)
        kind = type(text)
        mapping = value.__name__ == "format_map"

        def format(*args: Any, **kwargs: Any) -> str:
            if not mapping:
                return kind(formatter.vformat(text, args, kwargs))
            if kwargs or len(args) != 1:
                raise TypeError("format_map() takes exactly one positional argument")
            return kind(formatter.vformat(text, (), args[0]))

        return update_wrapper(format, value)

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """Join a block's text (``self.name()``) within ``render_value``."""
        budget = _budget()
        taken = []
        size = 0
        for part in parts:
            size += len(part)
            budget.within(size)
            taken.append(part)
        budget.spend(size)
        return "".join(taken)

    # called from the generated code (see _Generator)

    def counted(self, items: Iterable[Any]) -> _Counted:
        """A loop's iterable, counting its items."""
        return _Counted(items, _budget())

    def new_buffer(self) -> _Buffer:
        """A buffer for a block's text."""
        return _Buffer(_budget())

    def built(self, value: Any) -> Any:
        """A list, tuple or dict literal, checked."""
        return _budget().admit(value)

    def concat_values(self, eval_ctx: jinja2.nodes.EvalContext, values: tuple[Any, ...]) -> str:
        """``a ~ b``: each part converted and counted before they are joined."""
        budget = _budget()
        parts = []
        size = 0
        for value in values:
            text = value if isinstance(value, str) else str(value)
            size += len(text)
            budget.within(size)
            parts.append(text)
        return str(budget.admit(markup_join(parts) if eval_ctx.autoescape else "".join(parts)))


class _Template(jinja2.Template):
    """A compiled template whose renders run under a budget and stop once the output passes its limit."""

    _flat: dict[str, Any] | None = None

    def render(self, *args: Any, **kwargs: Any) -> str:
        variables = args[0] if len(args) == 1 and not kwargs else dict(*args, **kwargs)
        limits = getattr(variables, "limits", DEFAULT_LIMITS)
        cap = limits.render_output
        # jinja2 merges the template's globals (a ChainMap, slow to copy and to list) into every render's
        # context: merged here with a flat copy made once, and that copy is the globals the context lists.
        flat = self._flat
        if flat is None:
            flat = self._flat = dict(self.globals)
        token = _BUDGET.set(_Budget(limits, variables))
        try:
            parts = []
            size = 0
            context = new_context(self.environment, self.name, self.blocks, {**flat, **variables}, True, flat, None)
            for part in self.root_render_func(context):
                size += len(part)
                if size > cap:
                    raise Refused(f"template output exceeds {cap} characters (Limits.render_output)")
                parts.append(part)
            return "".join(parts)
        finally:
            _BUDGET.reset(token)

    def generate(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        yield self.render(*args, **kwargs)


class EnvClosedError(jinja2.UndefinedError):
    """A template read ``env`` that its tool may not see."""


class _Undefined(jinja2.StrictUndefined):
    """StrictUndefined, except that a name missing from a closed ``env`` explains the trust rule, and a
    misspelt name or key says what it may have meant (``args has no key 'titel'; did you mean 'args.title'?``).
    """

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        name, owner = self._undefined_name, self._undefined_obj
        budget = _BUDGET.get()
        if self._undefined_hint is not None or not isinstance(name, str) or budget is None:
            return super()._undefined_message
        variables = budget.variables
        if owner is missing:
            guess = meant(name, None, variables)
            message = f"{name!r} is undefined"
        elif isinstance(owner, Mapping):
            found = next((n for n, v in variables.items() if v is owner and n in ("args", "meta")), None)
            guess = meant(found, name, variables) if found is not None else _close(name, owner)
            message = f"{found} has no key {name!r}" if found is not None else super()._undefined_message
        else:
            return super()._undefined_message
        return f"{message}; did you mean {guess!r}?" if guess else message

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[jinja2.TemplateRuntimeError] = jinja2.UndefinedError,
    ) -> None:
        if isinstance(obj, ClosedEnv):
            hint, exc = obj.reason, EnvClosedError
        super().__init__(hint, obj, name, exc)


ENVIRONMENT = _Environment(undefined=_Undefined, autoescape=False, keep_trailing_newline=True)
ENVIRONMENT.template_class = _Template


# -- what a template reads, and what a misspelt read may have meant ------------------------------------

GUARDS = frozenset({"defined", "undefined"})  # tests that make a missing value harmless
DEFAULTS = frozenset({"default", "d"})  # filters that do
SCOPED = ("args", "meta")  # the variables whose keys ``reads`` reports
SUGGEST_FROM = 10_000  # keys one suggestion compares at most: a caller's huge mapping costs a bounded look


class Read(NamedTuple):
    """A variable a template reads without a guard: ``name`` (``args``), ``key`` (``title`` in ``args.title``,
    None for the name alone), and the line (of the template) it is first read on.
    """

    name: str
    key: str | None
    line: int


@lru_cache(maxsize=2048)
def reads(source: str) -> tuple[Read, ...]:
    """The variables ``source`` reads and no render can do without, in order of first appearance.

    Top-level names it never assigns (jinja2's ``meta.find_undeclared_variables``)
    that are no global (``range`` ...), and the constant keys it reads of ``args``
    and ``meta`` (``args.title``, ``meta['tone']``; dict methods such as
    ``args.get`` are not keys). A read guarded anywhere in the template
    (``is defined``, ``is undefined``, ``| default``) is left out.

    Raises:
        jinja2.TemplateSyntaxError: ``source`` does not parse.
    """
    from jinja2 import meta

    tree = ENVIRONMENT.parse(source)
    free = meta.find_undeclared_variables(tree) - set(ENVIRONMENT.globals)
    guarded = {
        _read_of(node.node, free)
        for node in tree.find_all((nodes.Test, nodes.Filter))
        if node.node is not None and node.name in (GUARDS if isinstance(node, nodes.Test) else DEFAULTS)
    }
    found: dict[tuple[str, str | None], int] = {}
    for node in tree.find_all((nodes.Name, nodes.Getattr, nodes.Getitem)):
        read = _read_of(node, free)
        if read is not None and read not in guarded and read not in found:
            found[read] = node.lineno
    return tuple(Read(name, key, line) for (name, key), line in found.items())


def _read_of(node: nodes.Node, free: Collection[str]) -> tuple[str, str | None] | None:
    """``(name, key)`` when ``node`` reads a free variable (``args``) or a constant key of ``args``/``meta``."""
    if isinstance(node, nodes.Name):
        return (node.name, None) if node.ctx == "load" and node.name in free else None
    if isinstance(node, nodes.Getattr):
        key: Any = node.attr
    elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        key = node.arg.value
    else:
        return None
    owner = node.node
    if not isinstance(owner, nodes.Name) or owner.name not in SCOPED or owner.name not in free:
        return None
    if not isinstance(key, str) or (isinstance(node, nodes.Getattr) and hasattr(dict, key)):
        return None
    return owner.name, key


def meant(name: str, key: str | None, variables: Mapping[str, Any]) -> str | None:
    """What a read of ``name`` (``name.key`` with ``key``) that ``variables`` lack may have meant, or None.

    ``variables`` maps each template variable to its value or its keys. A
    key of ``args`` is looked for among the keys of ``args`` and the
    properties ``meta.params`` declares. A bare name is a variable or global
    spelt another way (``arg``), else a key of ``args`` or ``meta``
    (``titel`` -> ``args.title``).
    """
    if key is not None:
        close = _close(key, [k for k in _keys_of(name, variables) if k != key])  # a declared key not passed: no guess
        return f"{name}.{close}" if close else None
    close = _close(name, [*variables, *ENVIRONMENT.globals])
    if close:
        return close
    for owner in SCOPED:
        close = _close(name, _keys_of(owner, variables))
        if close:
            return f"{owner}.{close}"
    return None


def _keys_of(name: str, variables: Mapping[str, Any]) -> list[str]:
    """The string keys of variable ``name`` (and, for ``args``, of the ``params`` properties in ``meta``)."""
    sources: list[Any] = [variables.get(name)]
    if name == "args":
        sources.append(_get(_get(variables.get("meta"), "params"), "properties"))
    keys: list[str] = []
    for value in sources:
        if _iterable(value):
            keys.extend(k for k in islice(value, SUGGEST_FROM) if isinstance(k, str))
    return keys


def _iterable(value: Any) -> bool:
    return isinstance(value, (Mapping, Collection)) and not isinstance(value, (str, bytes, bytearray))


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _close(word: str, choices: Iterable[Any]) -> str | None:
    import difflib  # only a failing render or check needs it

    keys = [c for c in islice(choices, SUGGEST_FROM) if isinstance(c, str)]
    close = difflib.get_close_matches(word, keys, n=1)
    return close[0] if close else None
