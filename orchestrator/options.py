"""Invoke options: ``$NAME`` keys in args (R-INV-1), context seeds, and their checks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from .errors import InvocationError

OPTIONS = ("context", "middleware", "overrides", "timeout")
NO_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {"context": None, "middleware": None, "overrides": None, "timeout": None}
)
SEED_KEYS = frozenset({"locals", "nonlocals", "envelope", "parent", "target", "paths", "cwd"})


def extract_options(
    args: Any,
    tool: Any,
    context: Mapping[str, Any] | None,
    middleware: Any,
    overrides: Mapping[str, Any] | None,
    timeout: float | None,
) -> tuple[Any, dict[str, Any]]:
    """Split ``$NAME`` keys out of mapping args (R-INV-1); explicit options win, ``$`` values fill gaps.

    Raises:
        InvocationError: an unknown ``$`` key.
    """
    options: dict[str, Any] = {"context": context, "middleware": middleware, "overrides": overrides, "timeout": timeout}
    if args is None:
        return {}, options
    if not isinstance(args, Mapping) or not any(isinstance(k, str) and k.startswith("$") for k in args):
        return args, options
    cleaned = {}
    for key, value in args.items():
        if not (isinstance(key, str) and key.startswith("$")):
            cleaned[key] = value
            continue
        option = key[1:]
        if option not in OPTIONS:
            raise InvocationError(
                f"unknown option {key!r} in args; allowed: {', '.join('$' + o for o in OPTIONS)}",
                tool=str(tool),
                key=key,
            )
        explicit = options[option]
        if explicit is None:
            options[option] = value
        elif isinstance(explicit, Mapping) and isinstance(value, Mapping):
            options[option] = {**value, **explicit}
    return cleaned, options


def folders(value: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> Iterable[str | os.PathLike[str]]:
    """A folder or several: ``Manager("tools")`` means one folder, not each of its letters."""
    return (value,) if isinstance(value, (str, os.PathLike)) else value


def as_mapping(value: Any, what: str, tool: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvocationError(f"{what} must be a mapping, not {type(value).__name__}", tool=tool)
    return dict(value)


def as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if not isinstance(value, list):
        raise InvocationError(f"{what} must be a list of folders")
    return value
