"""Read-only containers for metadata that every invocation shares.

Parsed tools, authorities and cached plans are shared by every invocation
through the caches, and a middleware's args are a metadata value. So that no
invocation can change what the next one sees (R-INV-4), metadata is frozen
once, when it is loaded or merged: ``FrozenDict`` and ``FrozenList`` are
``dict`` and ``list`` subclasses (JSON, jsonschema and ``isinstance`` checks
see ordinary containers) that refuse every change with a ``TypeError``
saying to copy first. Copies (``dict(value)``, ``list(value)``,
``copy.copy``) are ordinary, mutable containers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

_MESSAGE = "{kind} is read-only: metadata is shared by every invocation; change a copy ({copy}(value))"


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses changes; ``dict(value)`` is a mutable copy."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_MESSAGE.format(kind="this mapping", copy="dict"))

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` that refuses changes; ``list(value)`` is a mutable copy."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_MESSAGE.format(kind="this list", copy="list"))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_AS_THEY_ARE = frozenset({str, int, float, bool, type(None), FrozenDict, FrozenList})
"""Types ``freeze`` returns unchanged, known by their type alone: a string is no ``Mapping``, but asking the ABC
that costs a call into ``abc.__instancecheck__`` (most values a merge freezes are strings)."""


def freeze(value: Any) -> Any:
    """``value`` with every mapping and list inside it read-only (already frozen parts are reused)."""
    kind = type(value)
    if kind in _AS_THEY_ARE:
        return value
    if isinstance(value, Mapping):
        return FrozenDict((key, freeze(item)) for key, item in value.items())
    if isinstance(value, list):
        if all(type(item) in _AS_THEY_ARE for item in value):
            return FrozenList(value)  # a list of strings (tags): nothing inside to freeze
        return FrozenList(freeze(item) for item in value)
    if kind is tuple:
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """A deep, mutable copy of ``value`` made of plain dicts and lists."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    if type(value) is tuple:
        return tuple(thaw(item) for item in value)
    return value


FROZEN = frozenset({FrozenDict, FrozenList})
"""The kinds of value ``answer_by_identity`` remembers by default: mappings and lists that cannot change."""

TUPLE = frozenset({tuple})
"""For ``answer_by_identity``: a tuple a module builds of values that never change (a chain, a shape)."""


def answer_by_identity(
    cache: dict[int, tuple[Any, Any]],
    value: Any,
    compute: Callable[[Any], Any],
    size: int = 4096,
    kinds: frozenset[type] = FROZEN,
) -> Any:
    """``compute(value)``, remembered in ``cache`` by identity when ``value``'s exact type is one of ``kinds``.

    Frozen values are shared (an authority's by every tool under it; equal ones read from the cache
    folder by every tool that holds them, ``orchestrator.frontmatters``), so a catalog walks each once;
    so are the tuples the cascade and the planner hand every tool of a folder. A value of another type
    is computed every time. ``cache`` holds each value it answers for (so its id is no other's while
    there) and is emptied when it reaches ``size``. A ``compute`` that raises is not remembered.
    """
    if type(value) not in kinds:
        return compute(value)
    hit = cache.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    found = compute(value)
    if len(cache) >= size:
        cache.clear()
    cache[id(value)] = (value, found)  # held: its id is no other's while it is here
    return found
