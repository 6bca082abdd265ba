"""Names: the one reading of "a name or a list of names", and short reprs of caller data for messages.

Metadata names tools and keys in many places (``$inherit``, ``$private``,
``$locked``, ``$remove``, ``$static``, ``$dynamic``, an entry's ``before``
and ``after``, a ``when``'s ``meta`` and ``kind``): each takes one name or a
list of them, read here.
"""

from __future__ import annotations

import reprlib
from typing import Any

from .errors import ConfigurationError

_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60


def brief(value: Any) -> str:
    """A short ``repr`` of caller data of any size or depth, for messages."""
    return _BRIEF.repr(value)


def names(value: Any, what: str, **where: Any) -> tuple[str, ...]:
    """``value``, a name or a list of names, as a tuple (None: no names).

    ``where`` are the error's fields (``tool``, ``path``, ``line``, ``key``...).

    Raises:
        ConfigurationError: anything else, naming ``what`` and what was found.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigurationError(f"{what} must be a name or a list of names, not {brief(value)}", **where)
