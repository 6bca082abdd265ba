"""The shared part of every format adapter: the records an adapter returns and the field helpers.

A leaf below ``orchestrator.formats`` (which re-exports every name here):
the adapters (``claude``, ``prompty``, ``copilot``) import what they share
from here, and the package imports the adapters on first use, so there is
no cycle between the package and its adapters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, ToolDefinitionError

# The keys of an Adapted's metadata that are top-level frontmatter; the rest are metadata.
TOP_LEVEL = ("description", "authority", "role", "when")


@dataclass(frozen=True)
class Mapped:
    """How one field of the other format was mapped onto ours (``show`` and ``export`` list these)."""

    source: str  # the field in the other format: "model.parameters.max_tokens", "body: system:", "${input:topic}"
    target: str | None  # our metadata key / "prompt" / "messages", or None when dropped
    note: str = ""  # how: "alias sonnet -> claude-sonnet-4-5", "kept as data: host tool", "not supported: @file"
    lossless: bool = True  # False when information is lost or changed


@dataclass(frozen=True)
class Adapted:
    """A file of another format as our tool: its name, our frontmatter keys, our prompt, and how each field mapped."""

    name: str  # the tool's name (frontmatter name, else derived from the file as the format does)
    metadata: dict[str, Any]  # OUR frontmatter keys: description, model, params, tools, system, messages, ...
    prompt: str  # OUR prompt template (jinja2 source), "" for none
    mapping: tuple[Mapped, ...]  # how every source field was mapped, in source order
    problems: tuple[tuple[int | None, str], ...] = ()  # (line, message) that ``check`` reports


@dataclass(frozen=True)
class Summary:
    """What a format's files give toolcascade, one README table row: read, run, lenient, left to the host.

    A format may have one as ``summary``; ``orchestrator.formats.summary_table`` writes the rows the README shows.
    """

    read: str  # the files and fields read
    runs: str  # what a call does
    lenient: str  # what loads although strict parsing refuses it
    host_only: str  # what stays the host's: kept as data or reported, never run


@runtime_checkable
class Format(Protocol):
    """A format adapter (see the module docstring)."""

    name: str

    def recognises(self, path: Path, root: Path) -> bool:
        """True when ``path`` (found under the search path folder ``root``) is a file of this format."""
        ...

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map the file onto our tool.

        Raises:
            ToolDefinitionError: the file is malformed (naming the file, line and key).
        """
        ...


class Front(dict):  # type: ignore[type-arg]
    """A parsed frontmatter that remembers the file line of each top-level key (and, when given, the file's text).

    ``root`` is the search path the file was found in, when known: what a path the adapter writes for the
    project (a plugin's folder) is relative to.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        lines: Mapping[str, int] | None = None,
        text: str | None = None,
        root: Path | None = None,
    ) -> None:
        super().__init__(data)
        self.lines: dict[str, int] = dict(lines or {})
        self.text = text
        self.root = root

    def written(self, key: str) -> str | None:
        """The value of top-level ``key`` as the file writes it (None when the file's text is not known)."""
        line = self.lines.get(key)
        if self.text is None or line is None:
            return None
        from .lenient import value_text

        return value_text(self.text, line, key)


def key_line(front: Mapping[str, Any], key: str) -> int | None:
    """The file line of a top-level frontmatter ``key`` (None when unknown)."""
    lines = getattr(front, "lines", None)
    return lines.get(key) if isinstance(lines, Mapping) else None


# -- helpers for adapters -------------------------------------------------------------

_ENDRAW = re.compile(r"\{%-?\s*endraw\s*-?%\}")


def literal(text: str) -> str:
    """``text`` as a jinja2 template that renders to exactly ``text`` (other formats are not jinja2)."""
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return text
    # A raw block cannot hold its own end tag: close it, print the tag as a string, open it again.
    inner = _ENDRAW.sub(lambda m: "{% endraw %}{{ " + repr(m.group(0)) + " }}{% raw %}", text)
    return "{% raw %}" + inner + "{% endraw %}"


def field_error(
    message: str, *, tool: str | None, path: Path, front: Mapping[str, Any], key: str
) -> ToolDefinitionError:
    """A ``ToolDefinitionError`` for frontmatter ``key``, at its line."""
    return ToolDefinitionError(message, tool=tool, path=path, line=key_line(front, key), key=key)


def text_field(front: Mapping[str, Any], key: str, *, tool: str | None, path: Path) -> str | None:
    """A frontmatter field that must be text when present (numbers are taken as written).

    Raises:
        ToolDefinitionError: a mapping, list or other non-scalar value.
    """
    value = front.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise field_error(
            f"{key!r} must be text, not a {type(value).__name__}", tool=tool, path=path, front=front, key=key
        )
    return str(value)


def prose_field(front: Mapping[str, Any], key: str, *, tool: str | None, path: Path) -> tuple[str | None, str]:
    """A field the host documents as text (``description``, ``argument-hint``), and how it was read.

    Text and numbers are taken as written. A YAML list (``argument-hint:
    [pr-number]``) is text to its host, which shows it: a list written on
    the key's line is the text written there (``[pr-number]``), a block list
    its items, one per line. The second value says how a list was read ("" for text).

    Raises:
        ToolDefinitionError: a mapping or another value that is not text.
    """
    value = front.get(key)
    if isinstance(value, list):
        written = front.written(key) if isinstance(front, Front) else None
        if written is not None and written.startswith("["):
            return written, f"a YAML list: read as the text written, {written!r}"
        if all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in value):
            return "\n".join(str(item) for item in value), "a YAML list: its items read as lines of text"
    return text_field(front, key, tool=tool, path=path), ""


def name_list(front: Mapping[str, Any], key: str, *, tool: str | None, path: Path, spaces: bool = False) -> list[str]:
    """A list of tool names written as a comma-separated string or a YAML list.

    Commas inside parentheses stay (``Bash(git add:*, git commit:*)`` is one
    name). With ``spaces`` a string without such a comma is split at its
    spaces outside parentheses, the Agent Skills form (``Read Edit Bash(git:*)``).

    Raises:
        ToolDefinitionError: neither a string nor a list of strings.
    """
    value = front.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        parts = _split_outside(value, ",")
        if spaces and len(parts) == 1:
            parts = _split_outside(value, " \t\n")
        return [part.strip() for part in parts if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    raise field_error(
        f"{key!r} must be a comma-separated string or a list of names, not {type(value).__name__} {value!r:.60}",
        tool=tool,
        path=path,
        front=front,
        key=key,
    )


def _split_outside(value: str, separators: str) -> list[str]:
    """``value`` cut at each of ``separators`` that stands outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in value:
        depth += (char == "(") - (char == ")")
        if char in separators and depth <= 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


_HOST_NAME = re.compile(r"^(?:[A-Z][A-Za-z0-9]*(?:\(.*\))?|mcp__.+|.*\(.*\))$", re.DOTALL)


def is_host_tool(name: str) -> bool:
    """True for a name that means the host application's own tool, never one of ours.

    Host tools are PascalCase (``Read``, ``WebFetch``, ``Bash(git:*)``), MCP
    names (``mcp__github__create_issue``) or carry a permission pattern in
    parentheses. Our tools are named in lower case (``summarize``, ``team/x``).
    """
    return bool(_HOST_NAME.match(name))


SERVED = "mcp__toolcascade__"
"""How Claude Code names our tool ``NAME`` when ``toolcascade serve`` is its MCP server ``toolcascade``."""


def split_tools(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(our tool names, the host's tool names), each in the order given.

    ``mcp__toolcascade__NAME`` is our ``NAME`` as Claude Code calls it through
    ``toolcascade serve`` (``export --format claude-agent`` writes it so).
    """
    ours: list[str] = []
    host: list[str] = []
    for name in names:
        if name.startswith(SERVED) and len(name) > len(SERVED):
            ours.append(name[len(SERVED) :])
        else:
            (host if is_host_tool(name) else ours).append(name)
    return ours, host


# -- models --------------------------------------------------------------------------

ALIASES: dict[str, Any] = {
    "sonnet": "anthropic:claude-sonnet-4-5",
    "opus": "anthropic:claude-opus-4-1",
    "haiku": "anthropic:claude-haiku-4-5",
    "inherit": "anthropic:claude-sonnet-4-5",
}
"""Model aliases other formats use, as our model specs. ``inherit`` (the calling
agent's model in Claude Code) is the model used where that cannot be known."""

ALIASES_ENV = "TOOLCASCADE_MODEL_ALIASES"


def aliases() -> dict[str, Any]:
    """``ALIASES`` with the entries of ``$TOOLCASCADE_MODEL_ALIASES`` on top.

    Raises:
        ConfigurationError: the variable is not a YAML mapping of names to model specs.
    """
    raw = os.environ.get(ALIASES_ENV)
    table = dict(ALIASES)
    if raw:
        table.update(_parse_aliases(raw))
    return table


@lru_cache(maxsize=8)
def _parse_aliases(raw: str) -> dict[str, Any]:
    from ..documents import parse_yaml  # below the loader, which imports this package: no cycle

    try:
        data, _node = parse_yaml(raw, Path(f"${ALIASES_ENV}"), what="mapping")
    except ToolDefinitionError as exc:
        raise ConfigurationError(f"{ALIASES_ENV} is not a YAML mapping of alias: model: {exc.detail}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigurationError(f"{ALIASES_ENV} is not a YAML mapping of alias: model: a {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(value, str | Mapping):
            raise ConfigurationError(
                f"{ALIASES_ENV}: alias {key!r} must map to 'provider:name' or a model mapping, not {value!r}"
            )
    return {str(key): value for key, value in data.items()}


_ANTHROPIC_ID = re.compile(r"^claude-[a-z0-9]+(?:-[a-z0-9]+)+$")


def resolve_model(value: str) -> tuple[Any, str, bool]:
    """A model name another format wrote, as (our model spec, a note for the mapping, lossless).

    An alias in ``aliases()`` becomes its spec; ``provider:name`` is kept; an
    Anthropic model id (``claude-sonnet-4-5``, ``claude-3-5-haiku-20241022``,
    which Claude Code accepts) gets its provider. Any other name is never
    guessed: it is kept as written, so a run fails with the aliases to choose
    from, and ``unknown_model`` says so for ``check``.

    Raises:
        ConfigurationError: ``$TOOLCASCADE_MODEL_ALIASES`` is malformed.
    """
    table = aliases()
    if value in table:
        spec = table[value]
        shown = spec if isinstance(spec, str) else f"{spec.get('provider')}:{spec.get('name') or ''}".rstrip(":")
        if value == "inherit":
            return (
                spec,
                f"inherit -> {shown} (the alias table's 'inherit'; the caller's model is not passed down)",
                False,
            )
        return spec, f"alias {value} -> {shown}", True
    if ":" in value:
        return value, "kept", True
    if _ANTHROPIC_ID.match(value):
        return f"anthropic:{value}", f"the Anthropic model id {value} -> anthropic:{value}", True
    return value, "not a model alias or id toolcascade knows: kept as written, a run fails until it is one", False


def unknown_model(value: str, known: Iterable[str] = ()) -> str | None:
    """Why ``value`` names no model (a ``check`` warning with the aliases and a did-you-mean), or None when it does.

    ``known`` adds names the format maps itself (Copilot's model picker names).

    Raises:
        ConfigurationError: ``$TOOLCASCADE_MODEL_ALIASES`` is malformed.
    """
    table = aliases()
    if value in table or ":" in value or _ANTHROPIC_ID.match(value):
        return None
    import difflib  # only an unknown name needs it

    names = {name.lower(): name for name in sorted({*table, *known})}
    close = difflib.get_close_matches(value.lower(), list(names), n=1, cutoff=0.6)
    hint = f"; did you mean {names[close[0]]!r}?" if close else ""
    return (
        f"model {value!r} is not a model alias or id toolcascade knows, so a run fails: write 'provider:name' "
        f"(anthropic:claude-sonnet-4-5), an alias ({', '.join(sorted(table))}) or add it to ${ALIASES_ENV}{hint}"
    )


def in_location(path: Path, location: str) -> Path | None:
    """The folder of ``location`` (``.claude/agents``) that ``path`` lies in, or None.

    A Claude Code plugin's folder of that kind (``plugins/NAME/agents``) is
    such a location too (``orchestrator.formats.plugins``).
    """
    text = str(path)
    if f"{os.sep}{location}{os.sep}" not in text:
        kind = location[len(".claude/") :] if location.startswith(".claude/") else ""
        if kind and f"{os.sep}{kind}{os.sep}" in text:
            from .plugins import place

            found = place(path, kind)
            return found.folder if found is not None else None
        return None  # the common case, decided without splitting the path
    parts = Path(location).parts
    file_parts = path.parts
    for start in range(len(file_parts) - len(parts) - 1, -1, -1):  # the nearest enclosing one
        if file_parts[start : start + len(parts)] == parts:
            return Path(*file_parts[: start + len(parts)])
    return None
