"""Chat history in a Prompty file: role lines a template writes, and thread inputs, as separate messages.

Prompty's own chat sample writes its history with a loop::

    {% for item in history %}
    {{item.role}}:
    {{item.content}}
    {% endfor %}

and Prompty 2 places a ``kind: thread`` input alone on a line
(``{{conversation}}``). Role markers are found in the author's source, before
rendering, so text from args can never open a message; these two are the
exceptions the author wrote. When the file is loaded, such a line becomes a
marker that carries a per-process secret (``mark``): rendered, a role line
reads ``\\x02SECRET:role:user\\x03``, which no arg can forge. After rendering,
``split`` cuts the text at the markers. A role line opens a ``user`` or
``assistant`` message; any other role it names (``system``) opens a ``user``
message, since a system message is the author's, never the data's; an
empty one stays text, as Prompty keeps a line that names no role. A
thread's items are ``{role, content}`` with the same two roles.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InterpolationError

DATA_ROLES = ("user", "assistant")
"""The roles a template-written line or a thread's item may open."""

_SECRET = secrets.token_hex(8)
ROLE_LINE = re.compile(r"^[ \t]*(\{\{-?[^{}]*?-?\}\})[ \t]*:[ \t]*$", re.MULTILINE)
"""A line whose role the template writes: ``{{item.role}}:`` alone on its line."""
_PLACED = re.compile(r"^[ \t]*\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}[ \t]*$", re.MULTILINE)
_MARKER = re.compile("\x02" + _SECRET + r":(role|thread):([^\x02\x03]*)\x03")
_ANY_MARKER = re.compile("\x02[0-9a-f]{16}:(?:role:(.*?)|thread:(.*?))\x03", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Piece:
    """One message cut from a rendered section: its role and its text."""

    role: str
    content: str


def mark(text: str, threads: Sequence[str]) -> tuple[str, list[str]]:
    """``text`` with template-written role lines and placed threads as markers; and the threads it places."""
    placed: list[str] = []

    def thread(match: re.Match[str]) -> str:
        if match.group(1) not in threads:
            return match.group(0)
        placed.append(match.group(1))
        return thread_marker(match.group(1))

    text = _PLACED.sub(thread, text)
    text = ROLE_LINE.sub(lambda m: f"\x02{_SECRET}:role:{m.group(1)}\x03", text)
    return text, placed


def thread_marker(name: str) -> str:
    """The marker that stands for the messages of thread input ``name``."""
    return f"\x02{_SECRET}:thread:{name}\x03"


def marked(text: str) -> bool:
    """True when ``text`` (rendered or not) holds a marker of this process."""
    return f"\x02{_SECRET}:" in text


def source_text(text: str) -> str:
    """A marked template as its author wrote it (for ``show`` and ``export``): markers back to their lines."""

    def back(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return f"{match.group(1)}:"
        return "{{" + str(match.group(2)) + "}}"

    return _ANY_MARKER.sub(back, text)


def split(role: str, text: str, args: Mapping[str, Any], where: Mapping[str, Any]) -> list[Piece]:
    """A rendered section of ``role`` cut at its markers into messages (empty ones left out).

    Raises:
        InterpolationError: a thread input that is not a list of ``{role: user|assistant, content}``.
    """
    pieces: list[Piece] = []
    current, parts = role, []
    position = 0
    for match in _MARKER.finditer(text):
        parts.append(text[position : match.start()])
        position = match.end()
        kind, value = match.group(1), match.group(2)
        if kind == "role" and not value.strip():
            parts.append(f"{value}:")  # names no role: text, as Prompty keeps it
            continue
        pieces.append(Piece(current, "".join(parts)))
        parts = []
        if kind == "role":
            wanted = value.strip().lower()
            current = wanted if wanted in DATA_ROLES else "user"  # data never opens a system message
            continue
        pieces.extend(thread_messages(value, args.get(value), where))
        current = role
    parts.append(text[position:])
    pieces.append(Piece(current, "".join(parts)))
    return [Piece(p.role, p.content.strip()) for p in pieces if p.content.strip()]


def thread_messages(name: str, value: Any, where: Mapping[str, Any]) -> list[Piece]:
    """The messages of thread input ``name`` (missing or empty: none).

    Raises:
        InterpolationError: not a list of ``{role: user|assistant, content: text}``.
    """
    if value is None or value == "":
        return []
    if not isinstance(value, list | tuple):
        raise InterpolationError(
            f"input {name!r} is a chat history: a list of {{role, content}}, not {type(value).__name__}",
            **{**where, "key": name},
        )
    pieces = []
    for index, item in enumerate(value):
        role = item.get("role", "user") if isinstance(item, Mapping) else None
        content = item.get("content") if isinstance(item, Mapping) else None
        if not isinstance(role, str) or role.lower() not in DATA_ROLES or not isinstance(content, str):
            raise InterpolationError(
                f"{name}[{index}] must be {{role: user|assistant, content: text}}, not {item!r:.80}",
                **{**where, "key": name},
            )
        pieces.append(Piece(role.lower(), content))
    return pieces
