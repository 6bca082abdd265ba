"""Mustache templates of Prompty files: the names they read, rendered by chevron (the ``mustache`` extra).

chevron is imported only to render; partials are refused, since they would read files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError, InterpolationError

MAX_DEPTH = 100
"""Sections and lists a mustache template may nest (chevron renders nesting by recursion)."""

_MUSTACHE_TAG = re.compile(r"\{\{(\{?)\s*([#^/>&!=]?)\s*(.*?)\s*\}?\}\}", re.DOTALL)


def mustache_names(text: str, error: Any) -> set[str]:
    """The top-level names a mustache template reads; refuses partials and nesting past ``MAX_DEPTH``.

    A plain scan of the tags (chevron is imported only to render): a
    template that changes its delimiters (``{{=<% %>=}}``) is not scanned.

    Raises:
        ToolDefinitionError: a partial (``{{> name}}`` would read a file), too deep, or unbalanced sections.
    """
    names: set[str] = set()
    open_sections: list[str] = []
    for match in _MUSTACHE_TAG.finditer(text):
        sigil, key = match.group(2), match.group(3)
        if sigil == "=":
            return names
        if sigil == ">":
            raise error(f"mustache partial {{{{> {key}}}}} is not supported: it would read a file")
        if sigil in ("#", "^"):
            if not open_sections:
                names.add(key.split(".")[0])
            open_sections.append(key)
            if len(open_sections) > MAX_DEPTH:
                raise error(f"mustache sections nest more than {MAX_DEPTH} deep; flatten the template")
        elif sigil == "/":
            if not open_sections or open_sections.pop() != key:
                raise error(f"mustache section end {{{{/{key}}}}} closes no open {{{{#{key}}}}}")
        elif sigil in ("", "&") and not open_sections and key != ".":
            names.add(key.split(".")[0])
    if open_sections:
        raise error(f"mustache section {{{{#{open_sections[-1]}}}}} is never closed")
    return names


MISSING = "mustache templates need chevron: pip install 'toolcascade[mustache]' (or pip install chevron)"


def _plain(value: Any) -> Any:
    """Frozen metadata or args as plain dicts and lists, as chevron reads them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render_mustache(source: str, args: Mapping[str, Any], limit: int, **where: Any) -> str:
    """Render a mustache template with ``args`` as its data (partials are never read).

    Raises:
        ConfigurationError: chevron is not installed.
        InterpolationError: a syntax error, or output past ``limit`` characters.
    """
    try:
        import chevron
    except ImportError as exc:
        raise ConfigurationError(MISSING, **where) from exc
    try:
        for kind, key in chevron.tokenizer.tokenize(source):  # a partial would read a file: never
            if kind == "partial":
                raise InterpolationError(f"mustache partial {{{{> {key}}}}} is refused: it would read a file", **where)
        text = chevron.render(source, _plain(args), partials_dict={}, partials_path="", warn=False)
    except chevron.tokenizer.ChevronError as exc:
        raise InterpolationError(f"mustache syntax error: {exc}", **where) from exc
    except RecursionError as exc:
        raise InterpolationError("mustache template nests too deep", **where) from exc
    if len(text) > limit:
        raise InterpolationError(f"mustache output is longer than {limit} characters (Limits.render_output)", **where)
    return text
