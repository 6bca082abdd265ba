"""The sandbox's filters and the ``range`` and ``lipsum`` globals, bounded by the render's budget.

A filter whose result size its arguments set is checked before it runs;
every filter's result (but the pass-through ones) is checked after;
``join``, ``list`` and ``sum`` are replaced by versions that take no more
items than the limits allow.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import wraps
from itertools import chain, islice
from typing import Any

import jinja2
from jinja2.filters import make_attrgetter
from jinja2.utils import generate_lorem_ipsum

from .budget import Budget, current_budget
from .operations import check_percent, check_replace, size_arg

# Filters that hand back a value they were given (or a number): nothing new to check.
_PASS_THROUGH = frozenset(
    {"abs", "attr", "count", "d", "default", "first", "float", "last", "length", "max", "min", "random", "round"}
)


def _center(budget: Budget, value: Any, width: Any = 80) -> None:
    budget.within(size_arg(width))


def _indent(budget: Budget, text: Any, width: Any = 4, first: Any = False, blank: Any = False) -> None:
    text = str(text)
    step = len(width) if isinstance(width, str) else size_arg(width)
    budget.within(len(text) + (text.count("\n") + 1) * max(step, 0))


def _wordwrap(
    budget: Budget,
    text: Any,
    width: Any = 79,
    break_long_words: Any = True,
    wrapstring: Any = None,
    break_on_hyphens: Any = True,
) -> None:
    text = str(text)
    breaks = sum(text.count(c) for c in " \t\n\r\x0b\x0c-") + len(text) // max(size_arg(width), 1) + 1
    budget.within(len(text) + min(breaks, len(text) + 1) * (len(wrapstring) if isinstance(wrapstring, str) else 1))


def _replace(budget: Budget, text: Any, old: Any, new: Any, count: Any = None) -> None:
    check_replace(budget, str(text), str(old), str(new), -1 if count is None else count)


def _format(budget: Budget, value: Any, *args: Any, **kwargs: Any) -> None:
    check_percent(budget, str(value), kwargs or args)


def _batch(budget: Budget, value: Any, linecount: Any, fill_with: Any = None) -> None:
    budget.within(size_arg(linecount))
    if fill_with is not None:
        budget.within(max(size_arg(linecount) - 1, 0) * budget.size(fill_with))


def _slice(budget: Budget, value: Any, slices: Any, fill_with: Any = None) -> None:
    budget.within(size_arg(slices))


def _urlize(
    budget: Budget,
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


def _tojson(budget: Budget, value: Any, indent: Any = None) -> None:
    step = len(indent) if isinstance(indent, str) else size_arg(indent)
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
        budget = current_budget()
        if check is not None:
            check(budget, *args[skip:], **kwargs)
        return budget.admit(fn(*args, **kwargs))

    return run


def _list_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(*args: Any) -> Any:
        budget = current_budget()
        head, value = args[:-1], args[-1]  # jinja2 passes the eval context first
        items = value if isinstance(value, str) else islice(iter(value), budget.value_cap + 1)
        return budget.admit(fn(*head, items))

    return run


def _join_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
        budget = current_budget()
        # with a separator, fewer items already make too long a string: take no more than that
        most = min(budget.value_cap, budget.value_cap // max(len(str(d)), 1) + 1)
        items = list(islice(iter(value), most + 1))
        budget.within(len(items) * (1 + len(str(d))) - len(str(d)) if len(items) <= most else budget.value_cap + 1)
        return budget.admit(fn(eval_ctx, items, d, attribute))

    return run


def _sum_filter(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def run(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        budget = current_budget()
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
    budget = current_budget()
    numbers = range(*args)
    budget.within(len(numbers))
    return numbers


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    budget = current_budget()
    # a word is at most 12 characters with its space
    budget.within(size_arg(n) * 12 * size_arg(max) if size_arg(n) <= budget.value_cap else budget.value_cap + 1)
    return str(budget.admit(generate_lorem_ipsum(n, html, min, max)))


def guard(environment: jinja2.Environment) -> None:
    """Bound ``environment``'s ``range`` and ``lipsum`` globals and its filters by the render's budget."""
    environment.globals["range"] = _range
    environment.globals["lipsum"] = _lipsum
    for name, fn in list(environment.filters.items()):
        if name in _FILTER_REPLACEMENTS:
            environment.filters[name] = _FILTER_REPLACEMENTS[name](fn)
        elif name not in _PASS_THROUGH:
            environment.filters[name] = _guard_filter(name, fn)
