"""Invoke options: ``$NAME`` keys in args (R-INV-1), context seeds, and their checks.

Options come from programs (keyword arguments of ``invoke``) and from callers
(``$`` keys in args, any JSON). ``extract_options`` checks every value it
returns, whatever its source, before anything uses it: a value of the wrong
type at any level is an ``InvocationError`` (``ConfigurationError`` for a
malformed middleware spec) that says what was expected, never a Python error
from deep inside the engine.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from .context import Context
from .errors import InvocationError, ToolNotFoundError
from .names import brief
from .ordering import extra_specs
from .registry import NAME_MAX
from .tool import Tool

OPTIONS = ("context", "middleware", "overrides", "timeout")
NO_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {"context": None, "middleware": None, "overrides": None, "timeout": None}
)
SEED_KEYS = frozenset({"locals", "nonlocals", "envelope", "parent", "target", "paths", "cwd", "session"})
# A session id: a short printable name (it is a key in the session store and a CLI argument).
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
# A seeded folder: at most this many bytes (file names below it must still fit PATH_MAX, 4096).
FOLDER_BYTES = 2_048
FOLDER_RULE = f"strings without NUL, at most {FOLDER_BYTES} bytes, {NAME_MAX} per name"
CONTEXT_FORM = "a mapping of locals, nonlocals, envelope, paths, cwd, session (parent, target: contexts, from programs)"


def extract_options(
    args: Any,
    tool: Any,
    context: Mapping[str, Any] | None,
    middleware: Any,
    overrides: Mapping[str, Any] | None,
    timeout: float | None,
) -> tuple[Any, Mapping[str, Any]]:
    """Split ``$NAME`` keys out of mapping args (R-INV-1); explicit options win, ``$`` values fill gaps.

    ``tool`` is the ref being invoked (or a Tool). Every option value, explicit
    or from args, is checked (``check_option``); the returned timeout is one
    the event loop accepts.

    With no options and no ``$`` keys the shared ``NO_OPTIONS`` is returned:
    callers read it, never change it.

    Raises:
        ToolNotFoundError: ``tool`` is neither a string nor a Tool.
        InvocationError: an unknown ``$`` key, or an option value of the wrong type.
        ConfigurationError: a malformed middleware spec.
    """
    if not isinstance(tool, (str, Tool)):
        # Refused before anything hashes it or names a file after it.
        raise ToolNotFoundError(brief(tool), reason=f"a ref must be a non-empty string, not {type(tool).__name__}")
    if context is None and middleware is None and overrides is None and timeout is None:
        # The common call: no options at all, so no dict is built for them.
        if args is None:
            return {}, NO_OPTIONS
        if not isinstance(args, Mapping) or not any(isinstance(k, str) and k.startswith("$") for k in args):
            return args, NO_OPTIONS
    name = tool if isinstance(tool, str) else tool.name
    options: dict[str, Any] = {"context": context, "middleware": middleware, "overrides": overrides, "timeout": timeout}
    for option, value in options.items():
        if value is not None:
            options[option] = check_option(option, value, name, option)
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
                f"unknown option {brief(key)} in args; allowed: {', '.join('$' + o for o in OPTIONS)}",
                tool=name,
                key=key,
            )
        if value is not None:
            value = check_option(option, value, name, key)
        explicit = options[option]
        if explicit is None:
            options[option] = value
        elif isinstance(explicit, Mapping) and isinstance(value, Mapping):
            options[option] = {**value, **explicit}
    return cleaned, options


def check_option(option: str, value: Any, tool: str, label: str) -> Any:
    """Check one option value (not None); return it as the engine uses it.

    ``label`` names the option in messages (``$context`` from args, ``context``
    as a keyword).

    Raises:
        InvocationError: a value of the wrong type at any level.
        ConfigurationError: a malformed middleware spec.
    """
    if option == "context":
        check_context(value, tool, label)
    elif option == "middleware":
        extra_specs(value, label)
    elif option == "overrides":
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            got = "other keys" if isinstance(value, Mapping) else type(value).__name__
            raise InvocationError(
                f"{label} must be a mapping of metadata keys (strings) to values, not {got}", tool=tool, key=label
            )
    else:
        return check_timeout(value, tool, label)
    return value


def check_context(seed: Any, tool: str, label: str = "context") -> None:
    """Check a context seed: its keys (``SEED_KEYS``) and the type of each value.

    ``locals``, ``envelope``: mappings (``locals.middleware`` extra middleware
    specs); ``nonlocals``: a dict (shared by reference); ``paths``: a folder or
    a list of folders; ``cwd``: a folder; ``parent``, ``target``: contexts
    (programs pass them, JSON cannot).

    Raises:
        InvocationError: not a mapping, an unknown key, or a value of the wrong type.
        ConfigurationError: a malformed ``locals.middleware`` spec.
    """
    if not isinstance(seed, Mapping):
        raise InvocationError(f"{label} must be {CONTEXT_FORM}; not {type(seed).__name__}", tool=tool, key=label)
    unknown = [key for key in seed if key not in SEED_KEYS]
    if unknown:
        raise InvocationError(
            f"unknown context key(s) {', '.join(sorted(brief(k) for k in unknown))} in {label}; "
            f"allowed: {', '.join(sorted(SEED_KEYS))}",
            tool=tool,
            key=label,
        )

    def wrong(key: str, expected: str) -> InvocationError:
        got = type(seed[key]).__name__
        return InvocationError(f"{label}.{key} must be {expected}, not {got}", tool=tool, key=label)

    for key in ("locals", "envelope"):
        if key in seed and not isinstance(seed[key], Mapping):
            raise wrong(key, "a mapping")
    if "locals" in seed:
        extra_specs(seed["locals"].get("middleware"), f"{label} locals.middleware")
    if "nonlocals" in seed and not isinstance(seed["nonlocals"], dict):
        raise wrong("nonlocals", "a dict (it is shared by reference)")
    if "session" in seed and not (isinstance(seed["session"], str) and SESSION_ID.fullmatch(seed["session"])):
        raise InvocationError(
            f"{label}.session must be a session id (letters, digits and . _ : @ -, at most 128), "
            f"not {brief(seed['session'])}",
            tool=tool,
            key=label,
        )
    for key in ("parent", "target"):
        if seed.get(key) is not None and not isinstance(seed[key], Context):
            raise wrong(key, "a Context (passed by programs)")
    if "paths" in seed:
        value = seed["paths"]
        folders = [value] if isinstance(value, (str, os.PathLike)) else value
        if not isinstance(folders, list) or not all(_is_folder_name(f) for f in folders):
            raise InvocationError(
                f"{label}.paths must be a folder or a list of folders ({FOLDER_RULE}), not {brief(value)}",
                tool=tool,
                key=label,
            )
    if "cwd" in seed and not _is_folder_name(seed["cwd"]):
        raise InvocationError(
            f"{label}.cwd must be a folder ({FOLDER_RULE}), not {brief(seed['cwd'])}", tool=tool, key=label
        )


def check_timeout(value: Any, tool: str, label: str = "timeout") -> float:
    """A timeout the event loop accepts: a positive number of seconds (``inf`` for none).

    Raises:
        InvocationError: not a number, a boolean, nan, zero or negative.
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (isinstance(value, float) and math.isnan(value)) or value <= 0:
        raise InvocationError(
            f"{label} must be a positive number of seconds or null, not {brief(value)}", tool=tool, key=label
        )
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return math.inf  # longer than any clock counts: no timeout
    return value


def _is_folder_name(value: Any) -> bool:
    """True for a folder name the file system can be asked about.

    A string (or path) without NUL, encodable, at most ``FOLDER_BYTES`` bytes
    with no segment longer than ``NAME_MAX``: anything else would fail inside
    ``os.stat`` of the first file looked up below it.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        encoded = os.fsencode(value)
    except UnicodeError:
        return False
    return len(encoded) <= FOLDER_BYTES and all(len(part) <= NAME_MAX for part in encoded.split(b"/"))


def folders(value: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> Iterable[str | os.PathLike[str]]:
    """A folder or several: ``Manager("tools")`` means one folder, not each of its letters."""
    return (value,) if isinstance(value, (str, os.PathLike)) else value


def as_mapping(value: Any, what: str, tool: str) -> dict[str, Any]:
    """``value`` as a dict.

    Raises:
        InvocationError: not a mapping.
    """
    if not isinstance(value, Mapping):
        raise InvocationError(f"{what} must be a mapping, not {type(value).__name__}", tool=tool)
    return dict(value)


def as_list(value: Any, what: str) -> list[Any]:
    """A folder or a list of folders, as a list.

    Raises:
        InvocationError: anything else.
    """
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if not isinstance(value, list):
        raise InvocationError(f"{what} must be a list of folders")
    return value
