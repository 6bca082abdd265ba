"""MCP completion: ``completion/complete`` offers a prompt argument's values from its ``params`` schema.

The candidates are the property's ``enum`` and ``examples`` (in that order,
each once, as text: JSON for what is not a string), and those that start
with what the user has typed (case-insensitive) are offered, at most
``MAX_VALUES`` (the protocol's limit), with how many matched in all. An
argument the schema says nothing about, or a reference that is not a
served prompt, gets no values.

An author may name a tool that offers more (``complete-with`` metadata): a
ref for every argument, or a mapping of argument names to refs. The tool
is invoked by the program (the author named it; the client only supplies
data) with ``{argument, value, arguments}``: the argument's name, what the
user typed, and the prompt's other arguments given so far. It answers a
list of strings (or ``{values: [...]}``); they come after the schema's
values, each once. A completion tool that fails or answers something else
adds nothing (it is logged): completion never fails a client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

if TYPE_CHECKING:
    import mcp.types as types

    from .listings import Listing
    from .manager import Manager

log = logging.getLogger("orchestrator")
COMPLETER = "complete-with"
"""The metadata key naming the tool that completes a prompt's arguments."""

MAX_VALUES = 100  # values one completion may carry (MCP)


def candidates(schema: Any) -> list[str]:
    """The values a property's schema names: its ``enum``, then its ``examples``, each once, as text."""
    if not isinstance(schema, Mapping):
        return []
    found: dict[str, None] = {}
    for key in ("enum", "examples"):
        values = schema.get(key)
        if isinstance(values, (list, tuple)):
            for value in values:
                found[value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)] = None
    return list(found)


def complete(listing: Listing | None, argument: str, typed: str) -> types.Completion:
    """The values offered for ``argument`` of ``listing`` (None: not a served prompt) after ``typed``."""
    import mcp.types as types

    if listing is None or not listing.offer.as_prompt:
        return types.Completion(values=[], total=0, has_more=False)
    properties = listing.schema.get("properties")
    schema = properties.get(argument) if isinstance(properties, Mapping) else None
    prefix = typed.casefold()
    matched = [value for value in candidates(schema) if value.casefold().startswith(prefix)]
    return types.Completion(values=matched[:MAX_VALUES], total=len(matched), has_more=len(matched) > MAX_VALUES)


def completer(metadata: Mapping[str, Any], argument: str, ref: str) -> str | None:
    """The tool ``complete-with`` names for ``argument``, or None.

    Raises:
        ConfigurationError: ``complete-with`` is neither a ref nor a mapping of argument names to refs.
    """
    named = metadata.get(COMPLETER)
    if named is None or isinstance(named, str):
        return named
    if isinstance(named, Mapping) and all(isinstance(v, str) for v in named.values()):
        return named.get(argument)  # type: ignore[no-any-return]
    raise ConfigurationError(f"{COMPLETER} must name a tool, or map argument names to tools", tool=ref, key=COMPLETER)


async def complete_with(
    manager: Manager, listing: Listing | None, argument: str, typed: str, given: Mapping[str, Any] | None
) -> types.Completion:
    """``complete``'s values, then those the author's completion tool offers (see the module docstring)."""
    import mcp.types as types

    found = complete(listing, argument, typed)
    if listing is None or not listing.offer.as_prompt:
        return found
    try:
        tool = manager.find_tool(listing.ref)
        named = completer(manager.planner.plan(tool, manager.paths).raw.values, argument, listing.ref)
        if named is None:
            return found
        args = {"argument": argument, "value": typed, "arguments": dict(given or {})}
        offered = await manager.invoke(named, args)
    except Exception as exc:  # the tool's own failure too: completion never fails a client (cancellation passes)
        log.warning("%s: completing %r: %s", listing.ref, argument, exc)
        return found
    if isinstance(offered, Mapping):
        offered = offered.get("values")
    if not isinstance(offered, list) or not all(isinstance(v, str) for v in offered):
        log.warning("%s: completion tool %r answered %s, not a list of strings", listing.ref, named, type(offered))
        return found
    values = list(dict.fromkeys([*found.values, *offered]))
    total = (found.total or len(found.values)) + len(values) - len(found.values)
    return types.Completion(values=values[:MAX_VALUES], total=total, has_more=total > MAX_VALUES)
