"""``$locked`` entries against overrides: no annotation may touch them, no reordering may move them.

An authority's ``$locked`` entries (``trust``, ``validate-args``, ...) cannot
be removed or overridden by extra middleware (R-CHAIN-5). Overrides are a
cascade level, so they could reach the same entries through annotations:
``$remove``, ``$static``, ``$merge`` or ``$private`` naming a locked key, or
``$order`` moving an entry across one (``execute`` before ``validate-args``
runs the body unchecked). Both are refused, from any caller, program
included: a lock is the authority's word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .cascade import Level
from .errors import SecurityError
from .ordering import Entry

_NAMING = ("$remove", "$static", "$dynamic", "$private", "$merge")


def _named(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Mapping | list | tuple):
        return (v for v in value if isinstance(v, str))
    return ()


def guard_locked(level: Level, locked: frozenset[str], tool: str) -> None:
    """Refuse annotations in ``level`` (the overrides) that name a locked entry.

    Raises:
        SecurityError: ``$remove``/``$static``/``$dynamic``/``$private``/``$merge``
            naming a locked key, or ``$order`` of or against one.
    """
    if not locked or not level.annotations:
        return
    for note in _NAMING:
        for name in _named(level.annotations.get(note)):
            if name in locked:
                raise SecurityError(f"overrides may not use {note} on locked entry {name!r}", tool=tool, key=note)
    order = level.annotations.get("$order")
    if isinstance(order, Mapping):
        for key, spec in order.items():
            named = [key]
            if isinstance(spec, Mapping):
                named += [*_named(spec.get("before")), *_named(spec.get("after"))]
            hit = next((name for name in named if name in locked), None)
            if hit is not None:
                raise SecurityError(
                    f"overrides may not use $order to move {key!r} against locked entry {hit!r}",
                    tool=tool,
                    key="$order",
                )


def keep_locked_order(before: Sequence[Entry], after: Sequence[Entry], locked: frozenset[str], tool: str) -> None:
    """Refuse a chain ``after`` in which an entry changed sides of a locked entry compared with ``before``.

    Raises:
        SecurityError: naming the moved entry and the locked one.
    """
    common = {e.name for e in before} & {e.name for e in after}
    old = [e.name for e in before if e.name in common]
    new = [e.name for e in after if e.name in common]
    for name in locked & common:
        earlier_old, earlier_new = set(old[: old.index(name)]), set(new[: new.index(name)])
        moved = sorted(earlier_old ^ earlier_new)
        if moved:
            raise SecurityError(
                f"overrides' $order moves {moved[0]!r} across locked entry {name!r}", tool=tool, key="$order"
            )
