"""Authorities: the files that give tools their base metadata and pipeline.

``find_authority`` picks a tool's nearest authority: its explicit
``authority:`` name, else the nearest ``AUTHORITY.md`` walking up to its
search-path root, else the built-in ``default``. ``authority_chain`` then
follows ``inherit`` to list every authority that contributes, root-most first.

Three levels stand beside the folders (``placed``), as developers know them
from their editors: a **managed** ``AUTHORITY.md`` (``TOOLCASCADE_MANAGED``,
else the system-wide config folder) right above the built-in ``default``,
whose ``$locked`` keys and entries nobody below can change or remove; the
**user**'s ``AUTHORITY.md`` in their config folder
(``cachefolder.config_folder``) above it, below every folder of the project;
and a **local** ``AUTHORITY.local.md`` beside a folder's ``AUTHORITY.md``,
merged right above it (kept out of version control: settings of one
checkout). They take their place by where they are: their own ``inherit``
is not followed.

The nearest ``AUTHORITY.md`` of a folder and each named authority are
looked up once per folder (registry derived caches, with the files they
depend on), not once per tool: a listing of a folder of 100 tools walks
its folders once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from .errors import ConfigurationError, ToolDefinitionError
from .limits import DEFAULT_LIMITS, Limits
from .loader import read_text, split_frontmatter
from .registry import Registry, SearchPath, builtin_folder, is_file
from .tool import Tool

T = TypeVar("T")

DEFAULT_PHASES = ("$configure", "$post-configure", "$pre-execute", "$execute", "$post-execute")
FOLDER_FILE = "AUTHORITY.md"
LOCAL_FILE = "AUTHORITY.local.md"
MANAGED_ENV = "TOOLCASCADE_MANAGED"


@dataclass(frozen=True, slots=True)
class Authority:
    """An authority file: base metadata, optional phases, and what it inherits.

    ``inherit`` is None for the default rule (the next ``AUTHORITY.md`` up,
    else ``default``), an empty tuple for ``inherit: false``, else the names.
    """

    name: str
    path: Path
    metadata: Mapping[str, Any]
    phases: tuple[str, ...] | None = None
    inherit: tuple[str, ...] | None = None
    folder: bool = False
    lines: Mapping[str, int] = field(default_factory=dict)
    placed: str | None = None  # 'managed', 'user' or 'local': a level found by where it lives, not by inherit


def load_authority(path: Path, root: Path | None = None, limits: Limits = DEFAULT_LIMITS) -> Authority:
    """Load an authority file (named ``authorities/NAME.md`` or a folder ``AUTHORITY.md``).

    The file is read and its YAML measured under ``limits``, as a tool's is.

    Raises:
        ToolDefinitionError: unreadable or oversized file, malformed YAML, a frontmatter
            over ``limits``, or fields of the wrong shape.
    """
    data, lines, _body, _line = split_frontmatter(read_text(path, limits), path, limits)
    folder = path.name == FOLDER_FILE
    default_name = path.relative_to(root).as_posix() if folder and root else path.stem
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError("authority 'name' must be a non-empty string", path=path, line=lines.get("name"))
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ToolDefinitionError("authority 'metadata' must be a mapping", path=path, line=lines.get("metadata"))
    phases = data.get("phases")
    if phases is not None and (
        not isinstance(phases, list) or not all(isinstance(p, str) and p.startswith("$") for p in phases)
    ):
        raise ToolDefinitionError(
            "authority 'phases' must be a list of '$name' sentinels", path=path, line=lines.get("phases")
        )
    inherit = data.get("inherit")
    if inherit is False:
        parents: tuple[str, ...] | None = ()
    elif inherit is None:
        parents = None
    elif isinstance(inherit, str):
        parents = (inherit,)
    elif isinstance(inherit, list) and all(isinstance(i, str) for i in inherit):
        parents = tuple(inherit)
    else:
        raise ToolDefinitionError(
            "authority 'inherit' must be a name, a list of names, or false", path=path, line=lines.get("inherit")
        )
    return Authority(
        name=name,
        path=path,
        metadata=metadata,
        phases=tuple(phases) if phases is not None else None,
        inherit=parents,
        folder=folder,
        lines=lines,
    )


class Authorities:
    """Looks authorities up for tools, with caches that follow file edits."""

    def __init__(self, registry: Registry, builtin: Path | None = None) -> None:
        self.registry = registry
        self.builtin = builtin or builtin_folder("authorities")
        self._outside: tuple[tuple[str, Path], ...] | None = None  # the managed and user files (placed_files)

    def placed_files(self) -> tuple[tuple[str, Path], ...]:
        """Where the managed and the user level live, as (level name, path): found once per Manager.

        ``TOOLCASCADE_MANAGED`` names the managed file, else ``AUTHORITY.md``
        in the system-wide config folder (``/etc/xdg/toolcascade`` on Linux);
        the user's is ``AUTHORITY.md`` in ``cachefolder.config_folder()``.
        Either may be missing: a file created later is seen as any edit is.
        """
        if self._outside is None:
            from .cachefolder import config_folder, system_config_folder

            found: list[tuple[str, Path]] = []
            managed = os.environ.get(MANAGED_ENV)
            system = Path(managed).expanduser() if managed else system_config_folder()
            if system is not None:
                found.append(("managed", system if managed else system / FOLDER_FILE))
            user = config_folder()
            if user is not None:
                found.append(("user", user / FOLDER_FILE))
            self._outside = tuple(found)
        return self._outside

    def _load(self, path: Path, root: Path | None, checked: set[str] | None) -> Authority:
        # A folder authority's name derives from its root: one cache entry per root, whichever came first.
        return self.registry.load(
            path, lambda p: load_authority(p, root, self.registry.limits), checked, ("authority", root)
        )

    def folders(self, paths: tuple[SearchPath, ...]) -> list[Path]:
        """Where named authorities live: each search path's sibling ``authorities/``, then the built-in one."""
        found = [sp.root.parent / "authorities" for sp in paths]
        found.append(self.builtin)
        return list(dict.fromkeys(found))

    def named(
        self,
        name: str,
        paths: tuple[SearchPath, ...],
        checked: set[str] | None = None,
        skip: Path | None = None,
    ) -> Authority | None:
        """The named authority ``name``, or None. ``skip`` lets ``default.md`` inherit a later ``default``."""
        if "/" in name or "\\" in name or ".." in name or not name:
            return None
        return self._cached(
            "named-authorities", (name, paths, skip), lambda deps: self._named(name, paths, deps, skip), checked
        )

    def _named(
        self, name: str, paths: tuple[SearchPath, ...], checked: set[str], skip: Path | None
    ) -> Authority | None:
        for folder in self.folders(paths):
            candidate = folder / f"{name}.md"
            self.registry.watch((str(candidate),), checked)
            if candidate != skip and is_file(candidate):
                return self._load(candidate, None, checked)
        return None

    def find(self, tool: Tool, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> Authority:
        """The tool's nearest authority (R-AUTH-2).

        Raises:
            ConfigurationError: the tool names an authority that does not exist.
        """
        if tool.authority:
            found = self.named(tool.authority, paths, checked)
            if found is None:
                raise ConfigurationError(
                    f"unknown authority {tool.authority!r}; looked in "
                    + ", ".join(str(f) for f in self.folders(paths)),
                    tool=tool.name,
                    path=tool.path,
                    line=tool.line_of("authority"),
                )
            return found
        if tool.path is not None and tool.root is not None:
            nearest = self._folder_above(os.path.dirname(tool.path), tool.root, checked)
            if nearest is not None:
                return nearest
        return self._default(paths, checked)

    def governing(
        self, tool: Tool, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> tuple[Authority, ...]:
        """``chain(find(tool))``: every authority over ``tool``, root-most first, its nearest last.

        One cached lookup per folder (and named authority), not two per tool: the tools of a folder share their
        authorities, and a ``check`` of 10,000 tools asked ``find`` and ``chain`` of each.

        Raises:
            ConfigurationError: as ``find`` and ``chain`` raise (never cached: raised for each tool).
        """
        folder = root = None
        if tool.path is not None and tool.root is not None:
            folder, root = os.path.dirname(tool.path), os.fspath(tool.root)
        return self._cached(
            "governing",
            (tool.authority, folder, root, paths),
            lambda deps: self.chain(self.find(tool, paths, deps), paths, deps),
            checked,
        )

    def _folder_above(self, folder: Path | str, root: Path, checked: set[str] | None) -> Authority | None:
        """The nearest ``AUTHORITY.md`` from ``folder`` up to ``root``: cached per folder, as every tool there asks.

        Keyed by the two paths' text: a ``Path`` made for each tool (its file's parent) hashed its parts anew
        on every lookup, half of what finding an authority cost a ``check`` of 10,000 tools.

        Raises:
            ToolDefinitionError: the nearest one is malformed (never cached: raised on each lookup).
        """
        return self._cached(
            "folder-authorities",
            (os.fspath(folder), os.fspath(root)),
            lambda deps: self._walk_up(Path(folder), root, deps),
            checked,
        )

    def _cached(self, name: str, key: Any, compute: Callable[[set[str]], T], checked: set[str] | None) -> T:
        """``registry.memo``, and the files the value depends on join ``checked`` on a hit too.

        A plan that found its authority through this cache depends on the
        authority files as much as one that walked the folders itself: its
        own freshness check must stat them (as ``Registry.names`` does).
        """
        value = self.registry.memo(name, key, compute, checked)
        if checked is not None:
            entry = self.registry.derived.get(name, {}).get(key)
            if entry is not None:
                checked.update(entry[1])
        return value

    def _walk_up(self, folder: Path, root: Path, checked: set[str]) -> Authority | None:
        while True:
            candidate = folder / FOLDER_FILE
            self.registry.watch((str(candidate),), checked)
            if is_file(candidate):
                try:
                    return self._load(candidate, root, checked)
                except ToolDefinitionError:
                    if is_file(candidate):
                        raise
                    # deleted between finding and reading it: as if it had not been there
            if folder == root or root not in folder.parents:
                return None
            folder = folder.parent

    def _default(self, paths: tuple[SearchPath, ...], checked: set[str] | None) -> Authority:
        found = self.named("default", paths, checked)
        if found is None:
            raise ConfigurationError(f"no 'default' authority in {self.builtin}")
        return found

    def parents(
        self, authority: Authority, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> list[Authority]:
        """The authorities ``authority`` inherits directly (R-AUTH-3).

        Raises:
            ConfigurationError: an inherited name does not exist.
        """
        if authority.inherit is not None:
            names = authority.inherit
        elif authority.folder:
            root = self._root_of(authority.path, paths)
            if root is not None and authority.path.parent != root:
                above = self._folder_above(authority.path.parent.parent, root, checked)
                if above is not None:
                    return [above]
            names = ("default",)
        else:
            names = () if authority.name == "default" else ("default",)
        found = []
        for name in names:
            parent = self.named(name, paths, checked, skip=authority.path)
            if parent is None:
                raise ConfigurationError(
                    f"authority {authority.name!r} inherits unknown authority {name!r}",
                    path=authority.path,
                    line=authority.lines.get("inherit"),
                )
            found.append(parent)
        return found

    @staticmethod
    def _root_of(path: Path, paths: tuple[SearchPath, ...]) -> Path | None:
        for sp in paths:
            if sp.root in path.parents:
                return sp.root
        return None

    def chain(
        self, authority: Authority, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> tuple[Authority, ...]:
        """Every authority that contributes to ``authority``, root-most first, itself last.

        Cached per parsed authority (every tool of a folder asks for its folder's chain), with the files it read.

        Raises:
            ConfigurationError: the inheritance forms a cycle (named in the message).
        """
        # Keyed by the parsed file's identity, which the value holds alive (a re-read file is a new key).
        key = (id(authority), paths)
        return self._cached(
            "authority-chains", key, lambda deps: (authority, self._chain(authority, paths, deps)), checked
        )[1]

    def _chain(self, authority: Authority, paths: tuple[SearchPath, ...], checked: set[str]) -> tuple[Authority, ...]:
        order: list[Authority] = []
        placed: set[Path] = set()

        def visit(current: Authority, stack: list[Authority]) -> None:
            if any(a.path == current.path for a in stack):
                names = [a.name for a in stack[[a.path for a in stack].index(current.path) :]]
                raise ConfigurationError(
                    "authority inheritance forms a cycle: " + " -> ".join([*names, current.name]),
                    path=current.path,
                    line=current.lines.get("inherit"),
                )
            if current.path in placed:
                return
            stack.append(current)
            for parent in self.parents(current, paths, checked):
                visit(parent, stack)
            stack.pop()
            placed.add(current.path)
            order.append(current)

        visit(authority, [])
        return self._placed(order, checked)

    def _placed(self, order: list[Authority], checked: set[str] | None) -> tuple[Authority, ...]:
        """``order`` with the managed and user levels above its root (``default``) and each folder's local file above it."""
        out: list[Authority] = []
        for index, current in enumerate(order):
            out.append(current)
            if current.folder:
                local = self._level(current.path.with_name(LOCAL_FILE), f"{current.name} (local)", "local", checked)
                if local is not None:
                    out.append(local)
            if index == 0:
                for name, path in self.placed_files():
                    found = self._level(path, name, name, checked)
                    if found is not None:
                        out.append(found)
        return tuple(out)

    def _level(self, path: Path, name: str, placed: str, checked: set[str] | None) -> Authority | None:
        """The authority file at ``path`` as the level ``name`` (watched, so creating it later is seen), or None."""
        self.registry.watch((str(path),), checked)
        if not is_file(path):
            return None
        return replace(self._load(path, None, checked), name=name, inherit=(), folder=False, placed=placed)
