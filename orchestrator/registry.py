"""Search paths, finding tools, and the caches that follow file edits.

A ref (``summarize``, ``team/summarize``) is looked up in each search path
in order, first match wins, the built-in ``tools/`` folder last. Refs are
checked before any file is touched: absolute refs, ``..`` segments and
symlinks that resolve outside their search path are refused.

Parsed files are cached with their (mtime, size); every cache derived from
them (ref lookups, authorities, cascades, SCCs) lives in ``derived`` and is
dropped as a whole the moment any file or folder is seen to change. Within
one run (a top-level invocation and everything under it) each file and
folder is stat-ed at most once: ``checked`` carries what was seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .errors import ToolDefinitionError, ToolNotFoundError
from .limits import DEFAULT_LIMITS, Limits
from .loader import load_tool
from .tool import Tool

T = TypeVar("T")

_PACKAGE = Path(__file__).resolve().parent

# Files in a tools folder that are never tools.
RESERVED = frozenset({"AUTHORITY.md", "README.md"})


def builtin_folder(name: str) -> Path:
    """The built-in ``tools`` or ``authorities`` folder: in the wheel, or in a source checkout."""
    installed = _PACKAGE / "builtin" / name
    return installed if installed.is_dir() else _PACKAGE.parent / name


class SearchPath(NamedTuple):
    """A folder tools are found in; ``trusted`` folders may hold python tools.

    Search paths are parts of cache keys on every invocation, so they are
    plain tuples of a string and a bool: hashed and compared in C.
    """

    folder: str  # absolute and resolved
    trusted: bool = True

    @property
    def root(self) -> Path:
        """The folder as a Path."""
        return _as_path(self.folder)

    @classmethod
    def of(cls, folder: str | os.PathLike[str], trusted: bool = True) -> SearchPath:
        return cls(str(Path(folder).resolve()), trusted)


@lru_cache(maxsize=256)
def _as_path(folder: str) -> Path:
    return Path(folder)


Signature = tuple[int, int] | None


def signature(path: str) -> Signature:
    """(mtime_ns, size) of a file or folder, or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def check_ref(ref: object) -> tuple[str, ...]:
    """Split a ref into its segments, refusing anything that could leave a search path.

    Raises:
        ToolNotFoundError: not a string, empty, absolute, or with ``..``/``.``/empty segments.
    """
    if not isinstance(ref, str) or not ref or "\x00" in ref:
        raise ToolNotFoundError(str(ref), reason="a ref must be a non-empty string")
    if "\\" in ref or ref.startswith("/") or os.path.isabs(ref):
        raise ToolNotFoundError(ref, reason="refs are relative names like 'team/summarize'")
    parts = tuple(ref.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise ToolNotFoundError(ref, reason="refs may not contain '..', '.' or empty segments")
    return parts


class Registry:
    """Finds and caches tools; owns every cache that depends on files."""

    def __init__(
        self, paths: Iterable[SearchPath], frozen: Iterable[Path] = (), limits: Limits = DEFAULT_LIMITS
    ) -> None:
        self.paths = tuple(paths)
        self.limits = limits
        # Folders never watched (an installed package's built-ins): paths below them are not stat-ed.
        self.frozen = tuple(str(folder) for folder in frozen)
        self._frozen_below = tuple(os.path.join(folder, "") for folder in self.frozen)
        self.functions: dict[str, Tool] = {}
        self.derived: dict[str, dict[Any, Any]] = {name: {} for name in self._HOT}
        self.generation = 0
        self._files: dict[tuple[str, str], tuple[Signature, Any]] = {}
        self._seen: dict[str, Signature] = {}

    # -- change tracking -------------------------------------------------

    def cache(self, name: str) -> dict[Any, Any]:
        """A derived cache, emptied whenever any watched file or folder changes."""
        found = self.derived.get(name)
        if found is None:
            found = self.derived[name] = {}
        return found

    # The caches the hot path reads, made once so lookups skip cache().
    _HOT = ("refs", "tools", "plans", "scc", "toolkeys", "static-chains", "resolved")

    def changed(self) -> None:
        """Drop every derived cache (a file, folder or registration changed)."""
        self.generation += 1
        for cache in self.derived.values():
            cache.clear()

    def clear(self) -> None:
        """Drop every cache, parsed files included."""
        self._files.clear()
        self._seen.clear()
        self.changed()

    def watch(self, paths: Iterable[str], checked: set[str] | None = None) -> bool:
        """Stat each path (once per run); return False, dropping derived caches, if any changed.

        Any change empties every derived cache, so a cached value whose paths
        were all seen in this run is fresh: only the unseen ones are stat-ed.
        """
        if checked is not None and isinstance(paths, frozenset):
            paths = paths - checked
            if not paths:
                return True
        fresh = True
        for path in paths:
            if self.frozen and (path.startswith(self._frozen_below) or path in self.frozen):
                continue
            if checked is not None:
                if path in checked:
                    continue
                checked.add(path)
            now = signature(path)
            if path not in self._seen:
                self._seen[path] = now
            elif self._seen[path] != now:
                self._seen[path] = now
                fresh = False
        if not fresh:
            self.changed()
        return fresh

    def memo(self, name: str, key: Any, compute: Callable[[set[str]], T], checked: set[str] | None) -> T:
        """A derived value, cached with the files and folders it was computed from.

        ``compute`` records every path it looks at in the set it is given; a
        cached value is reused while none of them changed (each stat-ed once
        per run). A failing ``compute`` caches nothing.
        """
        cache = self.derived.get(name)
        if cache is None:
            cache = self.cache(name)
        hit = cache.get(key)
        if hit is not None:
            if checked is not None and hit[2] is checked:
                return hit[0]  # type: ignore[no-any-return]
            if self.watch(hit[1], checked):
                hit[2] = checked
                return hit[0]  # type: ignore[no-any-return]
        deps: set[str] = set()
        value = compute(deps)
        if checked is not None:
            checked.update(deps)
        self.cache(name)[key] = [value, frozenset(deps), checked]
        return value

    # -- loading ----------------------------------------------------------

    def load(self, path: Path, loader: Callable[[Path], T], checked: set[str] | None = None, kind: str = "tool") -> T:
        """Load ``path`` with ``loader``, cached by (mtime, size); a failure is cached too.

        ``kind`` keeps apart what one file is loaded as (a tool, an authority).

        Raises:
            ToolDefinitionError: the file is malformed (re-raised from the cache).
        """
        name = str(path)
        self.watch((name,), checked)
        sig = self._seen.get(name)
        entry = self._files.get((name, kind))
        if entry is None or entry[0] != sig:
            try:
                value: Any = loader(path)
            except ToolDefinitionError as exc:
                value = exc
            entry = self._files[(name, kind)] = (sig, value)
        if isinstance(entry[1], ToolDefinitionError):
            raise entry[1]
        return entry[1]  # type: ignore[no-any-return]

    # -- finding ----------------------------------------------------------

    def locate(
        self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> tuple[Path, SearchPath] | None:
        """The file ``ref`` names in ``paths`` (first match wins), or None.

        Raises:
            ToolNotFoundError: the ref is malformed or a match resolves outside its search path.
        """
        return self.memo("refs", (ref, paths), lambda deps: self._locate(ref, paths, deps), checked)

    def _locate(self, ref: str, paths: tuple[SearchPath, ...], deps: set[str]) -> tuple[Path, SearchPath] | None:
        parts = check_ref(ref)
        folders = [sp.root.joinpath(*parts[:-1]) for sp in paths]
        # The folders, not the files: adding or removing a file changes its folder.
        self.watch([str(f) for f in folders], deps)
        found = None
        for sp, folder in zip(paths, folders, strict=True):
            for ext in (".md", ".py") if sp.trusted else (".md",):
                candidate = folder / (parts[-1] + ext)
                if candidate.name in RESERVED or not candidate.is_file():
                    continue
                real = candidate.resolve()
                if not real.is_relative_to(sp.root):
                    raise ToolNotFoundError(ref, [sp.root], reason=f"{candidate} resolves outside its search path")
                found = (candidate, sp)
                break
            if found:
                break
        return found

    def find(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> Tool:
        """The tool ``ref`` names: a registered function first, then the search paths.

        Raises:
            ToolNotFoundError: nothing matches.
            ToolDefinitionError: the matching file is malformed.
        """
        tool = self.functions.get(ref)
        if tool is not None:
            return tool
        found = self.derived["tools"].get((ref, paths))
        if found is not None and checked is not None and found[1] is checked:
            return found[0]  # type: ignore[no-any-return]  # already validated in this run
        hit = self.locate(ref, paths, checked)
        if hit is None:
            raise ToolNotFoundError(ref, [sp.root for sp in paths])
        path, sp = hit
        tool = self.load(path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits), checked)
        self.derived["tools"][(ref, paths)] = [tool, checked]
        return tool

    def exists(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> bool:
        """True when ``ref`` names a tool (without parsing it)."""
        if ref in self.functions:
            return True
        try:
            return self.locate(ref, paths, checked) is not None
        except ToolNotFoundError:
            return False

    def discover(self, paths: tuple[SearchPath, ...]) -> Iterator[tuple[str, Path | None, SearchPath | None]]:
        """Every ref reachable through ``paths`` with the file it resolves to, first match wins.

        Registered functions come first (path None). Lists names only: nothing is parsed.
        """
        seen: set[str] = set()
        for name in sorted(self.functions):
            seen.add(name)
            yield name, None, None
        for sp in paths:
            if not sp.root.is_dir():
                continue
            for folder, dirs, files in os.walk(sp.root):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                for file in sorted(files):
                    stem, ext = os.path.splitext(file)
                    if ext not in (".md", ".py") or file in RESERVED:
                        continue
                    if ext == ".py" and not sp.trusted:
                        continue
                    rel = Path(folder, stem).relative_to(sp.root).as_posix()
                    if rel in seen:
                        continue
                    seen.add(rel)
                    yield rel, Path(folder, file), sp
