"""The per-render budget: what one render of a template has spent, and what ``Limits`` lets it spend.

``sandbox`` sets a fresh ``Budget`` for every render (``BUDGET``); the
checks in ``operations`` and ``filters`` and the sandbox's own hooks read it
with ``current_budget`` and refuse, raising ``Refused``, once a limit is
passed.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NoReturn

import jinja2
from jinja2.utils import Namespace

from .limits import Limits

MAX_INT_DIGITS = 4300
"""Digits an integer built by a template may have: CPython's default ``int_max_str_digits``."""

WORK_FACTOR = 10
"""One render may build at most this many times ``Limits.render_value`` characters and items in all."""

MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
"""Bits of the largest integer a template may build (``MAX_INT_DIGITS`` decimal digits)."""

_REMEMBERED = 4096  # container sizes one render keeps (least recently used go first)


class Refused(Exception):
    """A render went over one of its limits; ``render`` turns it into an InterpolationError."""


class Budget:
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
            if value.bit_length() > MAX_INT_BITS:
                raise Refused(f"template builds an integer of more than {MAX_INT_DIGITS} digits")
        elif isinstance(value, (Collection, Namespace)):
            self.within(self.size(value))
        return value


BUDGET: ContextVar[Budget | None] = ContextVar("toolcascade_render_budget", default=None)
"""The budget of the render in progress in this context (None outside a render)."""


def current_budget() -> Budget:
    """The budget of the render in progress.

    Raises:
        RuntimeError: no render is in progress (jinja2 folding constants while
            compiling ends up here, and then leaves the expression to run time).
    """
    budget = BUDGET.get()
    if budget is None:
        raise RuntimeError("templates render through orchestrator.interpolate.render")
    return budget


class Counted:
    """An iterable whose items count against ``render_loops``; ``len`` passes through when it has one."""

    __slots__ = ("_items", "_budget")

    def __init__(self, items: Iterable[Any], budget: Budget) -> None:
        self._items = items
        self._budget = budget

    def __iter__(self) -> Iterator[Any]:
        step = self._budget.step
        for item in self._items:
            step()
            yield item

    def __len__(self) -> int:
        return len(self._items)  # type: ignore[arg-type]  # TypeError when it has none, as LoopContext expects


class Buffer(list):  # type: ignore[type-arg]
    """Where a ``{% set %}`` block, a macro or a ``{% filter %}`` collects its text, within ``render_value``."""

    __slots__ = ("_budget", "_size")

    def __init__(self, budget: Budget) -> None:
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
