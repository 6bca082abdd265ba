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

A found tool is cached like a derived value, with the folders its ref was
resolved in and its file: a later run verifies those (O(1) once verified
within the interval, or under notifications) instead of looking it up
again. A read-only pass (``check``, through ``snapshot()``) also keeps its
misses: a ref it did not find once is not looked for again in that pass.

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

Every bound follows the catalogue: a listing that counts more files and
folders than they hold raises them (and the freshness bookkeeping's bound)
to ``GROWTH`` times that count, ``BOUND_CEILING`` at most, before anything is
parsed, so a warm ``list`` of 100,000 tools re-parses and re-plans nothing.
What a listing may count is bounded in turn: a search path holding more
than ``Limits.folder_files`` files and folders stops the listing with a
``FolderLimitError`` naming it, after reading at most that many entries.
A lookup scans only its ref's own folder, so calls to tools elsewhere in
such a search path still work; a lookup in a folder that itself holds more
than the limit fails with the same error.

**Threads.** One registry may be shared by any number of threads: request
threads of a web app, a listing on a worker thread, sync tool bodies that
call ``ctx.manager``. It owns one ``RLock`` (``lock``), shared with its
``Freshness`` and used by the planner through ``current``. Reads of a
cached value take no lock: every cache entry is one dict item, replaced
whole (a tuple, or a memo's ``[value, deps, run]`` list whose ``run`` is
only a hint), and a single dict read is atomic, so a reader sees an old
entry or a new one, never half of one. Everything else holds the lock:
every trim and every insert into a trimmed cache (a trim iterates the dict),
the stat signatures and the freshness bookkeeping (``watch``: stat, mark,
record and drop the derived caches as one step), dropping every derived
cache with the generation (``changed``), and storing a derived value, which
is refused when the generation moved while it was computed (a value made
from files that changed meanwhile never lands after the caches were
dropped). A cached value read before another thread dropped the caches is
not served (``current`` compares the generation), so no thread serves a
file's previous version once any thread has seen the edit. Computing a value
(parsing, planning) holds no lock: a listing never blocks calls. The read-only pass of ``check`` (``reading``) and the on-disk
index a listing uses (``indexing``) belong to the thread that started them;
one listing at a time uses the index, a concurrent one computes without it.

**Names.** A tool's ``name`` in its frontmatter is its name: the declared
name replaces the file's stem and the folder stays part of the ref
(``team/sum.md`` with ``name: summarize`` is ``team/summarize``). Within a
search path a declared name wins over a stem; a stem (or path) still finds
its file when no other tool there claims it as a name; across search paths
the first match wins, as always. Each folder's declared names are indexed
when it is first looked up (``names`` derived cache: one folder stat per
lookup, as before); files of other formats in their location trees
(``.claude/agents``, ...) belong to the search path's top level. A declared
name edited in place is seen when its folder changes, when the index is
rebuilt after any change, or when a lookup of it finds nothing.

**The on-disk index.** A full listing (``discover(parse=True)`` over the
registry's own search paths, as ``list`` and ``check`` do) reads and writes
``orchestrator.index``: a new registry's ``names`` and ``described`` lookups
are served from it when every file and folder they came from is unchanged,
and what the listing computed is written for the next process.

A cached value's paths join the ``checked`` set of whatever reuses it, so a
value computed from another (a row of ``list`` from a plan an invocation
cached) depends on every file behind both, and each written index entry
carries every path it depends on.
"""

from __future__ import annotations

import os
import reprlib
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .errors import FolderLimitError, OrchestratorError, ToolDefinitionError, ToolNotFoundError
from .limits import DEFAULT_LIMITS, Limits
from .loader import load_tool, read_name, read_python_name
from .tool import Tool

T = TypeVar("T")

_PACKAGE = Path(__file__).resolve().parent

FILES_BOUND = 4_096
SEEN_BOUND = 16_384
DERIVED_BOUND = 4_096
GROWTH = 2  # bounds grow to this many times the files a listing counted ...
BOUND_CEILING = 1_000_000  # ... and never past this
NAME_MAX = 255  # bytes in one file or folder name (ext4, APFS, NTFS alike)
SUGGESTIONS = 3  # refs one "did you mean" names at most

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


class _PerThread(threading.local):
    """What belongs to the thread that started it: a read-only pass, the index a listing uses."""

    reading: Snapshot | None = None
    indexing: Any = None


class Snapshot(set[str]):
    """The ``checked`` set of a run that only reads files (``check``): a ref it missed once stays missed.

    An invocation's run may write a tool and then call it, so each miss
    there looks at the ref's folders again (``Registry._find_file``). A
    snapshot writes nothing, so its second miss of a ref repeats the first
    answer instead of scanning the same folders again (thousands of times
    over a catalog whose tools share metadata keys such as ``params``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.missed: dict[tuple[str, tuple[SearchPath, ...]], ToolNotFoundError] = {}
        # Anything else the pass computes once (``check``: each middleware's params, by ref).
        self.values: dict[Hashable, Any] = {}


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
        from .freshness import INTERVAL, Freshness  # noqa: PLC0415 (H8's lines: no edit of the shared imports)

        # The one lock of every cache here, the planner's and the freshness bookkeeping's (see Threads).
        self.lock = threading.RLock()
        # Which remembered paths need a stat: notifications over the roots, else at most one stat per interval.
        self.freshness = Freshness(
            (sp.folder for sp in self.paths),
            self.frozen,
            getattr(limits, "stat_interval", INTERVAL),
            lock=self.lock,
        )
        self.functions: dict[str, Tool] = {}
        self.derived: dict[str, dict[Any, Any]] = {name: {} for name in self._HOT}
        self.generation = 0
        # Parsed files by (path, kind): (signature, Tool / Authority / the error), at most FILES_BOUND.
        self._files: dict[tuple[str, Hashable], tuple[Signature, Any]] = {}
        # The signature each watched file or folder had when last stat-ed, at most SEEN_BOUND.
        self._seen: dict[str, Signature] = {}
        # (path, search path) -> (the parsed Tool, it as found through that path), at most FILES_BOUND.
        self._variants: dict[tuple[str, SearchPath], tuple[Tool, Tool]] = {}
        # The bounds in force: the module's, raised when a listing counts more files (see GROWTH).
        self.files_bound = FILES_BOUND
        self.derived_bound = DERIVED_BOUND
        self.seen_bound = SEEN_BOUND
        self._thread = _PerThread()
        self._index_busy = False  # a listing on some thread uses the on-disk index
        # The name each markdown/python file declares, by path: (signature, name or None).
        self._declared: dict[str, tuple[Signature, str | None]] = {}
        # The freshness epoch in which each _declared signature was last confirmed by a stat (_names_stale).
        self._names_confirmed: dict[str, int] = {}
        # The files of a folder a miss looked in, by folder path: (its signature, the file paths).
        self._listings: dict[str, tuple[Signature, tuple[str, ...]]] = {}
        # The format each file an index saw is read with, by (path, search path): facts about paths, never stale.
        self._file_formats: dict[tuple[Path, SearchPath], Any] = {}
        # The formats each search path folder reads (orchestrator.formats.select), made on first need.
        self._formats: dict[str, Any] | None = None
        # The on-disk index (orchestrator.index): opened by the first listing; _OFF when off or impossible.
        self.index: Any = None
        if formats is not None:
            self.selection()  # a bad format name is the program's mistake: say so now

    @property
    def reading(self) -> Snapshot | None:
        """The read-only pass this thread runs (``snapshot``), if any."""
        return self._thread.reading

    @reading.setter
    def reading(self, run: Snapshot | None) -> None:
        self._thread.reading = run

    @property
    def indexing(self) -> Any:
        """The index while this thread's listing runs: memo() serves its entries, and a hit's paths join ``checked``."""
        return self._thread.indexing

    @indexing.setter
    def indexing(self, index: Any) -> None:
        self._thread.indexing = index

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """A read-only pass (``check``): within it, every lookup's misses are final, whatever set it passes.

        Lookups nested in cached computations pass their own ``checked``
        sets; this makes their repeated misses of one ref (a catalog's
        shared ``params`` key, once per tool) cost one look, not one each.
        """
        outer = self.reading
        run = self.reading = outer if outer is not None else Snapshot()
        try:
            yield run
        finally:
            self.reading = outer

    # -- change tracking -------------------------------------------------

    def cache(self, name: str) -> dict[Any, Any]:
        """A derived cache, emptied whenever any watched file or folder changes (``DERIVED_BOUND`` entries)."""
        found = self.derived.get(name)
        if found is None:
            found = self.derived.setdefault(name, {})  # one dict per name, whichever thread came first
        return found

    # The caches the hot path reads, made once so lookups skip cache().
    _HOT = ("refs", "tools", "plans", "scc", "toolkeys", "static-chains", "resolved", "names")

    def changed(self) -> None:
        """Drop every derived cache (a file, folder or registration changed)."""
        with self.lock:
            self.generation += 1
            for cache in list(self.derived.values()):
                cache.clear()

    def clear(self) -> None:
        """Drop every cache, parsed files included."""
        with self.lock:
            self._files.clear()
            self._seen.clear()
            self._variants.clear()
            self._declared.clear()
            self._names_confirmed.clear()
            self._listings.clear()
            self._file_formats.clear()
            self.freshness.reset()
            if self.index is not None and self.index is not _OFF:
                self.index.drop()  # "forget everything" includes what the last listing wrote for the next process
            self.changed()

    def watch(self, paths: Iterable[str] | None = None, checked: set[str] | None = None, *, now: bool = False) -> bool:
        """Check ``paths`` for changes; return False, dropping derived caches, if any changed.

        Which paths are stat-ed is ``self.freshness``'s call: none below a
        root that file notifications cover (a notification names what
        changed, and only that is stat-ed), the others at most once per
        interval, and each at most once per run (``checked``). A frozenset is
        the paths of a cached value: verified in O(1) when notifications
        cover them all or they were verified within the interval. With no
        ``paths``, every remembered path is stat-ed now (``Manager.refresh()``);
        ``now=True`` stats the given ``paths`` whatever was seen (a miss
        looking at its folders before saying "not found").

        Invariant: every path a live derived value depends on has its
        signature in ``_seen``. So when ``_seen`` is full it is emptied with
        every derived cache, and a path this run already checked but
        ``_seen`` no longer holds is stat-ed again.
        """
        with self.lock:
            return self._watch(paths, checked, now)

    def current(self, deps: frozenset[str], checked: set[str] | None, generation: int) -> bool:
        """True when a cached value read at ``generation``, computed from ``deps``, may be served.

        Its files are unchanged (``watch``) and no thread dropped the caches
        since it was read: a thread that saw one of its files change marks
        the file looked-at before this one looks, so without the generation
        this lookup would trust the stat the other thread made and serve the
        value that stat outdated (issue 24's stale read).
        """
        with self.lock:
            return self._watch(deps, checked, False) and self.generation == generation

    def _watch(self, paths: Iterable[str] | None, checked: set[str] | None, now: bool) -> bool:
        freshness = self.freshness
        seen = self._seen
        fresh = freshness.settle(seen, self.generation, signature)
        if paths is None:
            fresh = freshness.everything(seen, signature) and fresh
        elif isinstance(paths, frozenset):
            fresh = freshness.verify(paths, seen, signature) and fresh
        else:
            for path in paths:
                if self.frozen and (path.startswith(self._frozen_below) or path in self.frozen):
                    continue
                if checked is not None:
                    if path in checked and not now:
                        if path not in seen:
                            self._remember(path, signature(path))
                        continue
                    checked.add(path)
                held = seen.get(path, UNSEEN)
                if held is not UNSEEN:
                    if not now and freshness.current(path):
                        continue
                    found = signature(path)
                    freshness.stamp(path)
                    if held != found:
                        seen[path] = found
                        fresh = False
                elif not self._remember(path, signature(path)):
                    fresh = False
        if not fresh:
            self.changed()
        return fresh

    def _remember(self, path: str, now: Signature) -> bool:
        """Record a first signature; False when ``_seen`` was full and had to be emptied (derived caches too)."""
        with self.lock:
            full = len(self._seen) >= self.seen_bound
            if full:
                self._seen.clear()
                self.changed()
            self._seen[path] = now
            self.freshness.stamp(path)
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
        generation = self.generation
        hit = cache.get(key)
        if hit is not None:
            if checked is not None and hit[2] is checked:
                return hit[0]  # type: ignore[no-any-return]
            if self.current(hit[1], checked, generation):
                hit[2] = checked
                if checked is not None:
                    # A value computed from this one depends on its files too (once per run: the check above).
                    checked.update(hit[1])
                return hit[0]  # type: ignore[no-any-return]
        generation = self.generation
        indexing = self.indexing
        if indexing is not None and name in _INDEXED:
            served = indexing.lookup(self, name, key, checked)
            if served is not UNSEEN:
                return served  # type: ignore[no-any-return]
        deps: set[str] = set()
        value = compute(deps)
        if checked is not None:
            checked.update(deps)
        # Not stored when something changed (or _seen was emptied) while computing: the value may mix old and new.
        if self.store(name, key, [value, frozenset(deps), checked], generation):
            if indexing is not None and name in _INDEXED:
                indexing.computed(self, name, key)
        return value

    def seen(self, path: str) -> Signature | Any:
        """The signature ``path`` had when last looked at, or ``UNSEEN``."""
        return self._seen.get(path, UNSEEN)

    def declared_signatures(self) -> dict[str, Signature]:
        """The signature of each file whose declared name is cached, when it was read."""
        with self.lock:
            return {path: held[0] for path, held in self._declared.items()}

    def _put(self, cache: dict[Any, Any], key: Any, value: Any) -> None:
        """``cache[key] = value``, a full cache first dropping its oldest half (``files_bound``).

        Under the lock: a trim iterates the dict, and an insert by another
        thread meanwhile would stop it with "dictionary changed size".
        """
        with self.lock:
            if len(cache) >= self.files_bound and key not in cache:
                _drop_oldest_half(cache)
            cache[key] = value

    def store(self, name: str, key: Any, value: Any, generation: int | None = None) -> bool:
        """Put ``value`` in the derived cache ``name``; a full cache first drops its oldest half.

        With ``generation`` (``self.generation`` when the value's computation
        began) nothing is stored, and False returned, once the caches were
        dropped since: on any thread, something the value was made from changed.
        """
        cache = self.cache(name)
        with self.lock:
            if generation is not None and generation != self.generation:
                return False
            if len(cache) >= self.derived_bound and key not in cache:
                _drop_oldest_half(cache)
            cache[key] = value
        return True

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
            entry = (sig, value)
            self._put(self._files, key, entry)
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
        prefix, last = parts[:-1], parts[-1]
        for sp in paths:
            hit = self.names(sp, prefix, deps).refs.get(last)
            if hit is None:
                continue
            candidate = hit[0]
            try:
                real = candidate.resolve()
            except (OSError, ValueError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
                continue
            if not real.is_relative_to(sp.root):
                raise ToolNotFoundError(ref, [sp.root], reason=f"{candidate} resolves outside its search path")
            return candidate, sp
        return None

    # -- names and formats -------------------------------------------------

    def selection(self) -> dict[str, tuple[Any, ...]]:
        """The formats each search path folder reads: ``orchestrator.formats.select`` of ``formats``.

        Raises:
            ConfigurationError: an unknown format name or a malformed ``formats``.
        """
        if self._formats is None:
            from .formats import select  # only when a lookup first needs it: keeps import cheap

            self._formats = select(self.formats, (sp.folder for sp in self.paths if not self._builtin(sp)))
        return self._formats

    def _builtin(self, sp: SearchPath) -> bool:
        """True for the built-in tools folder: it reads no other format and declares no other names."""
        return sp.folder == _builtin_tools()

    def formats_for(self, sp: SearchPath) -> tuple[Any, ...]:
        """The formats search path ``sp`` reads (none in the built-in folder).

        A folder the program did not list (added by ``paths`` metadata)
        reads what a list of names applies to every folder, else every format.
        """
        if self._builtin(sp):
            return ()
        chosen = self.selection()
        found = chosen.get(sp.folder)
        if found is None:
            from .formats import select

            option = None if isinstance(self.formats, Mapping) else self.formats
            found = select(option, (sp.folder,))[sp.folder]
            if len(chosen) < self.derived_bound:
                chosen[sp.folder] = found
        return found

    def names(
        self, sp: SearchPath, prefix: tuple[str, ...], checked: set[str] | None = None, *, parse: bool = False
    ) -> Names:
        """The refs one folder of ``sp`` offers (``prefix`` its segments): declared names, then stems.

        The search path's top level also holds the tools of other formats'
        location trees (``.claude/agents`` ...), by the names their adapters give.
        ``parse`` (a listing, which parses every file anyway) reads names by
        parsing the files into the cache, so each file is opened once.
        """
        key = (sp, prefix)
        names = self.memo("names", key, lambda deps: self._scan(sp, prefix, deps, parse), checked)
        if checked is not None:
            entry = self.derived["names"].get(key)
            if entry is not None:
                checked.update(entry[1])  # the folders it depends on belong to whatever used it
        return names

    def _scan(self, sp: SearchPath, prefix: tuple[str, ...], deps: set[str], parse: bool = False) -> Names:
        from .formats import in_location, location_trees, recognise

        fmts = self.formats_for(sp)
        folder = sp.root.joinpath(*prefix)
        # The folder, not its files: adding or removing a file changes its folder.
        self.watch([str(folder)], deps)
        builtin = self._builtin(sp)
        # Inside a location tree (a skill's folder ...) only that format's files are tools.
        marker = folder / "_"
        trees = [fmt for fmt in fmts if any(in_location(marker, loc) for loc in getattr(fmt, "locations", ()))]
        declared: dict[str, tuple[Path, str | None]] = {}
        clashes: list[tuple[str, Path, Path, str]] = []
        stems: list[tuple[int, str, Path, str | None]] = []

        def claim(name: str, path: Path, fmt: str | None) -> None:
            held = declared.get(name)
            if held is None:
                declared[name] = (path, fmt)
            elif held[0] != path:
                clashes.append((name, held[0], path, "name"))

        count = 0
        # The files whose declared names this scan reads: a listing's index re-reads the folder when one changes.
        read: list[str] | None = [] if self.indexing is not None else None
        seen_formats: dict[tuple[Path, SearchPath], Any] = {}
        for entry in _files_in(folder, self.limits.folder_files):
            path = Path(entry.path)
            # Never read a file outside the search path, not even for its name: found by its stem, it is refused.
            outside = entry.is_symlink() and not _inside(path, sp.root)
            fmt = recognise(path, sp.root, fmts) if fmts and not outside else None
            seen_formats[(path, sp)] = fmt
            if fmt is None:
                if trees:
                    continue  # a resource beside a skill, a note in .claude/agents: never a tool
                stem, ext = os.path.splitext(entry.name)
                if ext not in (".md", ".py") or (ext == ".py" and not sp.trusted):
                    continue
                count += 1
                name = None if builtin or outside else self._declared_name(path, ext, sp if parse else None)
                if read is not None and not (builtin or outside):
                    read.append(entry.path)
                if name is not None and _usable(name):  # else loading it reports the bad name
                    claim(name, path, None)
                stems.append((0 if ext == ".md" else 1, stem, path, None))
                continue
            count += 1
            stem = _strip_suffix(entry.name, getattr(fmt, "suffixes", ()))
            if not any(in_location(path, loc) for loc in getattr(fmt, "locations", ())):  # else named at the top
                named = self._format_name(path, sp, fmt, deps)
                if named != stem:  # a name of its own; its stem alone ranks after our own files' stems
                    claim(named, path, fmt.name)
            stems.append((2, stem, path, fmt.name))
        if not prefix:
            for tree, fmt in location_trees(sp.root, fmts):
                for path in self._walk_tree(sp.root, tree, deps):
                    if recognise(path, sp.root, (fmt,)) is fmt:
                        seen_formats[(path, sp)] = fmt
                        count += 1
                        claim(self._format_name(path, sp, fmt, deps), path, fmt.name)
        with self.lock:  # what this scan saw, added at once (a trim iterates the dict)
            if len(self._file_formats) + len(seen_formats) > self.files_bound:
                _drop_oldest_half(self._file_formats)
            self._file_formats.update(seen_formats)
        if read is not None:
            self.indexing.scanned[str(folder)] = tuple(read)
        refs = dict(declared)
        for _rank, stem, path, fmt_name in sorted(stems, key=lambda item: item[0]):
            held = refs.get(stem)
            if held is None:
                refs[stem] = (path, fmt_name)
            elif stem in declared and held[0] != path:
                clashes.append((stem, held[0], path, "stem"))
        return Names(refs, tuple(clashes), count)

    def _declared_name(self, path: Path, ext: str, parse: SearchPath | None = None) -> str | None:
        """The name a markdown or python file declares, cached by its signature.

        With ``parse`` (the search path it is found through) the file is
        loaded into the parse cache and its frontmatter read; else only the
        name is read (a python file is parsed, never run).
        """
        key = str(path)
        now = signature(key)
        held = self._declared.get(key)
        if held is not None and held[0] == now:
            return held[1]
        if parse is not None:
            try:
                declared = self.load_format(path, parse, None).frontmatter.get("name")
            except ToolDefinitionError:
                declared = None
            name = declared if isinstance(declared, str) else None
        else:
            name = read_python_name(path, self.limits) if ext == ".py" else read_name(path, self.limits)
        self._put(self._declared, key, (now, name))
        return name

    def _format_name(self, path: Path, sp: SearchPath, fmt: Any, deps: set[str]) -> str:
        """The name another format's file has: its adapter's, else (a broken file) the one its location gives."""
        try:
            return self.load_format(path, sp, fmt, deps).name
        except ToolDefinitionError:
            derived = getattr(fmt, "derived_name", None)
            if callable(derived):
                return str(derived(path))
            if path.name == "SKILL.md":
                return path.parent.name
            return _strip_suffix(path.name, (*getattr(fmt, "suffixes", ()), ".md"))

    def load_format(self, path: Path, sp: SearchPath, fmt: Any, checked: set[str] | None = None) -> Tool:
        """Load a tool file found through ``sp``: ours when ``fmt`` is None, else through its adapter (cached).

        Raises:
            ToolDefinitionError: the file is malformed.
        """
        if fmt is None:
            return self.load(path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits), checked)
        return self.load(
            path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits, fmt), checked, ("tool", fmt.name)
        )

    def _walk_tree(self, root: Path, tree: Path, deps: set[str]) -> Iterator[Path]:
        """The files of a location tree, sorted; its folders (and the existing ones above it) become ``deps``."""
        try:
            rel = tree.relative_to(root).parts
        except ValueError:
            rel = ()
        current = root
        for part in rel:  # a missing folder's creation changes its parent, which is already watched
            current = current / part
            if not _is_dir(current):
                return
            self.watch([str(current)], deps)
        limit = self.limits.folder_files
        count = 0
        for folder, dirs, files in os.walk(tree):
            count += len(dirs) + len(files)
            if count > limit:
                raise FolderLimitError(str(tree), limit)
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            if folder != str(tree):
                self.watch([folder], deps)
            for file in sorted(files):
                yield Path(folder, file)

    def format_of(self, path: Path, sp: SearchPath) -> Any:
        """The format ``path`` (found through ``sp``) is read with, or None for our own tools."""
        known = self._file_formats.get((path, sp), _UNKNOWN)  # what the folder's index saw
        if known is not _UNKNOWN:
            return known
        fmts = self.formats_for(sp)
        if not fmts:
            return None
        from .formats import recognise

        return recognise(path, sp.root, fmts)

    def _names_stale(self, ref: str, paths: tuple[SearchPath, ...]) -> bool:
        """After a miss: has any file of the folders ``ref`` was looked for in changed its declared name?

        A name edited in place does not change the folder's signature; this
        costs a stat per file of those folders, on misses only, at most once
        per file per stat interval (a cold run that misses a name for every
        tool it plans stat-ed every file on every miss).
        """
        try:
            prefix = check_ref(ref, self.limits.ref_length)[:-1]
        except ToolNotFoundError:
            return False
        epoch = self.freshness.epoch
        confirmed = self._names_confirmed
        for sp in paths:
            if self._builtin(sp):
                continue
            for path in self._listing(str(sp.root.joinpath(*prefix))):
                held = self._declared.get(path)
                if held is None or confirmed.get(path) == epoch:
                    continue
                if held[0] != signature(path):
                    return True
                if len(confirmed) >= self.files_bound:
                    confirmed.clear()  # only an optimisation: a missing mark costs one more stat
                confirmed[path] = epoch
        return False

    def _listing(self, folder: str) -> tuple[str, ...]:
        """The paths of the files ``_files_in(folder)`` finds, cached by the folder's signature.

        Adding, removing or renaming a file changes its folder's signature,
        so one stat of the folder replaces reading it again on every miss.
        """
        now = signature(folder)
        held = self._listings.get(folder)
        if held is not None and held[0] == now and now is not None:
            return held[1]
        files = tuple(entry.path for entry in _files_in(Path(folder), self.limits.folder_files))
        self._put(self._listings, folder, (now, files))
        return files

    def grow(self, files: int) -> None:
        """Raise every cache bound to hold ``files`` tools (a listing counted them): warm listings redo nothing.

        The stat signatures and the freshness bookkeeping (a stamp per path, a
        verification per cached value) grow too: when either was emptied by a
        listing's own paths, every listing re-planned every tool.
        """
        want = min(BOUND_CEILING, GROWTH * files)
        if want > self.files_bound:
            self.files_bound = want
        if want > self.derived_bound:
            self.derived_bound = want
        if want > self.seen_bound:
            self.seen_bound = want
        if want > self.freshness.bound:
            self.freshness.bound = want

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
        generation = self.generation
        found = self.derived["tools"].get((ref, paths))
        if found is not None:
            if checked is not None and found[-1] is checked:
                return found[0]  # type: ignore[no-any-return]  # already validated in this run
            # Else one check of the folders and file it came from, as a memo hit does (O(1) once verified).
            if len(found) == 3 and self.current(found[1], checked, generation):
                found[2] = checked
                if checked is not None:
                    checked.update(found[1])
                return found[0]  # type: ignore[no-any-return]
        generation = self.generation
        snapshot = checked if type(checked) is Snapshot else self.reading
        if snapshot is not None:
            missed = snapshot.missed.get((ref, paths))
            if missed is not None:
                raise missed.with_traceback(None)  # as the cache of failed loads does; no growing traceback
            try:
                tool, path, sp = self._find_file(ref, paths, checked)
            except ToolNotFoundError as exc:
                snapshot.missed[(ref, paths)] = exc
                raise
        else:
            tool, path, sp = self._find_file(ref, paths, checked)
        if tool.root != sp.root or tool.trusted != sp.trusted:
            tool = self._as_found(path, tool, sp)
        located = self.derived["refs"].get((ref, paths))
        # As a memo entry, [tool, deps, run]: the folders its ref was resolved in and the file. Without the
        # ref's entry (dropped while loading) only [tool, run]: valid for this run alone.
        entry = [tool, located[1] | {str(path)}, checked] if located is not None else [tool, checked]
        self.store("tools", (ref, paths), entry, generation)
        return tool

    def _find_file(
        self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None, again: bool = True
    ) -> tuple[Tool, Path, SearchPath]:
        """Locate and load ``ref``; once, index again when a name was edited in place (see ``Names``).

        Raises:
            ToolNotFoundError: nothing matches.
            ToolDefinitionError: the matching file is malformed.
        """
        hit = self.locate(ref, paths, checked)
        if hit is None:
            if again and (self._folders_changed(ref, paths) or self._names_stale(ref, paths)):
                self.changed()  # a file just written, or a declared name edited in place: index again
                return self._find_file(ref, paths, checked, False)
            raise self.not_found(ref, paths)
        path, sp = hit
        fmt = self.format_of(path, sp)
        try:
            tool = self.load_format(path, sp, fmt, checked)
        except ToolDefinitionError:
            if not is_file(path):  # deleted between finding and reading it: as if it had not been found
                raise self.not_found(ref, paths) from None
            raise
        last = ref.rpartition("/")[2]
        if again and tool.name != last and _stem(path, fmt) != last:
            self.changed()  # found by a name the file no longer declares: index again
            return self._find_file(ref, paths, checked, False)
        return tool, path, sp

    def not_found(self, ref: str, paths: tuple[SearchPath, ...]) -> ToolNotFoundError:
        """The error for a ref no search path holds: its "did you mean" is looked for only if it is read."""
        return ToolNotFoundError(
            shown(ref), [sp.root for sp in paths], builtin=_builtin_tools(), near=lambda: self.suggest(ref, paths)
        )

    def suggest(self, ref: str, paths: tuple[SearchPath, ...]) -> list[str]:
        """Refs ``ref`` may have meant (``close_refs``), from what the registry lists: never an unbounded scan.

        Close spellings come from the ref's own folder in each search path
        (the names its lookup read); for a bare name, refs in subfolders
        ending in it (``ops/status``) from the folders a listing counts,
        ``Limits.folder_files`` entries per search path at most (a bigger one
        is passed over). Called only when a not-found error is read.
        """
        try:
            parts = check_ref(ref, self.limits.ref_length)
        except ToolNotFoundError:
            return []
        prefix, last = parts[:-1], parts[-1]
        refs: dict[str, None] = dict.fromkeys(n for n in self.functions if n.rpartition("/")[0] == "/".join(prefix))
        for sp in paths:
            try:
                refs.update(dict.fromkeys("/".join((*prefix, n)) for n in self.names(sp, prefix).refs))
                if prefix or self._builtin(sp) or not _is_dir(sp.root):
                    continue
                for rel in _folders(sp.folder, self.limits.folder_files)[0]:
                    if rel and last in self.names(sp, rel).refs:
                        refs["/".join((*rel, last))] = None
            except (OrchestratorError, OSError):
                continue  # a folder too big or unreadable: no suggestion from it
        return close_refs(ref, refs)

    def _folders_changed(self, ref: str, paths: tuple[SearchPath, ...]) -> bool:
        """After a miss: look at the ref's folders now (the program may have just written the file)."""
        try:
            prefix = check_ref(ref, self.limits.ref_length)[:-1]
        except ToolNotFoundError:
            return False
        return not self.watch([str(sp.root.joinpath(*prefix)) for sp in paths], None, now=True)

    def _as_found(self, path: Path, parsed: Tool, sp: SearchPath) -> Tool:
        """``parsed`` (first found through another search path) with ``sp``'s root and trust.

        The file is parsed (a python tool imported) once; only where it was
        found differs, and with it the authority and trust. One Tool per
        (file, search path) while the file is unchanged.
        """
        key = (str(path), sp)
        entry = self._variants.get(key)
        if entry is None or entry[0] is not parsed:
            entry = (parsed, replace(parsed, root=sp.root, trusted=sp.trusted))
            self._put(self._variants, key, entry)
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

    def discover(
        self, paths: tuple[SearchPath, ...], *, parse: bool = False
    ) -> Iterator[tuple[str, Path | None, SearchPath | None]]:
        """Every ref reachable through ``paths`` with the file it resolves to, first match wins.

        Registered functions come first (path None). A file is listed once,
        by its name (declared, else its stem), with its folder as a prefix;
        other formats' location trees are listed at their search path's top
        level. Only names are read (a frontmatter's ``name``, a python
        literal's, another format's adapter's); with ``parse`` (a listing
        that describes every tool anyway) our files are parsed into the
        cache instead, so each is opened once. The files counted first raise
        the cache bounds.

        A full listing (``parse``, the registry's own search paths) reads and
        writes the on-disk index (``orchestrator.index``) while it runs: its
        lookups of kept values are served from the index when their files are
        unchanged, and once the caller has taken (and described) every ref,
        what it computed is written for the next process.
        """
        index = self._listing_index(paths, parse)
        try:
            yield from self._discover(paths, parse)
            if index is not None:
                index.save(self)  # the caller described every ref it was given: write what it computed
        finally:
            if index is not None:
                self.indexing = None
                self._index_busy = False

    def _listing_index(self, paths: tuple[SearchPath, ...], parse: bool) -> Any:
        """The index a listing of ``paths`` reads and writes (now ``indexing``), or None.

        Only a full listing of the registry's own search paths with no
        registered functions (they shadow files) uses it, and never a listing
        nested in another or running beside another on a second thread.
        """
        if not parse or paths != self.paths or self.functions:
            return None
        with self.lock:
            if self._index_busy:
                return None
            if self.index is None:
                from .index import Index  # only listings pay for json, hashing and the cache folder

                self.index = Index.open(self) or _OFF
            if self.index is _OFF:
                return None
            self._index_busy = True
        self.index.begin()
        self.indexing = self.index
        return self.index

    def _discover(
        self, paths: tuple[SearchPath, ...], parse: bool
    ) -> Iterator[tuple[str, Path | None, SearchPath | None]]:
        found: list[tuple[str, Path | None, SearchPath | None]] = []
        seen: set[str] = set()
        for name in sorted(self.functions):
            seen.add(name)
            found.append((name, None, None))
        folders: list[tuple[SearchPath, tuple[str, ...]]] = []
        files = 0
        for sp in paths:
            if not _is_dir(sp.root):
                continue
            walked, counted = _folders(sp.folder, self.limits.folder_files)
            folders.extend((sp, rel) for rel in walked)
            files += counted
        self.grow(files)  # before anything is parsed: a listing's parses all stay cached
        listed: set[tuple[SearchPath, Path]] = set()
        for sp, rel in folders:
            names = self.names(sp, rel, parse=parse)
            for last, (path, _fmt) in names.refs.items():
                ref = "/".join((*rel, last))
                if (sp, path) in listed or ref in seen:
                    continue
                seen.add(ref)
                listed.add((sp, path))
                found.append((ref, path, sp))
        yield from found

    def clashes(self, paths: tuple[SearchPath, ...]) -> Iterator[tuple[SearchPath, str, Path, Path, str]]:
        """Names two files of one search path claim, and declared names that shadow another file's stem.

        Yields (search path, ref, the file that wins, the other, ``"name"`` or ``"stem"``).
        """
        for sp in paths:
            if not _is_dir(sp.root):
                continue
            for rel in _folders(sp.folder, self.limits.folder_files)[0]:
                for name, winner, loser, kind in self.names(sp, rel).clashes:
                    yield sp, "/".join((*rel, name)), winner, loser, kind


def close_refs(ref: str, refs: Iterable[str]) -> list[str]:
    """The refs of ``refs`` that ``ref`` may have meant, best first, ``SUGGESTIONS`` at most.

    A nested ref whose last segment is the bare ``ref`` (``status`` ->
    ``ops/status``), then close spellings (difflib's ratio).
    """
    import difflib  # only a miss needs it

    known = [r for r in refs if r != ref]
    nested = [r for r in known if "/" not in ref and r.rpartition("/")[2] == ref]
    close = difflib.get_close_matches(ref, known, n=SUGGESTIONS)
    return list(dict.fromkeys([*nested, *close]))[:SUGGESTIONS]


class Names(NamedTuple):
    """What one folder offers: refs (last segment -> (file, format name or None)), clashes, files counted."""

    refs: dict[str, tuple[Path, str | None]]
    clashes: tuple[tuple[str, Path, Path, str], ...]
    files: int


_UNKNOWN = object()
_OFF = object()  # Registry.index when there is none
UNSEEN: Any = object()  # Registry.seen() of a path never looked at
_INDEXED = frozenset({"names", "described"})  # orchestrator.index.PERSISTED, without importing it


@lru_cache(maxsize=1)
def _builtin_tools() -> str:
    return SearchPath.of(builtin_folder("tools")).folder


def _folders(root: str, limit: int) -> tuple[list[tuple[str, ...]], int]:
    """The folders a listing reads under ``root`` (``os.walk``'s order, hidden and ``_`` ones skipped) and the
    files and folders counted in them.

    Raises:
        FolderLimitError: more than ``limit`` entries; at most ``limit + 1`` are read.
    """
    found: list[tuple[str, ...]] = []
    count = 0
    todo: list[tuple[str, ...]] = [()]
    while todo:
        rel = todo.pop()
        below = []
        try:
            with os.scandir(os.path.join(root, *rel)) as entries:
                for entry in entries:
                    count += 1
                    if count > limit:
                        raise FolderLimitError(root, limit)
                    if not entry.name.startswith((".", "_")) and _entry_folder(entry):
                        below.append(entry.name)
        except (OSError, ValueError):
            continue  # unreadable: skipped, as os.walk skips it
        found.append(rel)
        below.sort(reverse=True)  # popped in name order: the preorder os.walk gives
        todo.extend((*rel, name) for name in below)
    return found, count


def _entry_folder(entry: os.DirEntry[str]) -> bool:
    """A folder a walk enters: not a symlink to one (``os.walk`` lists those but never follows them)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _files_in(folder: Path, limit: int) -> list[os.DirEntry[str]]:
    """The files of ``folder`` (symlinks to files included) that may be tools, sorted by name; [] if unreadable.

    Raises:
        FolderLimitError: ``folder`` holds more than ``limit`` entries (at most ``limit + 1`` are read).
    """
    found = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries, 1):
                if count > limit:
                    raise FolderLimitError(str(folder), limit)
                if entry.name not in RESERVED and not entry.name.startswith(".") and _entry_file(entry):
                    found.append(entry)
    except (OSError, ValueError):
        return []
    found.sort(key=lambda e: e.name)
    return found


def _entry_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, ValueError, RuntimeError):
        return False


def _strip_suffix(file: str, suffixes: Iterable[str]) -> str:
    """A file name without the longest of ``suffixes`` it ends with (else its last extension)."""
    for suffix in sorted(suffixes, key=len, reverse=True):
        if file.endswith(suffix) and len(file) > len(suffix):
            return file[: -len(suffix)]
    return os.path.splitext(file)[0]


def _usable(name: str) -> bool:
    """True for a declared name a ref can reach (``check_name`` says why another is not)."""
    return bool(name.strip()) and "/" not in name and "\\" not in name and ".." not in name


def _stem(path: Path, fmt: Any) -> str:
    return _strip_suffix(path.name, getattr(fmt, "suffixes", ()) if fmt is not None else ())


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _drop_oldest_half(cache: dict[Any, Any]) -> None:
    """Drop the older half of a dict (insertion order): it is full. Another thread may drop keys meanwhile."""
    for key in list(islice(cache, (len(cache) + 1) // 2)):
        cache.pop(key, None)
