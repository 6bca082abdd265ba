"""Where a Markdown body holds code: fenced blocks and inline code spans.

Hosts' prompt syntax (``@file``, ``${file}``) means something in the prose
only: ``@axe-core/puppeteer`` in an install command and ``${name}`` in a
JavaScript template literal are code. The adapters ask ``Code.covers`` before
they report such a token. ``shell_blocks`` finds Claude Code's `````! ...`````
blocks, which run their lines as commands.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
_INLINE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block: its start and end offsets in the body and its info string (``!``, ``js``)."""

    start: int
    end: int
    info: str


def fenced_blocks(body: str) -> list[Block]:
    """The fenced code blocks of ``body``, in order; an unclosed fence runs to the end."""
    blocks: list[Block] = []
    position = 0
    while (opening := _FENCE.search(body, position)) is not None:
        mark = opening.group(1)
        closing = re.compile(r"^[ ]{0,3}" + re.escape(mark[0]) + "{" + str(len(mark)) + r",}[ \t]*$", re.MULTILINE)
        found = closing.search(body, opening.end())
        end = found.end() if found is not None else len(body)
        blocks.append(Block(opening.start(), end, opening.group(2).strip()))
        position = end
    return blocks


class Code:
    """The code of a body (fenced blocks and inline spans), asked by offset."""

    def __init__(self, body: str) -> None:
        spans = [(block.start, block.end) for block in fenced_blocks(body)] if "```" in body or "~~~" in body else []
        if "`" in body:
            prose = _blank(body, spans)
            spans += [(match.start(), match.end()) for match in _INLINE.finditer(prose)]
        spans.sort()
        self.starts = [start for start, _end in spans]
        self.spans = spans

    def covers(self, offset: int) -> bool:
        """True when ``offset`` lies inside code."""
        index = bisect.bisect_right(self.starts, offset) - 1
        return index >= 0 and self.spans[index][0] <= offset < self.spans[index][1]


def _blank(body: str, spans: list[tuple[int, int]]) -> str:
    """``body`` with the given spans blanked out (offsets kept), so inline code is looked for in the prose only."""
    if not spans:
        return body
    pieces = []
    position = 0
    for start, end in spans:
        pieces.append(body[position:start])
        pieces.append(" " * (end - start))
        position = end
    pieces.append(body[position:])
    return "".join(pieces)


def shell_blocks(body: str) -> list[Block]:
    """Claude Code's fenced blocks whose info string is ``!``: their lines are commands it runs."""
    if "```!" not in body and "~~~!" not in body:
        return []
    return [block for block in fenced_blocks(body) if block.info == "!"]
