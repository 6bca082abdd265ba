"""Frontmatter read the way its host reads it, when strict YAML refuses it.

Claude Code and VS Code load prompt files whose frontmatter is not valid
YAML: Anthropic's own plugin agents hold ``description:`` lines with ``: ``
and ``<example>`` blocks, and commands say ``argument-hint: [pr-number]
[priority]``. Claude Code logs a warning and loads such a file with no
frontmatter at all; toolcascade does better and reads it as a person does.

``Leniency.recover`` is called only after strict parsing failed (so a valid
file costs nothing more). The block is cut into top-level keys: a line at
column 0 that reads ``key: rest`` opens a key, every other line (indented,
blank, or inside an ``<example>`` tag still open) continues the one before.
Each key is then parsed as YAML on its own; a key that still fails is taken
as the text written when the host documents it as text (``text_keys``) or
when it fits on its line and does not open a ``[`` or ``{``. Any other key
that fails (``tools: [Read``) is the file's error, at its own line.

Each key taken as text is a warning (``problems``) naming its line and how to
make the file strict YAML; ``check`` and ``show`` report it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ToolDefinitionError
from ..limits import DEFAULT_LIMITS, Limits

_KEY = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")
_OPEN_TAG = re.compile(r"<([A-Za-z][\w-]*)(?:\s[^<>]*)?(?<!/)>")
_CLOSE_TAG = re.compile(r"</([A-Za-z][\w-]*)\s*>")
_BLOCK_INDICATOR = re.compile(r"^[|>][+-]?\d?$")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One top-level key of a frontmatter block: its key, the index of its first line, and its lines."""

    key: str
    start: int
    lines: tuple[str, ...]

    @property
    def rest(self) -> str:
        """The text after ``key:`` on the key's own line."""
        match = _KEY.match(self.lines[0])
        return (match.group(2) or "").strip() if match else ""

    def text(self) -> str:
        """The value as written: the rest of the key's line and every line after it, dedented, without indicators."""
        first = self.rest
        if _BLOCK_INDICATOR.match(first):
            first = ""
        rest = self.lines[1:]
        # Indented as a person indents a value under its key: the first line's indent goes from every line.
        lead = next((len(line) - len(line.lstrip(" ")) for line in rest if line.strip()), 0)
        more = "\n".join(line[min(lead, len(line) - len(line.lstrip(" "))) :] for line in rest)
        return "\n".join(part for part in (first, more.strip("\n")) if part).strip()


def chunks(block: str) -> list[Chunk]:
    """The top-level keys of a frontmatter ``block``, each with the lines of its value.

    Lines before the first key (comments, blank lines) belong to no key; a
    line that is neither is kept as a chunk with an empty key (unreadable).
    """
    found: list[Chunk] = []
    key, start, lines = "", 0, list[str]()
    open_tags = 0
    for index, line in enumerate(block.split("\n")):
        match = _KEY.match(line)
        if match is not None and open_tags <= 0:
            if key or any(item.strip() and not item.lstrip().startswith("#") for item in lines):
                found.append(Chunk(key, start, tuple(lines)))
            key, start, lines, open_tags = match.group(1), index, [line], 0
        else:
            lines.append(line)
        open_tags += len(_OPEN_TAG.findall(line)) - len(_CLOSE_TAG.findall(line))
    if key or any(item.strip() and not item.lstrip().startswith("#") for item in lines):
        found.append(Chunk(key, start, tuple(lines)))
    return found


def value_text(text: str, line: int, key: str) -> str | None:
    """The value of top-level ``key`` as written, when its ``key:`` stands at 1-based ``line`` of ``text``."""
    lines = text.split("\n")
    if not 0 < line <= len(lines) or not lines[line - 1].startswith(key):
        return None
    end = line
    while end < len(lines) and not lines[end].startswith("---") and not _KEY.match(lines[end]):
        end += 1
    return Chunk(key, line - 1, tuple(lines[line - 1 : end])).text()


def is_syntax_error(exc: ToolDefinitionError) -> bool:
    """True when ``exc`` is strict YAML refusing the text (not a limit, a shape or a read failure)."""
    import yaml

    return isinstance(exc.__cause__, yaml.YAMLError)


@dataclass(frozen=True)
class Leniency:
    """How a host reads frontmatter that is not valid YAML: its name and the fields it documents as text."""

    host: str
    text_keys: frozenset[str]

    def recover(
        self, block: str, path: Path, first_line: int, limits: Limits = DEFAULT_LIMITS
    ) -> tuple[dict[str, Any], dict[str, int], tuple[tuple[int | None, str], ...]]:
        """The frontmatter read key by key (see the module docstring), its key lines and a warning per key read as text.

        Raises:
            ToolDefinitionError: a key that is not text fails to parse, or a line belongs to no key.
        """
        from ..documents import parse_yaml

        data: dict[str, Any] = {}
        lines: dict[str, int] = {}
        problems: list[tuple[int | None, str]] = []
        for chunk in chunks(block):
            line = first_line + chunk.start
            if not chunk.key:
                stray = next(
                    i for i, text in enumerate(chunk.lines) if text.strip() and not text.lstrip().startswith("#")
                )
                line += stray
                raise ToolDefinitionError(
                    f"frontmatter line {chunk.lines[stray].strip()[:60]!r} is neither 'key: value' nor part of a value; "
                    "indent it under its key or remove it",
                    path=path,
                    line=line,
                )
            source = "\n".join(chunk.lines)
            try:
                parsed, _node = parse_yaml(source, path, line, limits)
            except ToolDefinitionError as exc:
                if not is_syntax_error(exc) or not self._text(chunk):
                    raise ToolDefinitionError(f"{exc.detail} (key {chunk.key!r})", path=path, line=exc.line) from exc
                data[chunk.key] = chunk.text()
                lines[chunk.key] = line
                problems.append((line, self.warning(chunk.key)))
                continue
            value = parsed.get(chunk.key) if isinstance(parsed, dict) else None
            data[chunk.key] = value
            lines[chunk.key] = line
        return data, lines, tuple(problems)

    def _text(self, chunk: Chunk) -> bool:
        """True when a key that strict YAML refuses is read as the text written."""
        if chunk.key in self.text_keys:
            return True
        return len([line for line in chunk.lines if line.strip()]) == 1 and not chunk.rest.startswith(("[", "{"))

    def warning(self, key: str) -> str:
        """What ``check`` and ``show`` say about a key read as text."""
        return (
            f"frontmatter is not valid YAML at {key!r}: read as the text written, as {self.host} reads it; "
            f"quote the value (or indent it as a block: '{key}: |') to make the file strict YAML"
        )
