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

A file is parsed once however many search paths reach it; the Tool a lookup
returns carries the ``root`` and ``trusted`` of the search path it was found
through, whichever lookup came first.

Every cache is bounded, since callers choose the refs (and so the folders)
that are looked up:

- ``FILES_BOUND`` parsed files, and as many Tools found through a second
  search path: the oldest half is dropped when full (an entry checks its own
  signature, so dropping one only costs a re-parse);
- ``SEEN_BOUND`` stat signatures: emptied when full, with every derived
  cache (a derived value is fresh only while the signatures it was checked
  against are remembered);
- ``DERIVED_BOUND`` entries in each derived cache: the oldest half is
  dropped when full.
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .errors import ToolDefinitionError, ToolNotFoundError
from .limits import DEFAULT_LIMITS, Limits
from .loader import load_tool
from .tool import Tool

T = TypeVar("T")

_PACKAGE = Path(__file__).resolve().parent

FILES_BOUND = 4_096
SEEN_BOUND = 16_384
DERIVED_BOUND = 4_096
NAME_MAX = 255  # bytes in one file or folder name (ext4, APFS, NTFS alike)

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
    """(mtime_ns, size) of a file or folder, or None when it does not exist (or cannot: a bad name)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def is_file(path: Path) -> bool:
    """True when ``path`` is a file; False too for names the file system refuses (too long, a loop)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def shown(ref: str, limit: int = 80) -> str:
    """A ref as messages show it: cut, with its length, when long."""
    return ref if len(ref) <= limit else f"{ref[: limit - 20]}... ({len(ref)} characters)"


def check_ref(ref: object, limit: int = DEFAULT_LIMITS.ref_length) -> tuple[str, ...]:
    """Split a ref into its segments, refusing anything that could leave a search path.

    Nothing here touches the file system: a ref refused here never names a file.

    Raises:
        ToolNotFoundError: not a string, empty, longer than ``limit`` characters,
            absolute, with ``..``/``.``/empty segments, a segment longer than a
            file name may be, or characters no file name can hold.
    """
    if not isinstance(ref, str) or not ref:
        got = "an empty string" if isinstance(ref, str) else type(ref).__name__
        raise ToolNotFoundError(reprlib.repr(ref), reason=f"a ref must be a non-empty string, not {got}")
    if len(ref) > limit:
        raise ToolNotFoundError(shown(ref), reason=f"a ref may be at most {limit} characters (Limits.ref_length)")
    if "\x00" in ref:
        raise ToolNotFoundError(shown(ref), reason="a ref may not contain NUL")
    if "\\" in ref or ref.startswith("/") or os.path.isabs(ref):
        raise ToolNotFoundError(ref, reason="refs are relative names like 'team/summarize'")
    parts = tuple(ref.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise ToolNotFoundError(ref, reason="refs may not contain '..', '.' or empty segments")
    try:
        encoded = os.fsencode(ref)
    except UnicodeError:
        raise ToolNotFoundError(ref, reason="a ref must be text a file name can hold") from None
    if len(encoded) > NAME_MAX and any(len(part) > NAME_MAX for part in encoded.split(b"/")):
        raise ToolNotFoundError(shown(ref), reason=f"each segment of a ref may be at most {NAME_MAX} bytes")
    return parts


class Registry:
    """Finds and caches tools; owns every cache that depends on files."""

    def __init__(
        self,
        paths: Iterable[SearchPath],
        frozen: Iterable[Path] = (),
        limits: Limits = DEFAULT_LIMITS,
        formats: Any = None,
    ) -> None:
        self.paths = tuple(paths)
        self.limits = limits
        self.formats = formats
        # Folders never watched (an installed package's built-ins): paths below them are not stat-ed.
        self.frozen = tuple(str(folder) for folder in frozen)
        self._frozen_below = tuple(os.path.join(folder, "") for folder in self.frozen)
        self.functions: dict[str, Tool] = {}
        self.derived: dict[str, dict[Any, Any]] = {name: {} for name in self._HOT}
        self.generation = 0
        # Parsed files by (path, kind): (signature, Tool / Authority / the error), at most FILES_BOUND.
        self._files: dict[tuple[str, Hashable], tuple[Signature, Any]] = {}
        # The signature each watched file or folder had when last stat-ed, at most SEEN_BOUND.
        self._seen: dict[str, Signature] = {}
        # (path, search path) -> (the parsed Tool, it as found through that path), at most FILES_BOUND.
        self._variants: dict[tuple[str, SearchPath], tuple[Tool, Tool]] = {}

    # -- change tracking -------------------------------------------------

    def cache(self, name: str) -> dict[Any, Any]:
        """A derived cache, emptied whenever any watched file or folder changes (``DERIVED_BOUND`` entries)."""
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
        self._variants.clear()
        self.changed()

    def watch(self, paths: Iterable[str], checked: set[str] | None = None) -> bool:
        """Stat each path (once per run); return False, dropping derived caches, if any changed.

        Any change empties every derived cache, so a cached value whose paths
        were all seen in this run is fresh: only the unseen ones are stat-ed.

        Invariant: every path a live derived value depends on has its
        signature in ``_seen``. So when ``_seen`` is full it is emptied with
        every derived cache, and a path this run already checked but
        ``_seen`` no longer holds is stat-ed again.
        """
        if checked is not None and isinstance(paths, frozenset):
            # Only cached values' paths come as a frozenset: by the invariant they are all in _seen.
            paths = paths - checked
            if not paths:
                return True
        fresh = True
        seen = self._seen
        for path in paths:
            if self.frozen and (path.startswith(self._frozen_below) or path in self.frozen):
                continue
            if checked is not None:
                if path in checked:
                    if path not in seen:
                        self._remember(path, signature(path))
                    continue
                checked.add(path)
            now = signature(path)
            if path not in seen:
                if not self._remember(path, now):
                    fresh = False
            elif seen[path] != now:
                seen[path] = now
                fresh = False
        if not fresh:
            self.changed()
        return fresh

    def _remember(self, path: str, now: Signature) -> bool:
        """Record a first signature; False when ``_seen`` was full and had to be emptied (derived caches too)."""
        full = len(self._seen) >= SEEN_BOUND
        if full:
            self._seen.clear()
            self.changed()
        self._seen[path] = now
        return not full

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
        generation = self.generation
        deps: set[str] = set()
        value = compute(deps)
        if checked is not None:
            checked.update(deps)
        if self.generation == generation:
            # Else something changed (or _seen was emptied) while computing: the value may mix old and new.
            self.store(name, key, [value, frozenset(deps), checked])
        return value

    def store(self, name: str, key: Any, value: Any) -> None:
        """Put ``value`` in the derived cache ``name``; a full cache first drops its oldest half."""
        cache = self.cache(name)
        if len(cache) >= DERIVED_BOUND and key not in cache:
            _drop_oldest_half(cache)
        cache[key] = value

    # -- loading ----------------------------------------------------------

    def load(
        self, path: Path, loader: Callable[[Path], T], checked: set[str] | None = None, kind: Hashable = "tool"
    ) -> T:
        """Load ``path`` with ``loader``, cached by (mtime, size); a failure is cached too.

        ``kind`` keeps apart what one file is loaded as (a tool, an authority)
        and anything else the loader's result depends on besides the file.

        Raises:
            ToolDefinitionError: the file is malformed (re-raised from the cache).
        """
        name = str(path)
        self.watch((name,), checked)
        sig = self._seen.get(name)
        key = (name, kind)
        entry = self._files.get(key)
        if entry is None or entry[0] != sig:
            try:
                value: Any = loader(path)
            except ToolDefinitionError as exc:
                value = exc
            if entry is None and len(self._files) >= FILES_BOUND:
                _drop_oldest_half(self._files)
            entry = self._files[key] = (sig, value)
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
        if type(ref) is not str:
            check_ref(ref)  # refused before it is hashed into a cache key
        return self.memo("refs", (ref, paths), lambda deps: self._locate(ref, paths, deps), checked)

    def _locate(self, ref: str, paths: tuple[SearchPath, ...], deps: set[str]) -> tuple[Path, SearchPath] | None:
        parts = check_ref(ref, self.limits.ref_length)
        folders = [sp.root.joinpath(*parts[:-1]) for sp in paths]
        # The folders, not the files: adding or removing a file changes its folder.
        self.watch([str(f) for f in folders], deps)
        found = None
        for sp, folder in zip(paths, folders, strict=True):
            for ext in (".md", ".py") if sp.trusted else (".md",):
                candidate = folder / (parts[-1] + ext)
                if candidate.name in RESERVED or not is_file(candidate):
                    continue
                try:
                    real = candidate.resolve()
                except (OSError, ValueError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
                    continue
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
        if type(ref) is not str:
            check_ref(ref)  # refused before it is hashed into a cache key
        tool = self.functions.get(ref)
        if tool is not None:
            return tool
        found = self.derived["tools"].get((ref, paths))
        if found is not None and checked is not None and found[1] is checked:
            return found[0]  # type: ignore[no-any-return]  # already validated in this run
        hit = self.locate(ref, paths, checked)
        if hit is None:
            raise ToolNotFoundError(shown(ref), [sp.root for sp in paths])
        path, sp = hit
        try:
            tool = self.load(path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits), checked)
        except ToolDefinitionError:
            if not is_file(path):  # deleted between finding and reading it: as if it had not been found
                raise ToolNotFoundError(shown(ref), [sp.root for sp in paths]) from None
            raise
        if tool.root != sp.root or tool.trusted != sp.trusted:
            tool = self._as_found(path, tool, sp)
        self.store("tools", (ref, paths), [tool, checked])
        return tool

    def _as_found(self, path: Path, parsed: Tool, sp: SearchPath) -> Tool:
        """``parsed`` (first found through another search path) with ``sp``'s root and trust.

        The file is parsed (a python tool imported) once; only where it was
        found differs, and with it the authority and trust. One Tool per
        (file, search path) while the file is unchanged.
        """
        key = (str(path), sp)
        entry = self._variants.get(key)
        if entry is None or entry[0] is not parsed:
            if entry is None and len(self._variants) >= FILES_BOUND:
                _drop_oldest_half(self._variants)
            entry = self._variants[key] = (parsed, replace(parsed, root=sp.root, trusted=sp.trusted))
        return entry[1]

    def exists(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> bool:
        """True when ``ref`` names a tool (without parsing it)."""
        if type(ref) is not str:
            return False
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
            if not _is_dir(sp.root):
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


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _drop_oldest_half(cache: dict[Any, Any]) -> None:
    """Drop the older half of a dict (insertion order): it is full."""
    for key in list(islice(cache, (len(cache) + 1) // 2)):
        del cache[key]
