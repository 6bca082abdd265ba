"""A Prompty body split into role sections, each made our template, and placed as system, messages and prompt.

Role markers (``system:``, ``user:``, ``assistant:`` alone on a line) are
found in the author's source, before rendering, so text from args can never
open a new message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import Mapped, literal
from .adaptation import Adaptation
from .history import ROLE_LINE, mark, thread_marker
from .mustache import mustache_names
from .rendering import lenient

ROLES = ("system", "user", "assistant")
# Prompty roles with no place in our messages: a function result, the tool definitions of its agents.
UNSUPPORTED_ROLES = ("function", "tool", "tools")
# Role names of other chat APIs: a marker line with one of them is a mistake, not text.
FOREIGN_ROLES = ("developer", "human", "ai", "bot", "model")

_MARKER = re.compile(r"^[ \t]*(#?)[ \t]*([A-Za-z]+)[ \t]*(\[[^\]\n]*\])?[ \t]*:[ \t]*$")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)")
_THREAD = re.compile(r"^[ \t]*!\[thread\]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Section:
    """One role section of a Prompty body: its role, the file line of its first content line, its text."""

    role: str
    line: int
    text: str
    marker: str  # the marker line as written ("" for the leading section without one)


def split_sections(a: Adaptation, api: str) -> list[Section]:
    body = a.body
    if api == "completion" or not body:
        return [Section("user", a.body_line, body, "")]
    sections: list[Section] = []
    role, start, marker = "system", 0, ""
    lines = body.split("\n")
    for index, text in enumerate(lines):
        match = _MARKER.match(text)
        if match is None:
            continue
        word = match.group(2).lower()
        line = a.body_line + index
        if word not in ROLES:
            if word in UNSUPPORTED_ROLES:
                raise a.error(
                    f"role {word!r} is not supported: toolcascade messages are system, user and assistant "
                    "(offer tools through 'tools' metadata)",
                    "body",
                    line,
                )
            if not match.group(1) and (match.group(3) or word in FOREIGN_ROLES or _near_role(word)):
                raise a.error(
                    f"unknown role marker {text.strip()!r}; Prompty's roles are system:, user: and assistant:",
                    "body",
                    line,
                )
            continue  # "Example:" on its own line is text
        if match.group(3):
            a.mapping.append(Mapped(f"body: {text.strip()}", None, "marker attributes are dropped", False))
        content = "\n".join(lines[start:index])
        if content.strip() or sections or marker:
            sections.append(Section(role, a.body_line + start, content, marker))
        role, start, marker = word, index + 1, text.strip()
    sections.append(Section(role, a.body_line + start, "\n".join(lines[start:]), marker))
    for match in _THREAD.finditer(body):
        a.problems.append(
            (a.body_line + body.count("\n", 0, match.start()), "![thread] is not supported: it stays text")
        )
    for match in _IMAGE.finditer(body):
        a.problems.append(
            (
                a.body_line + body.count("\n", 0, match.start()),
                f"image {match.group(1)!r} is not inlined: it stays markdown text",
            )
        )
    return sections


def section_template(
    a: Adaptation, section: Section, declared: Mapping[str, Any], mustache: bool, used: set[str]
) -> str:
    """A section's text as our template (see the module docstring)."""
    import jinja2  # the sandbox and jinja2 load with the first Prompty file, not with every invoke
    import jinja2.meta

    from ..sandbox import ENVIRONMENT

    text = section.text.strip()
    if mustache:
        used.update(mustache_names(text, lambda m: a.error(m, "body", section.line)))
        return literal(text)
    try:
        tree = ENVIRONMENT.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise a.error(
            f"template syntax error: {exc.message}"
            + (
                " (a {% for %} or {% if %} cannot span role markers: roles are split before rendering)"
                if "end of template" in str(exc.message)
                else ""
            ),
            "body",
            section.line + (exc.lineno or 1) - 1 + _leading_lines(section.text),
        ) from exc
    names = sorted(jinja2.meta.find_undeclared_variables(tree) - set(ENVIRONMENT.globals) - {"args"})
    used.update(names)
    binds = []
    for name in names:
        fallback = declared.get(name)
        binds.append(f"{{% set {name} = args[{name!r}] if {name!r} in args else {_jinja_literal(fallback)} %}}")
    # Role lines the template writes and placed threads become messages (orchestrator.formats.history);
    # chains read leniently, as Prompty renders them (orchestrator.formats.rendering).
    first = section.line + _leading_lines(section.text)
    for match in ROLE_LINE.finditer(text):
        line = first + text.count("\n", 0, match.start())
        note = "a role line the template writes: each one opens a user or assistant message"
        a.mapping.append(Mapped(f"body: {match.group(0).strip()} (line {line})", "messages", note))
    text, placed = mark(text, a.threads)
    a.placed.update(placed)
    return "".join(binds) + lenient(text)


def place_sections(a: Adaptation, api: str, sections: list[Section], rendered: list[str], mustache: bool) -> None:
    a.prompt = ""
    if api == "completion":
        a.prompt = rendered[0]
        a.mapping.append(Mapped("body", "prompt", "the whole body (completion)"))
        return
    pairs = list(zip(sections, rendered, strict=True))
    placed: list[tuple[Section, str, str]] = []  # (section, its template, where it goes)
    if pairs and pairs[0][0].role == "system":
        first = pairs.pop(0)
        if first[0].text.strip():
            placed.append((first[0], first[1], "system"))
    last = pairs.pop() if pairs and pairs[-1][0].role == "user" else None
    unplaced = [name for name in a.threads if name not in a.placed and name not in a.read]
    if unplaced and not mustache:
        # A thread the template never places goes right before the prompt (Prompty puts it last).
        markers = "".join(thread_marker(name) + "\n" for name in unplaced)
        if last is not None:
            last = (last[0], markers + last[1])
        else:
            pairs.append((Section("user", a.body_line, "", ""), markers))
        for name in unplaced:
            a.mapping.append(Mapped(f"inputs.{name}", "messages", "a thread: its messages go before the prompt"))
    placed += [(section, text, "messages") for section, text in pairs]
    if last is not None:
        placed.append((last[0], last[1], "prompt"))
    else:
        where = pairs[-1][0].line if pairs else a.body_line
        a.problems.append(
            (where, "the body does not end with a user: section; the prompt (the last user message) is empty")
        )
    messages = []
    for section, text, target in placed:
        if section.marker:
            source = f"body: {section.marker} (line {section.line - 1})"
        else:
            source = f"body: text before any role marker (line {section.line})"
        if target == "system":
            a.metadata["system"] = text
            a.mapping.append(Mapped(source, "system", "the system message"))
        elif target == "messages":
            messages.append({"role": section.role, "content": text})
            a.mapping.append(Mapped(source, "messages", "a message before the prompt"))
        else:
            a.prompt = text
            a.mapping.append(Mapped(source, "prompt", "the last user message"))
    if messages:
        a.metadata["messages"] = messages


def _near_role(word: str) -> bool:
    from ..check import one_edit_apart  # only for a marker-shaped line naming no role

    # A plural ("Users:") is a heading in the text; a misspelt role ("sytem:") is a mistake.
    return any(one_edit_apart(word, role) and word != role + "s" for role in (*ROLES, *UNSUPPORTED_ROLES))


def _leading_lines(text: str) -> int:
    """Blank lines a section's text starts with (its template is stripped)."""
    return len(text) - len(text.lstrip("\n")) if text.strip() else 0


def _jinja_literal(value: Any) -> str:
    """``value`` (YAML data) as a jinja2 literal expression."""
    if value is None:
        return "''"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_jinja_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{str(k)!r}: {_jinja_literal(v)}" for k, v in value.items()) + "}"
    return repr(str(value))
