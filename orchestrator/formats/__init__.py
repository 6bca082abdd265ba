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
  root, the location itself, or a folder in between (``.claude``). A
  ``.claude/KIND`` location is also read in every Claude Code plugin
  (``plugins/NAME/KIND``, ``orchestrator.formats.plugins``). Every
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
``tools/`` folder reads none. ``claude`` names the three Claude Code formats,
``copilot`` the two VS Code ones (prompt files, custom agents and chat modes).

Models: ``resolve_model`` maps model aliases (``sonnet``, ``opus``,
``haiku``, ``inherit``) through ``ALIASES``, which the environment variable
``TOOLCASCADE_MODEL_ALIASES`` extends (a YAML/JSON mapping of alias to model
spec, read when a file is loaded).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .fields import (  # re-exported: the shared part of every adapter
    ALIASES,
    ALIASES_ENV,
    SERVED,
    TOP_LEVEL,
    Adapted,
    Format,
    Front,
    Mapped,
    Summary,
    aliases,
    field_error,
    in_location,
    is_host_tool,
    key_line,
    literal,
    name_list,
    prose_field,
    resolve_model,
    split_tools,
    text_field,
    unknown_model,
)

__all__ = [
    "ALIASES",
    "ALIASES_ENV",
    "Adapted",
    "ENTRY_POINTS",
    "Format",
    "Front",
    "GROUPS",
    "Mapped",
    "SERVED",
    "Summary",
    "TOP_LEVEL",
    "aliases",
    "builtin",
    "entry_points",
    "field_error",
    "in_location",
    "is_host_tool",
    "key_line",
    "literal",
    "location_trees",
    "name_list",
    "named",
    "prose_field",
    "recognise",
    "registered",
    "resolve_model",
    "select",
    "split_tools",
    "suffixes",
    "summary_table",
    "text_field",
    "unknown_model",
]

ENTRY_POINTS = "toolcascade.formats"

# -- finding formats -----------------------------------------------------------------


def builtin() -> dict[str, Format]:
    """The formats that ship with toolcascade, by name (imported on first use)."""
    found: dict[str, Format] = {}
    from . import claude

    for fmt in (claude.AGENT, claude.COMMAND, claude.SKILL):
        found[fmt.name] = fmt
    for module in ("prompty", "copilot", "chatmodes"):  # the adapters of issue 15's second part, when present
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

GROUPS = {
    "claude": ("claude-agent", "claude-command", "claude-skill"),
    "copilot": ("copilot-prompt", "copilot-agent"),
}
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


def summary_table(formats: Iterable[Format] | None = None) -> str:
    """The README's table of the formats (every registered one by default) that have a ``summary``, as Markdown."""
    rows = ["| format | read | runs | lenient | host-only |", "| --- | --- | --- | --- | --- |"]
    for fmt in registered().values() if formats is None else formats:
        summary = getattr(fmt, "summary", None)
        if isinstance(summary, Summary):
            rows.append(f"| `{fmt.name}` | {summary.read} | {summary.runs} | {summary.lenient} | {summary.host_only} |")
    return "\n".join(rows) + "\n"


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


def location_trees(
    root: Path, formats: Iterable[Format], looked: list[Path] | None = None
) -> Iterator[tuple[Path, Format]]:
    """The folders under ``root`` that formats read as trees, with their format.

    A location ``.claude/agents`` is found at ``root/.claude/agents``, at
    ``root`` itself when root is it or lies inside it, and at ``root/agents``
    when root ends with ``.claude``. ``looked`` receives the folders read while looking for plugins
    (``plugins.plugin_folders``), for a cache to watch.
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
    yield from _plugin_trees(root, formats, seen, looked)


def _plugin_trees(
    root: Path, formats: Iterable[Format], seen: set[tuple[Path, str]], looked: list[Path] | None
) -> Iterator[tuple[Path, Format]]:
    """The ``agents``, ``commands`` and ``skills`` folders of the Claude Code plugins under ``root``."""
    kinds = [
        (fmt, loc[len(".claude/") :])
        for fmt in formats
        for loc in getattr(fmt, "locations", ())
        if loc.startswith(".claude/")
    ]
    if not kinds:
        return
    from .plugins import plugin_folders

    for plugin in plugin_folders(root, looked):
        for fmt, kind in kinds:
            folder = plugin / kind
            if (folder, fmt.name) not in seen:
                seen.add((folder, fmt.name))
                yield folder, fmt
