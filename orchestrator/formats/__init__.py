"""Format adapters: run the Markdown files other tools already keep, without rewriting them.

A format adapter maps one file of another format (a Claude Code subagent, a
slash command, a skill, a Prompty file, a Copilot prompt file) onto our own
frontmatter and prompt; the registry turns the result into an ordinary
``Tool``, so the cascade, middleware, ``check`` and MCP work on it unchanged.

An adapter is a ``Format``: a ``name``, ``recognises(path, root)`` (by
extension or location; ``root`` is the search path folder) and
``adapt(path, front, body, body_line)`` returning an ``Adapted``. ``front``
is the frontmatter already parsed by the loader's bounded YAML (a ``Front``:
a dict whose ``lines`` give each top-level key's file line, see
``key_line``); ``body`` the text after it; ``body_line`` the file line it
starts on. Malformed files raise ``ToolDefinitionError`` naming file and line.

``Adapted.metadata`` holds OUR frontmatter keys: ``description``,
``authority``, ``role`` and ``when`` become top-level frontmatter, every
other key (``model``, ``params``, ``tools``, ``system``, ``messages``,
``host-tools``, ...) becomes metadata. ``prompt`` is a jinja2 template
(``literal`` escapes text that must not be one).

Optional attributes a format may have, read with ``getattr``:

- ``suffixes``: file name endings it reads (``(".prompty",)``); a ref names
  such a file without its suffix (``summarize`` -> ``summarize.prompty``).
- ``locations``: folders, relative to a project root, that it reads as a
  tree (``(".claude/agents",)``); found when the search path is the project
  root, the location itself, or a folder in between (``.claude``). Every
  tool in a location tree takes its name from the adapter (a subfolder
  becomes a namespace the adapter writes into the name, as
  ``frontend:component``), and the tree's other files are never tools.

Formats are found through the entry point group ``toolcascade.formats`` (each
entry point loads a ``Format`` instance) and the built-ins below, which also
work without installed metadata (an editable checkout). Built-in names win.

Which formats a search path reads is ``Manager(formats=...)``: None (every
registered format), a list of names for every search path, or a mapping of
search path folders to a name or a list of names (folders not listed read
every format). Our own ``.md``/``.py`` tools are always read; the built-in
``tools/`` folder reads none. ``claude`` names the three Claude Code formats.

Models: ``resolve_model`` maps model aliases (``sonnet``, ``opus``,
``haiku``, ``inherit``) through ``ALIASES``, which the environment variable
``TOOLCASCADE_MODEL_ALIASES`` extends (a YAML/JSON mapping of alias to model
spec, read when a file is loaded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, ToolDefinitionError

ENTRY_POINTS = "toolcascade.formats"

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
    """A parsed frontmatter that remembers the file line of each top-level key."""

    def __init__(self, data: Mapping[str, Any], lines: Mapping[str, int] | None = None) -> None:
        super().__init__(data)
        self.lines: dict[str, int] = dict(lines or {})


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


def name_list(front: Mapping[str, Any], key: str, *, tool: str | None, path: Path) -> list[str]:
    """A list of tool names written as a comma-separated string or a YAML list.

    Commas inside parentheses stay (``Bash(git add:*, git commit:*)`` is one name).

    Raises:
        ToolDefinitionError: neither a string nor a list of strings.
    """
    value = front.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        parts: list[str] = []
        current: list[str] = []
        depth = 0
        for char in value:
            depth += (char == "(") - (char == ")")
            if char == "," and depth <= 0:
                parts.append("".join(current))
                current = []
            else:
                current.append(char)
        parts.append("".join(current))
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


_HOST_NAME = re.compile(r"^(?:[A-Z][A-Za-z0-9]*(?:\(.*\))?|mcp__.+|.*\(.*\))$", re.DOTALL)


def is_host_tool(name: str) -> bool:
    """True for a name that means the host application's own tool, never one of ours.

    Host tools are PascalCase (``Read``, ``WebFetch``, ``Bash(git:*)``), MCP
    names (``mcp__github__create_issue``) or carry a permission pattern in
    parentheses. Our tools are named in lower case (``summarize``, ``team/x``).
    """
    return bool(_HOST_NAME.match(name))


def split_tools(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(our tool names, the host's tool names), each in the order given."""
    ours: list[str] = []
    host: list[str] = []
    for name in names:
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
    from ..loader import load_yaml  # the loader imports this package lazily: no cycle at import

    try:
        data, _lines = load_yaml(raw, Path(f"${ALIASES_ENV}"))
    except ToolDefinitionError as exc:
        raise ConfigurationError(f"{ALIASES_ENV} is not a YAML mapping of alias: model: {exc.detail}") from exc
    for key, value in data.items():
        if not isinstance(value, str | Mapping):
            raise ConfigurationError(
                f"{ALIASES_ENV}: alias {key!r} must map to 'provider:name' or a model mapping, not {value!r}"
            )
    return {str(key): value for key, value in data.items()}


def resolve_model(value: str) -> tuple[Any, str, bool]:
    """A model name another format wrote, as (our model spec, a note for the mapping, lossless).

    An alias in ``aliases()`` becomes its spec; ``provider:name`` is kept; any
    other bare name is taken as an Anthropic model name (Claude Code's own).

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
    return f"anthropic:{value}", f"{value} -> anthropic:{value}", True


# -- finding formats -----------------------------------------------------------------


def builtin() -> dict[str, Format]:
    """The formats that ship with toolcascade, by name (imported on first use)."""
    found: dict[str, Format] = {}
    from . import claude

    for fmt in (claude.AGENT, claude.COMMAND, claude.SKILL):
        found[fmt.name] = fmt
    for module in ("prompty", "copilot"):  # the adapters of issue 15's second part, when present
        try:
            loaded = __import__(f"{__name__}.{module}", fromlist=["FORMATS"])
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise  # a built-in adapter that cannot import is a bug to see, not a format to skip
            continue
        for fmt in getattr(loaded, "FORMATS", ()):
            found[fmt.name] = fmt
    return found


class _Point:
    """An entry point kept from an earlier process: ``importlib.metadata.EntryPoint`` is made when it is loaded."""

    __slots__ = ("name", "value", "group")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    def load(self) -> Any:
        """The object the entry point names, loaded by ``importlib.metadata``.

        Raises:
            Exception: whatever importing it raises.
        """
        from importlib.metadata import EntryPoint

        return EntryPoint(self.name, self.value, self.group).load()


def entry_points(group: str) -> list[Any]:
    """The installed distributions' entry points in ``group`` (``importlib.metadata``), remembered on disk.

    ``importlib.metadata`` costs ~12 ms to import, most of a first invoke's
    budget, and the group usually holds only our own built-in formats, which
    are never loaded through it. What it found is kept in the cache folder
    (``orchestrator.index``) with the signature of every ``sys.path`` folder:
    installing or removing a distribution changes its folder, and the next
    process asks ``importlib.metadata`` again.
    """
    from ..cachefolder import keep_entry_points, kept_entry_points

    kept = kept_entry_points(group)
    if kept is not None:
        return [_Point(name, value, group) for name, value in kept]
    from importlib.metadata import entry_points as installed

    found = list(installed(group=group))
    keep_entry_points(group, [(point.name, point.value) for point in found])
    return found


_REGISTERED: dict[str, Format] | None = None


def registered() -> dict[str, Format]:
    """Every format by name: the built-ins, then ``toolcascade.formats`` entry points (loaded once).

    A broken entry point is skipped until it is named (``select`` then reports it).
    """
    global _REGISTERED
    if _REGISTERED is None:
        found = builtin()
        for point in entry_points(group=ENTRY_POINTS):
            if point.name in found:
                continue  # built-in names win, as for providers
            try:
                fmt = point.load()
            except Exception:  # a broken plugin must not stop the built-ins
                _BROKEN[point.name] = point.value
                continue
            if isinstance(fmt, type):
                fmt = fmt()
            if not isinstance(fmt, Format):
                _BROKEN[point.name] = f"{point.value} (not a Format: needs name, recognises, adapt)"
                continue
            found[point.name] = fmt
        _REGISTERED = found
    return _REGISTERED


_BROKEN: dict[str, str] = {}

GROUPS = {"claude": ("claude-agent", "claude-command", "claude-skill")}
"""Names that stand for several formats (``--format claude``)."""


def named(names: str | Iterable[str], where: str = "formats") -> tuple[Format, ...]:
    """The formats ``names`` name (group names expanded), in order, without repeats.

    Raises:
        ConfigurationError: a name no format has.
    """
    table = registered()
    if isinstance(names, str):
        names = (names,)
    found: dict[str, Format] = {}
    for name in names:
        if not isinstance(name, str):
            raise ConfigurationError(f"{where}: a format name must be a string, not {name!r}")
        for one in GROUPS.get(name, (name,)):
            fmt = table.get(one)
            if fmt is None:
                broken = f" (the entry point {_BROKEN[one]} failed to load)" if one in _BROKEN else ""
                known = ", ".join(sorted([*table, *GROUPS]))
                raise ConfigurationError(f"{where}: unknown format {one!r}{broken}; known: {known}")
            found[fmt.name] = fmt
    return tuple(found.values())


def select(option: Any, folders: Iterable[str]) -> dict[str, tuple[Format, ...]]:
    """The formats each search path folder reads, from ``Manager(formats=...)``.

    ``folders`` are the resolved search path folders (the built-in folder
    excluded). A mapping's folders are resolved against the working directory.

    Raises:
        ConfigurationError: an unknown format name or a malformed option.
    """
    folders = tuple(folders)
    if option is None:
        every = tuple(registered().values())
        return {folder: every for folder in folders}
    if isinstance(option, str) or (isinstance(option, Iterable) and not isinstance(option, Mapping)):
        chosen = named(option)
        return {folder: chosen for folder in folders}
    if isinstance(option, Mapping):
        every = tuple(registered().values())
        picked: dict[str, tuple[Format, ...]] = {}
        for folder, names in option.items():
            if not isinstance(folder, str | os.PathLike):
                raise ConfigurationError(f"formats: keys are search path folders, not {folder!r}")
            picked[str(Path(folder).resolve())] = named(names, f"formats[{str(folder)!r}]")
        return {folder: picked.get(folder, every) for folder in folders}
    raise ConfigurationError(
        f"formats must be None, a list of format names or a mapping of folder to names, not {type(option).__name__}"
    )


def recognise(path: Path, root: Path, formats: Iterable[Format]) -> Format | None:
    """The first of ``formats`` that recognises ``path``, or None (then it is ours, or not a tool)."""
    for fmt in formats:
        try:
            if fmt.recognises(path, root):
                return fmt
        except (OSError, ValueError):
            continue
    return None


def suffixes(formats: Iterable[Format]) -> tuple[str, ...]:
    """Every file name ending ``formats`` read by extension, longest first (``.prompt.md`` before ``.md``)."""
    found = {s for fmt in formats for s in getattr(fmt, "suffixes", ())}
    return tuple(sorted(found, key=len, reverse=True))


def location_trees(root: Path, formats: Iterable[Format]) -> Iterator[tuple[Path, Format]]:
    """The folders under ``root`` that formats read as trees, with their format.

    A location ``.claude/agents`` is found at ``root/.claude/agents``, at
    ``root`` itself when root is it or lies inside it, and at ``root/agents``
    when root ends with ``.claude``.
    """
    seen: set[tuple[Path, str]] = set()
    for fmt in formats:
        for location in getattr(fmt, "locations", ()):
            parts = tuple(Path(location).parts)
            tail = root.parts
            folder = in_location(root / "_", location) and root  # root lies inside the location: all of it
            for cut in range(len(parts), 0, -1):  # the longest end of root that starts the location
                if folder is not None:
                    break
                if tail[-cut:] == parts[:cut]:
                    folder = root.joinpath(*parts[cut:])
                    break
            if folder is None:
                folder = root.joinpath(*parts)
            if (folder, fmt.name) not in seen:
                seen.add((folder, fmt.name))
                yield folder, fmt


def in_location(path: Path, location: str) -> Path | None:
    """The folder of ``location`` (``.claude/agents``) that ``path`` lies in, or None."""
    if f"{os.sep}{location}{os.sep}" not in str(path):
        return None  # the common case, decided without splitting the path
    parts = Path(location).parts
    file_parts = path.parts
    for start in range(len(file_parts) - len(parts) - 1, -1, -1):  # the nearest enclosing one
        if file_parts[start : start + len(parts)] == parts:
            return Path(*file_parts[: start + len(parts)])
    return None
