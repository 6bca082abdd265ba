"""Checks done before an operation (``*``, ``**``, ``+``, ``%``, a method call, ``str.format``) builds its value.

Each check is handed the render's ``Budget`` and the operation's operands,
and refuses (``Refused``) a value past ``Limits.render_value`` before it is
built, where its size is known up front (``'x' * 10**9``, ``'x'.ljust(10**9)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from itertools import islice
from typing import Any

from .budget import MAX_INT_BITS, MAX_INT_DIGITS, Budget, Refused

_PERCENT = re.compile(r"%(?:\(([^)]*)\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([a-zA-Z%])")
_DIGITS = re.compile(r"\d+")


def size_arg(value: Any) -> int:
    """An int argument used as a size (None, floats and junk count as 0: the call itself will complain)."""
    return value if isinstance(value, int) else 0


def check_percent(budget: Budget, fmt: str | bytes, args: Any) -> None:
    """``fmt % args``: widths and numeric precisions must fit in ``render_value``."""
    text = fmt.decode("latin-1") if isinstance(fmt, (bytes, bytearray)) else fmt
    values = args if isinstance(args, tuple) else (args,)
    position = 0
    total = 0
    for match in _PERCENT.finditer(text):
        for part in match.group(2), match.group(3):
            if part == "*":
                total += abs(size_arg(values[position])) if position < len(values) else 0
                position += 1
            elif part:
                total += int(part) if len(part) <= 18 else budget.value_cap + 1
        if match.group(4) != "%" and match.group(1) is None:
            position += 1
    budget.within(total)


def check_spec(budget: Budget, spec: str) -> None:
    """A ``str.format`` spec: no width or precision past ``render_value``."""
    for number in _DIGITS.findall(spec):
        if len(number) > 18 or int(number) > budget.value_cap:
            budget.too_big()


def _check_mul(budget: Budget, left: Any, right: Any) -> None:
    if isinstance(right, int) and not isinstance(left, int):
        left, right = right, left
    if not isinstance(left, int):
        return
    if isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
            raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")
    elif isinstance(right, (str, bytes, list, tuple)) and left > 0:
        budget.within(left * budget.size(right))


def _check_pow(budget: Budget, base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) <= 1:
        return
    if exponent > MAX_INT_BITS or exponent * math.log2(abs(base)) > MAX_INT_BITS:
        raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")


def _check_add(budget: Budget, left: Any, right: Any) -> None:
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
        budget.within(budget.size(left) + budget.size(right))


BINOP_CHECKS: dict[str, Callable[[Budget, Any, Any], None]] = {
    "*": _check_mul,
    "**": _check_pow,
    "+": _check_add,
    "%": lambda budget, left, right: check_percent(budget, left, right) if isinstance(left, (str, bytes)) else None,
}
"""The binary operators the sandbox intercepts, each with the check run before it builds its value."""


def check_replace(budget: Budget, text: Any, old: Any, new: Any, count: Any = -1) -> None:
    """``text.replace(old, new, count)``: the result must fit in ``render_value``."""
    if not (isinstance(text, (str, bytes)) and isinstance(old, type(text)) and isinstance(new, type(text))):
        return
    whole: Any = text  # str or bytes, with old and new of the same type
    found = whole.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    budget.within(len(text) + found * max(len(new) - len(old), 0))


def _check_width(budget: Budget, text: Any, width: Any = 0, *args: Any, **kwargs: Any) -> None:
    budget.within(size_arg(width))


def _check_expandtabs(budget: Budget, text: Any, tabsize: Any = 8) -> None:
    if isinstance(text, (str, bytes)):
        tab = "\t" if isinstance(text, str) else b"\t"
        budget.within(len(text) + text.count(tab) * max(size_arg(tabsize), 0))  # type: ignore[arg-type]


def _check_translate(budget: Budget, text: Any, table: Any) -> None:
    if isinstance(text, str) and isinstance(table, Mapping):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        budget.within(len(text) * max(longest, 1))


def _check_to_bytes(budget: Budget, number: Any, length: Any = 1, *args: Any, **kwargs: Any) -> None:
    budget.within(size_arg(length))


def _check_fromkeys(budget: Budget, owner: Any, keys: Any, value: Any = None) -> None:
    if isinstance(keys, Collection):
        budget.within(len(keys) * max(budget.size(value), 1))


# Methods (of str, bytes, int and dict) that build a value whose size an argument sets.
_METHOD_CHECKS: dict[str, Callable[..., None]] = {
    "ljust": _check_width,
    "rjust": _check_width,
    "center": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": check_replace,
    "translate": _check_translate,
    "to_bytes": _check_to_bytes,
    "fromkeys": _check_fromkeys,
}
_RECEIVERS = (str, bytes, bytearray, int, dict)
_CALL_EXTRAS = frozenset({"_loop_vars", "_block_vars"})  # passed by the generated code, not by the author


def _join_method(budget: Budget, separator: str | bytes, items: Any) -> tuple[Any, ...]:
    """``sep.join(items)`` with the items taken first, so the result's size is known before it is built."""
    taken = tuple(islice(iter(items), budget.value_cap + 1))
    budget.within(len(taken))
    budget.within(sum(len(i) for i in taken if isinstance(i, (str, bytes))) + len(separator) * (len(taken) - 1))
    return (taken,)


def check_call(budget: Budget, obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Check a call of a str, bytes, int or dict method that builds a sized value; return the args to call with.

    ``sep.join(items)`` gets its items taken first (a tuple), so the
    result's size is known before it is built; other calls keep their args.
    """
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, _RECEIVERS) or (isinstance(owner, type) and issubclass(owner, _RECEIVERS)):
        name = getattr(obj, "__name__", "")
        if name == "join" and args and isinstance(owner, (str, bytes)):
            args = (*_join_method(budget, owner, args[0]), *args[1:])
        elif name in _METHOD_CHECKS:
            given = {k: v for k, v in kwargs.items() if k not in _CALL_EXTRAS}
            _METHOD_CHECKS[name](budget, owner, *args, **given)
    return args
