"""The caches that follow file edits: one owner, one lock.

Parsed files are cached with their (mtime, size); every cache derived from
them (ref lookups, authorities, cascades, SCCs) lives in ``derived`` and is
dropped as a whole the moment any file or folder is seen to change. Within
one run (a top-level invocation and everything under it) each file and
folder is stat-ed at most once: ``checked`` carries what was seen.

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
cached value take no lock (nor does ``current`` when nothing is due): every cache entry is one dict item, replaced
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
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from . import searchpath
from .errors import ToolDefinitionError, ToolNotFoundError
from .freshness import INTERVAL, Freshness
from .limits import DEFAULT_LIMITS, Limits
from .searchpath import UNSEEN, SearchPath, Signature
from .tool import Tool

T = TypeVar("T")

FILES_BOUND = 4_096
SEEN_BOUND = 16_384
DERIVED_BOUND = 4_096
GROWTH = 2  # bounds grow to this many times the files a listing counted ...
BOUND_CEILING = 1_000_000  # ... and never past this

INDEX_OFF: Any = object()  # Caches.index when there is none
_INDEXED = frozenset({"names", "described"})  # orchestrator.index.PERSISTED, without importing it


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


class Caches:
    """Every cache that depends on files, the stat signatures and the freshness bookkeeping, under one lock.

    The base of ``Registry``: what is cached here knows nothing of refs or
    formats; ``memo`` caches any derived value with the paths it came from.
    """

    def __init__(
        self,
        paths: Iterable[SearchPath],
        frozen: Iterable[Path] = (),
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.paths = tuple(paths)
        self.limits = limits
        # Folders never watched (an installed package's built-ins): paths below them are not stat-ed.
        self.frozen = tuple(str(folder) for folder in frozen)
        self._frozen_below = tuple(os.path.join(folder, "") for folder in self.frozen)
        # The one lock of every cache here, the planner's and the freshness bookkeeping's (see Threads).
        self.lock = threading.RLock()
        # Which remembered paths need a stat: notifications over the roots, else at most one stat per interval.
        self.freshness = Freshness(
            (sp.folder for sp in self.paths),
            self.frozen,
            getattr(limits, "stat_interval", INTERVAL),
            lock=self.lock,
        )
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
        # The on-disk index (orchestrator.index): opened by the first listing; INDEX_OFF when off or impossible.
        self.index: Any = None

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
    _HOT = ("refs", "tools", "plans", "scc", "toolkeys", "compiled", "pipelines", "names")

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
            if self.index is not None and self.index is not INDEX_OFF:
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

    def look_all(self, paths: list[str]) -> list[Signature]:
        """``watch(paths)``, then each path's signature (``UNSEEN`` for a frozen one): what an index's rows are
        checked against.

        The paths a new registry never looked at (all of them, on a listing's
        first lookup) are stat-ed and remembered in one pass when there is room
        for them; otherwise each goes through ``watch`` as any path does.
        """
        with self.lock:
            seen = self._seen
            frozen = self.freshness.is_frozen
            new = [path for path in paths if not frozen(path)]
            if len(seen) + len(new) <= self.seen_bound and seen.keys().isdisjoint(new):
                if not self.freshness.settle(seen, self.generation, searchpath.signature):
                    self.changed()  # as watch: a remembered path (not one of these) changed
                look = searchpath.signature
                seen.update(zip(new, [look(path) for path in new], strict=True))
                self.freshness.stamp_all(new)
            else:
                self._watch(paths, None, False)
            return [seen.get(path, UNSEEN) for path in paths]

    def current(self, deps: frozenset[str], checked: set[str] | None, generation: int) -> bool:
        """True when a cached value read at ``generation``, computed from ``deps``, may be served.

        Its files are unchanged (``watch``) and no thread dropped the caches
        since it was read: a thread that saw one of its files change marks
        the file looked-at before this one looks, so without the generation
        this lookup would trust the stat the other thread made and serve the
        value that stat outdated (issue 24's stale read).

        Lock-free when nothing is due (``Freshness.quiet``): the paths were
        verified in this epoch and no notification waits. The generation is
        read last, so a thread that saw a change and dropped the caches
        while this lookup ran makes it take the lock like any other.
        """
        if type(deps) is frozenset and self.freshness.quiet(deps, generation) and self.generation == generation:
            return True
        with self.lock:
            return self._watch(deps, checked, False) and self.generation == generation

    def _watch(self, paths: Iterable[str] | None, checked: set[str] | None, now: bool) -> bool:
        freshness = self.freshness
        seen = self._seen
        fresh = freshness.settle(seen, self.generation, searchpath.signature)
        if paths is None:
            fresh = freshness.everything(seen, searchpath.signature) and fresh
        elif isinstance(paths, frozenset):
            fresh = freshness.verify(paths, seen, searchpath.signature) and fresh
        else:
            for path in paths:
                if self.frozen and (path.startswith(self._frozen_below) or path in self.frozen):
                    continue
                if checked is not None:
                    if path in checked and not now:
                        if path not in seen:
                            self._remember(path, searchpath.signature(path))
                        continue
                    checked.add(path)
                held = seen.get(path, UNSEEN)
                if held is not UNSEEN:
                    if not now and freshness.current(path):
                        continue
                    found = searchpath.signature(path)
                    freshness.stamp(path)
                    if held != found:
                        seen[path] = found
                        fresh = False
                elif not self._remember(path, searchpath.signature(path)):
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
                drop_oldest_half(cache)
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
                drop_oldest_half(cache)
            cache[key] = value
        return True

    def store_many(self, name: str, items: Iterable[tuple[Any, Any]], generation: int) -> bool:
        """``store`` of each (key, value) of ``items``, under one hold of the lock; nothing, and False, when the
        generation moved since ``generation`` (an index serving a listing's rows at once)."""
        cache = self.cache(name)
        with self.lock:
            if generation != self.generation:
                return False
            bound = self.derived_bound
            for key, value in items:
                if len(cache) >= bound and key not in cache:
                    drop_oldest_half(cache)
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


def drop_oldest_half(cache: dict[Any, Any]) -> None:
    """Drop the older half of a dict (insertion order): it is full. Another thread may drop keys meanwhile."""
    for key in list(islice(cache, (len(cache) + 1) // 2)):
        cache.pop(key, None)
