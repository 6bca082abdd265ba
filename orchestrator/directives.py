"""Find generic directives (``:text``, ``::leaf``, ``:::container``) in markdown.

R-DIR-1: prompts call tools through remark-style directives. This module finds
them, with exact offsets into the source so the ``directives`` middleware can
replace their text; markdown-it-py decides what is code, so directives in code
spans, fences and indented blocks are never seen. Decisions (each tested):

- A ``:`` after a word character or a ``:`` never starts a text directive
  (``10:30``, ``std::vector``, ``http://x``, ``foo:smile:``).
- A bare attribute (``{compact}``) is the flag ``True``, other values stay
  strings; ``#a`` is ``id``; ``.a .b`` and ``class=`` join as ``"a b"``. A
  malformed attribute block is not part of the directive: a text directive
  ends before its ``{``; a leaf or container line is then no directive.
- Template text in a value must be quoted (``{city="{{ args.city }}"}``);
  ``{{`` after a name is never an attribute block, and text in ``{{ }}``,
  ``{% %}`` and ``{# #}`` is never a directive (R-DIR-2).
- A container closes at the first line at its indentation holding only colons,
  at least as many as its opening fence (nest with more colons outside).
  Unclosed, it runs to the end of its enclosing block, like a code fence, and
  stops at its last non-blank line. ``content`` is the raw source between the
  fence lines, line prefixes (``>``, list indentation) included.
- Raw HTML is plain text, so directives between XML-like prompt tags are found.
  Directives in image alt text are ignored.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # markdown-it is imported by the first parse (``_parser``), not with the module
    from markdown_it import MarkdownIt
    from markdown_it.ruler import RuleOptionsType
    from markdown_it.rules_block import StateBlock
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

__all__ = ["Directive", "directive_plugin", "find_directives"]

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_WORD_RE = re.compile(r"\w")
_KEY_RE = re.compile(r"[A-Za-z_:][A-Za-z0-9_.:-]*")
_SHORTCUT_RE = re.compile(r"[^\s\"'`<=>{}#.]+")
_UNQUOTED_RE = re.compile(r"[^\s\"'`{}]+")
_SPACE_RE = re.compile(r"\s*")
_COLONS_RE = re.compile(r":*")
_BLANK_RE = re.compile(r"[ \t]*")
_TEMPLATE_CLOSERS = {"{": "}}", "%": "%}", "#": "#}"}
_CELL_OPENERS = frozenset({"th_open", "td_open"})
_BLOCK_KINDS = {"directive_leaf": "leaf", "directive_container": "container"}


@dataclass(frozen=True, slots=True)
class Directive:
    """One directive found in a markdown source, and where its text sits.

    ``kind`` is ``'text'``, ``'leaf'`` or ``'container'``; ``label`` is the
    text inside ``[...]`` (None when absent); ``content`` is a container's
    raw source between its fence lines (None for the other kinds).
    ``source[start:end]`` is exactly the directive's text (for a container,
    through its closing fence line without the newline); ``line`` is 1-based.

    Results are cached and shared, so ``attributes`` is a read-only
    ``types.MappingProxyType``; ``dict(d.attributes)`` gives a plain dict.
    """

    kind: str
    name: str
    label: str | None
    attributes: Mapping[str, str | bool] = field(hash=False)
    content: str | None
    start: int
    end: int
    line: int


@dataclass(frozen=True, slots=True)
class _Head:
    """What follows a directive's colons: ``name[label]{attributes}``."""

    name: str
    label: str | None
    attributes: dict[str, str | bool]
    end: int


def _parse_head(src: str, pos: int, end: int) -> _Head | None:
    """Parse a directive head at ``src[pos:end]``; None when no name starts there."""
    match = _NAME_RE.match(src, pos, end)
    # "café" must not yield the name "caf"
    if match is None or _WORD_RE.match(src, match.end(), end):
        return None
    pos = match.end()
    label = None
    if src.startswith("[", pos, end):
        close = _label_end(src, pos + 1, end)
        if close is not None:
            label, pos = src[pos + 1 : close], close + 1
    attributes: dict[str, str | bool] = {}
    # "{{" (jinja2) never parses as attributes: no key starts with "{"
    if src.startswith("{", pos, end):
        parsed = _parse_attributes(src, pos + 1, end)
        if parsed is not None:
            attributes, pos = parsed
    return _Head(match.group(), label, attributes, pos)


def _label_end(src: str, pos: int, end: int) -> int | None:
    """Index of the ``]`` closing a label whose text starts at ``pos``."""
    depth = 0
    while pos < end:
        char = src[pos]
        if char == "]" and depth == 0:
            return pos
        depth += {"[": 1, "]": -1}.get(char, 0)
        pos += 2 if char == "\\" else 1
    return None


def _parse_attributes(src: str, pos: int, end: int) -> tuple[dict[str, str | bool], int] | None:
    """Parse the attributes after a ``{`` through its ``}``; None when malformed."""
    attributes: dict[str, str | bool] = {}
    classes: list[str] = []
    while (pos := _skip_space(src, pos, end)) < end:
        char = src[pos]
        if char == "}":
            return attributes, pos + 1
        if char in "#.":
            match = _SHORTCUT_RE.match(src, pos + 1, end)
            if match is None:
                return None
            key = "id" if char == "#" else "class"
            value, pos = match.group(), match.end()
        else:
            match = _KEY_RE.match(src, pos, end)
            if match is None:
                return None
            key, pos = match.group(), match.end()
            equals = _skip_space(src, pos, end)
            if not src.startswith("=", equals, end):
                attributes[key] = True
                continue
            parsed = _parse_value(src, _skip_space(src, equals + 1, end), end)
            if parsed is None:
                return None
            value, pos = parsed
        if key == "class":
            classes.extend(value.split())
            value = " ".join(classes)
        attributes[key] = value
    return None


def _parse_value(src: str, pos: int, end: int) -> tuple[str, int] | None:
    """Parse a quoted or unquoted attribute value; None when there is none."""
    if src.startswith(('"', "'"), pos, end):
        close = src.find(src[pos], pos + 1, end)
        return None if close < 0 else (src[pos + 1 : close], close + 1)
    match = _UNQUOTED_RE.match(src, pos, end)
    return None if match is None else (match.group(), match.end())


def _skip_space(src: str, pos: int, end: int) -> int:
    match = _SPACE_RE.match(src, pos, end)
    return end if match is None else match.end()


def _text_rule(state: StateInline, silent: bool) -> bool:
    """Inline rule: a text directive ``:name[label]{attributes}``."""
    src, pos = state.src, state.pos
    if src[pos] != ":":
        return False
    if pos > 0 and (src[pos - 1] == ":" or _WORD_RE.match(src, pos - 1)):
        return False
    head = _parse_head(src, pos + 1, state.posMax)
    if head is None:
        return False
    if not silent:
        token = state.push("directive_text", "", 0)
        token.content = src[pos : head.end]
        token.meta = {"head": head, "start": pos, "end": head.end}
    state.pos = head.end
    return True


def _template_rule(state: StateInline, silent: bool) -> bool:
    """Inline rule: jinja2 ``{{ }}``, ``{% %}`` and ``{# #}`` stay plain text."""
    src, pos = state.src, state.pos
    closer = _TEMPLATE_CLOSERS.get(src[pos + 1 : pos + 2]) if src[pos] == "{" else None
    close = -1 if closer is None else src.find(closer, pos + 2, state.posMax)
    if close < 0:
        return False
    if not silent:
        state.pending += src[pos : close + 2]
    state.pos = close + 2
    return True


def _fence(state: StateBlock, line: int) -> tuple[int, int, int]:
    """Start and end of ``line``'s content and how many colons open it."""
    start, end = state.bMarks[line] + state.tShift[line], state.eMarks[line]
    colons = _COLONS_RE.match(state.src, start, end)
    return start, end, 0 if colons is None else colons.end() - start


def _block_head(state: StateBlock, line: int, kind: str) -> tuple[int, int, _Head] | None:
    """Start, colon count and head of a leaf or container line, if it is one."""
    if state.is_code_block(line):
        return None
    start, end, colons = _fence(state, line)
    if (colons != 2) if kind == "leaf" else (colons < 3):
        return None
    head = _parse_head(state.src, start + colons, end)
    if head is None or not _BLANK_RE.fullmatch(state.src, head.end, end):
        return None
    return start, colons, head


def _leaf_rule(state: StateBlock, startLine: int, endLine: int, silent: bool) -> bool:
    """Block rule: a leaf directive ``::name[label]{attributes}`` alone on a line."""
    found = _block_head(state, startLine, "leaf")
    if found is None or silent:
        return found is not None
    start, _, head = found
    token = state.push("directive_leaf", "", 0)
    token.map = [startLine, startLine + 1]
    token.content = state.src[start : head.end]
    token.meta = {"head": head, "start": start, "end": head.end}
    state.line = startLine + 1
    return True


def _container_rule(state: StateBlock, startLine: int, endLine: int, silent: bool) -> bool:
    """Block rule: a container ``:::name`` ... ``:::``; its inside is not parsed."""
    found = _block_head(state, startLine, "container")
    if found is None or silent:
        return found is not None
    start, colons, head = found
    line = last = startLine
    closed = False
    while not closed and (line := line + 1) < endLine:
        begin, stop, count = _fence(state, line)
        if begin == stop:
            continue
        # a less indented line ends the list item the container sits in
        if state.sCount[line] < state.blkIndent:
            break
        closed = (
            count >= colons
            and not state.is_code_block(line)
            and _BLANK_RE.fullmatch(state.src, begin + count, stop) is not None
        )
        last = line
    content_start = state.eMarks[startLine] + 1
    if closed:
        end, content_end = state.eMarks[line], state.eMarks[line - 1]
        line += 1
    else:
        end = content_end = state.eMarks[last]
    state.line = line
    token = state.push("directive_container", "", 0)
    token.map = [startLine, line]
    token.content = state.src[start:end]
    token.meta = {"head": head, "start": start, "end": end}
    token.meta["content"] = (content_start, content_end)  # empty when reversed
    return True


def _render_source(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """Render a directive as its own source text."""
    from markdown_it.common.utils import escapeHtml

    return escapeHtml(tokens[idx].content) + ("\n" if tokens[idx].block else "")


def directive_plugin(md: MarkdownIt) -> None:
    """Teach ``md`` the three directive forms, and to keep jinja2 tags as text.

    Tokens are ``directive_text`` (inline), ``directive_leaf`` and
    ``directive_container`` (block); ``token.meta["head"]`` holds the parsed
    name, label and attributes. A container's inside is not parsed. HTML
    output shows each directive as its source text.
    """
    # like fences, leaves and containers may interrupt a paragraph
    alt: RuleOptionsType = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before("fence", "directive_container", _container_rule, alt)
    md.block.ruler.before("fence", "directive_leaf", _leaf_rule, alt)
    md.inline.ruler.before("link", "directive_text", _text_rule)
    md.inline.ruler.before("link", "directive_template", _template_rule)
    for name in ("directive_text", *_BLOCK_KINDS):
        md.add_render_rule(name, _render_source)


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    """The shared parser, made on the first parse: most runs have no prompt to parse."""
    from markdown_it import MarkdownIt

    # HTML off: prompts use XML-like tags, which must not hide directives in them.
    return MarkdownIt("commonmark", {"html": False}).enable("table").use(directive_plugin)


@dataclass(frozen=True, slots=True)
class _Source:
    """The caller's source next to markdown-it's normalized copy of it."""

    original: str
    text: str
    line_starts: list[int]
    crlf: list[int]  # normalized offsets of newlines that were "\r\n"

    @classmethod
    def of(cls, original: str) -> _Source:
        # as markdown-it's normalize rule; only "\r\n" -> "\n" changes lengths
        text = re.sub(r"\r\n?", "\n", original).replace("\0", "\ufffd")
        starts = [0] + [match.end() for match in re.finditer("\n", text)]
        crlf = [m.start() - i for i, m in enumerate(re.finditer("\r\n", original))]
        return cls(original, text, starts, crlf)

    def offset(self, pos: int) -> int:
        """Offset in the caller's source of normalized offset ``pos``."""
        return pos + bisect.bisect_left(self.crlf, pos)

    def line(self, pos: int) -> int:
        """1-based line of normalized offset ``pos``."""
        return bisect.bisect_right(self.line_starts, pos)

    def span(self, line: int) -> tuple[int, int]:
        """Normalized start and end (its newline) of 0-based ``line``."""
        start = self.line_starts[line]
        end = self.text.find("\n", start)
        return start, len(self.text) if end < 0 else end


def _locate(src: _Source, content: str, first_line: int, cursors: dict[int, int], cell: bool) -> list[int] | None:
    """Normalized source offset of every character of an inline token's content.

    markdown-it joins a block's lines with their prefixes (``>``, indentation,
    table pipes) cut off, but each content line is still a run of its own
    source line: the last match there for paragraphs and headings (their text
    ends the line, bar a closing ``#``), the first match after the previous
    cell for table cells, or the characters one by one when a cell's ``\\|``
    lost its backslash.
    """
    positions: list[int] = []
    for number, part in enumerate(content.split("\n"), start=first_line):
        if number >= len(src.line_starts):
            return None
        low, high = src.span(number)
        needle = part.strip()
        if cell:
            low = max(low, cursors.get(number, low))
            at = src.text.find(needle, low, high)
        else:
            at = src.text.rfind(needle, low, high)
        chars = list(range(at, at + len(needle))) if at >= 0 else []
        for char in needle if at < 0 else "":
            low = src.text.find(char, low, high)
            if low < 0:
                return None
            chars.append(low)
            low += 1
        tail = chars[-1] + 1 if chars else max(at, low)
        lead = len(part) - len(part.lstrip())
        # padding maps only white space, never a directive's first or last char
        positions += [chars[0] if chars else tail] * lead + chars
        positions += [tail] * (len(part) - lead - len(needle)) + [high]
        cursors[number] = tail
    return positions


def _directive(src: _Source, kind: str, meta: dict[Any, Any], start: int, end: int) -> Directive:
    """Build a Directive from a token's meta and its normalized offsets."""
    head: _Head = meta["head"]
    content = None
    if "content" in meta:
        first, last = meta["content"]
        content = src.original[src.offset(first) : src.offset(last)]
    attributes = MappingProxyType(head.attributes)
    offsets = src.offset(start), src.offset(end), src.line(start)
    return Directive(kind, head.name, head.label, attributes, content, *offsets)


def _inline_directives(src: _Source, token: Token, cursors: dict[int, int], cell: bool) -> list[Directive]:
    """The text directives among an inline token's children, placed in the source."""
    texts = [child for child in token.children or () if child.type == "directive_text"]
    if (not texts and not cell) or token.map is None:
        return []
    positions = _locate(src, token.content, token.map[0], cursors, cell)
    if positions is None:
        return []
    found: list[Directive] = []
    for child in texts:
        start = positions[child.meta["start"]]
        end = positions[child.meta["end"] - 1] + 1
        if src.text[start] == ":":  # never hand out offsets we could not pin down
            found.append(_directive(src, "text", child.meta, start, end))
    return found


@functools.lru_cache(maxsize=512)
def _find_directives(source: str) -> tuple[Directive, ...]:
    src = _Source.of(source)
    found: list[Directive] = []
    cursors: dict[int, int] = {}  # per line: where its last table cell was found
    tokens = _parser().parse(source)
    for index, token in enumerate(tokens):
        meta = token.meta
        if token.type in _BLOCK_KINDS:
            kind = _BLOCK_KINDS[token.type]
            found.append(_directive(src, kind, meta, meta["start"], meta["end"]))
        elif token.type == "inline":
            cell = tokens[index - 1].type in _CELL_OPENERS
            found += _inline_directives(src, token, cursors, cell)
    return tuple(sorted(found, key=lambda directive: directive.start))


def find_directives(source: str) -> tuple[Directive, ...]:
    """Every directive in ``source``, in document order (by start offset).

    Only outermost directives are returned: those inside a container are part
    of its ``content``, and text directives in a leaf's label are part of the
    label. Results are cached per source string, so the same source gives the
    identical tuple; treat it, and each ``attributes``, as read-only.
    """
    return _find_directives(source)
