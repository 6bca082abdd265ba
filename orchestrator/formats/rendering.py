"""Prompty's lenient rendering, within our strict sandbox: a missing attribute or key renders empty.

Prompty renders with jinja2's default ``Undefined``: ``{{ item.nickname }}``
on an item without one prints nothing, ``{% if item.nickname %}`` is false
and a loop over it runs no time. Our sandbox is strict (``StrictUndefined``)
for every tool, and it stays so; a Prompty file's sections are rewritten
instead, once, when the file is loaded: every attribute or subscript chain
(``item.nickname``, ``user['profile'].city``) reads as ``(chain |
default(''))``. What stays an error is what is one in Prompty too: an
attribute of something missing (``missing.attr``, ``item.nickname.first``
when ``nickname`` is missing).

Left as written: chains the author tests (``x.y is defined``), gives a
default (``x.y | default('-')``) or calls (``x.items()``), and the targets
of ``set`` and ``for``. Only ``{{ }}`` and the expressions of ``if``,
``elif``, ``for ... in`` and ``set ... =`` are rewritten.
"""

from __future__ import annotations

from typing import Any

NOTE = (
    "rendered leniently, as Prompty does: a missing attribute or key renders empty and input types are "
    "described, not enforced (our own .md tools stay strict)"
)
"""What ``show`` and ``check`` say about every Prompty file (``leniency_note``)."""

_KEYWORDS = frozenset(
    ("in", "is", "and", "or", "not", "if", "else", "true", "false", "none", "True", "False", "None", "recursive")
)
_REWRITTEN = {"if": None, "elif": None, "for": "in", "set": "="}  # statement -> the token after which to rewrite

Token = tuple[int, str, str]


def lenient(source: str) -> str:
    """``source`` (a jinja2 template that parses) with every attribute or subscript chain made lenient."""
    if "{{" not in source and "{%" not in source:
        return source
    from ..sandbox import ENVIRONMENT

    tokens: list[Token] = list(ENVIRONMENT.lexer.tokeniter(source, None))
    out: list[str] = []
    index = 0
    while index < len(tokens):
        kind, value = tokens[index][1], tokens[index][2]
        if kind not in ("variable_begin", "block_begin"):
            out.append(value)
            index += 1
            continue
        end = "variable_end" if kind == "variable_begin" else "block_end"
        close = index + 1
        while close < len(tokens) and tokens[close][1] != end:
            close += 1
        inner = tokens[index + 1 : close]
        out.append(value)
        out.append(_statement(inner) if kind == "block_begin" else _expression(inner))
        if close < len(tokens):
            out.append(tokens[close][2])
        index = close + 1
    return "".join(out)


def _statement(tokens: list[Token]) -> str:
    """A block's tokens, its expression part rewritten for ``if``, ``elif``, ``for ... in`` and ``set ... =``."""
    words = [i for i, token in enumerate(tokens) if token[1] != "whitespace"]
    if not words or tokens[words[0]][1] != "name" or tokens[words[0]][2] not in _REWRITTEN:
        return "".join(token[2] for token in tokens)
    after = _REWRITTEN[tokens[words[0]][2]]
    start = words[0] + 1
    if after is not None:
        found = next((i for i in words[1:] if tokens[i][2] == after), None)
        if found is None:
            return "".join(token[2] for token in tokens)  # a block ``set``: nothing to rewrite
        start = found + 1
    return "".join(token[2] for token in tokens[:start]) + _expression(tokens[start:])


def _expression(tokens: list[Token]) -> str:
    out: list[str] = []
    index = 0
    previous = ""
    while index < len(tokens):
        kind, value = tokens[index][1], tokens[index][2]
        starts = kind == "name" and value not in _KEYWORDS and previous not in (".", "|")
        end = _chain_end(tokens, index) if starts else index + 1
        if end == index + 1:
            out.append(value)
            if kind != "whitespace":
                previous = value
            index += 1
            continue
        chain = value + _segments(tokens[index + 1 : end])
        following = _next_words(tokens, end)
        if following[:1] in (["("], ["is"]) or following[:2] in (["|", "default"], ["|", "d"]):
            out.append(chain)
        else:
            out.append(f"({chain}|default(''))")
        previous = "]"
        index = end
    return "".join(out)


def _chain_end(tokens: list[Token], start: int) -> int:
    """The index just past the ``.name`` and ``[...]`` segments following the name at ``start``."""
    index = start + 1
    while index < len(tokens):
        value = tokens[index][2]
        if value == "." and index + 1 < len(tokens) and tokens[index + 1][1] == "name":
            index += 2
        elif value == "[" and tokens[index][1] == "operator":
            depth = 0
            while index < len(tokens):
                depth += {"[": 1, "]": -1}.get(tokens[index][2], 0) if tokens[index][1] == "operator" else 0
                index += 1
                if depth == 0:
                    break
        else:
            break
    return index


def _segments(tokens: list[Token]) -> str:
    """A chain's segments, the expressions inside its subscripts made lenient too."""
    out: list[str] = []
    index = 0
    while index < len(tokens):
        value = tokens[index][2]
        if value == "[" and tokens[index][1] == "operator":
            depth, close = 0, index
            for close in range(index, len(tokens)):
                if tokens[close][1] == "operator":
                    depth += {"[": 1, "]": -1}.get(tokens[close][2], 0)
                if depth == 0:
                    break
            out.append("[" + _expression(tokens[index + 1 : close]) + "]")
            index = close + 1
        else:
            out.append(value)
            index += 1
    return "".join(out)


def _next_words(tokens: list[Token], start: int) -> list[str]:
    return [token[2] for token in tokens[start:] if token[1] != "whitespace"][:2]


def leniency_note(metadata: Any) -> str | None:
    """The leniency note for a tool whose metadata came from the Prompty adapter, else None."""
    fields = metadata.get("prompty") if hasattr(metadata, "get") else None
    return NOTE if fields is not None else None
