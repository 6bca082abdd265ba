"""MCP completion: ``completion/complete`` offers a prompt argument's values from its ``params`` schema.

The candidates are the property's ``enum`` and ``examples`` (in that order,
each once, as text: JSON for what is not a string), and those that start
with what the user has typed (case-insensitive) are offered, at most
``MAX_VALUES`` (the protocol's limit), with how many matched in all. An
argument the schema says nothing about, or a reference that is not a
served prompt, gets no values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp.types as types

    from .listings import Listing

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
