"""The YAML mistakes people make most, named in plain words at the line to fix.

PyYAML reports where its parser gave up, which is often far from the
mistake: an unclosed quote is reported at the end of the frontmatter, a
missing space after a colon at the next line. ``explain`` looks at the text
around PyYAML's marks and, for the common cases (a tab, an unclosed quote or
bracket, ``key:value``, a value holding ``: ``, two values where one is
expected, a line indented unlike its siblings), says what is wrong and where.
It decides from the text and the marks' positions, never from PyYAML's
wording; anything else keeps PyYAML's own problem, with its context mark
when that points elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

_KEY_VALUE = re.compile(r"^\s*(?:-\s+)?([A-Za-z0-9_$.-]+):(?![\s:/])(\S.*)$")
_PLAIN_PAIR = re.compile(r"^\s*(?:-\s+)?([^\s:#'\"\[{][^:#]*):\s+([^\s'\"\[{|>&*!].*)$")


@dataclass(frozen=True, slots=True)
class Explanation:
    """What is wrong, and the line where it is."""

    message: str
    line: int


def explain(exc: yaml.YAMLError, text: str, first_line: int = 1) -> Explanation:
    """Say what ``exc`` found in ``text`` in plain words, at the line where the author has to look.

    ``first_line`` is the file's line number of the document's first line; the
    explanation's line is the file's too.
    """
    lines = text.split("\n")
    problem = getattr(exc, "problem_mark", None)
    context = getattr(exc, "context_mark", None)
    for rule in (_tab, _unclosed, _no_space, _colon_in_value, _two_values, _indent):
        found = rule(lines, problem, context)
        if found is not None:
            return Explanation(found.message, first_line + found.line)
    message = str(getattr(exc, "problem", None) or exc)
    if context is not None and problem is not None and context.line != problem.line:
        message += f" ({getattr(exc, 'context', None) or 'it began'} at line {first_line + context.line})"
    return Explanation(message, first_line + (problem.line if problem is not None else 0))


def _char(lines: list[str], mark: yaml.Mark | None) -> str:
    if mark is None or mark.line >= len(lines) or mark.column >= len(lines[mark.line]):
        return ""
    return lines[mark.line][mark.column]


def _tab(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    if problem is None or problem.line >= len(lines):
        return None
    line = lines[problem.line]
    if _char(lines, problem) == "\t" or "\t" in line[: len(line) - len(line.lstrip(" \t"))]:
        return Explanation(
            "a tab on this line: YAML indents with spaces only; replace the tab with spaces", problem.line
        )
    return None


def _unclosed(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    opened = _char(lines, context)
    if context is None or problem is None or opened not in ("'", '"', "[", "{") or problem.line == context.line:
        return None
    closer = {"[": "]", "{": "}"}.get(opened, opened)
    what = "quote" if opened in ("'", '"') else "bracket"
    return Explanation(
        f"the {what} {opened} opened here is never closed: add the closing {closer} on this line"
        + (" (or quote the whole value)" if what == "bracket" else ""),
        context.line,
    )


def _no_space(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    if problem is None:
        return None
    first = context.line if context is not None else max(0, problem.line - 5)
    for number in range(min(problem.line, len(lines) - 1), first - 1, -1):
        match = _KEY_VALUE.match(lines[number])
        if match is not None:
            key, value = match.groups()
            return Explanation(
                f"'{key}:{value}' needs a space after the colon to be a key and its value: '{key}: {value}'", number
            )
    return None


def _colon_in_value(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    if problem is None or _char(lines, problem) != ":":
        return None
    match = _PLAIN_PAIR.match(lines[problem.line])
    if match is None or problem.column <= match.start(2):
        return None
    key, value = match.groups()
    quote = '"' if "'" in value else "'"
    return Explanation(
        f"the value of '{key.strip()}' holds ': ', which YAML reads as another key; quote it: "
        f"{key.strip()}: {quote}{value}{quote}",
        problem.line,
    )


def _two_values(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    if problem is None or _char(lines, problem) not in ("[", "{", "'", '"'):
        return None
    before = lines[problem.line][: problem.column].rstrip()
    if not before.endswith(("]", "}", "'", '"')):
        return None
    return Explanation(
        "a second value follows a complete one on this line: join them into one list ([a, b]) or quote the whole value",
        problem.line,
    )


def _indent(lines: list[str], problem: yaml.Mark | None, context: yaml.Mark | None) -> Explanation | None:
    if problem is None or context is None or problem.line >= len(lines):
        return None
    line = lines[problem.line]
    indent = len(line) - len(line.lstrip(" "))
    if problem.column != indent:
        return None
    above = {len(row) - len(row.lstrip(" ")) for row in lines[context.line : problem.line] if row.strip()}
    if not above or indent in above:
        return None
    return Explanation(
        f"this line is indented {indent} space(s), unlike the lines above it ({', '.join(map(str, sorted(above)))}): "
        "align it with the key it belongs beside",
        problem.line,
    )
