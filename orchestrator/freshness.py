"""Freshness: when a cached value must look at its files again.

A registry caches everything derived from tool and authority files, and each
cached value remembers the files and folders it was computed from. Looking
at all of them (``os.stat``) on every run costs time linear in the reachable
tool graph, so a ``Freshness`` decides which ones need a look:

- **Notifications.** Once a cached value is reused ``START_AFTER`` (1 s)
  or more after the registry's first lookup (a long-lived program; never
  while a listing runs, one long operation that would look like one), one
  watcher thread per registry follows the search-path roots recursively
  through ``watchfiles`` (inotify, FSEvents, ReadDirectoryChangesW). A path
  below a watched root is never stat-ed again: a notification names the
  changed path, and only it (and the folders above it that something
  depends on) is looked at by the next lookup. A change is seen within
  ``DEBOUNCE_MS`` (0.1 s) of the last write of a burst, usually ~``STEP_MS``.
- **Interval.** Every other path (outside the roots, behind a symlink, or
  every path when notifications are unavailable: no ``watchfiles``, a
  network file system, the watcher failed or hit the OS watch limit, or
  ``TOOLCASCADE_WATCH=off``) is stat-ed at most once per ``interval``
  (``Limits.stat_interval`` when the limits have it, else ``INTERVAL``,
  0.1 s), however many runs use it: an edit is seen within that interval.
- **Now.** ``Registry.watch()`` with no paths (``Manager.refresh()``)
  looks at every remembered path at once, for programs that just edited
  files and want the next invocation to see them whatever the timing.

The watcher thread only collects changed paths; the registry applies them
when a lookup asks, holding its lock, so no cache is ever half updated.
The thread holds nothing of the registry: it stops when the registry is
closed or garbage-collected. Built-in folders of an installed package
(``frozen``) are never watched nor stat-ed.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

log = logging.getLogger("orchestrator.freshness")

INTERVAL = 0.1
"""Seconds between two looks at a path no notification covers (``Limits.stat_interval`` overrides)."""

DEBOUNCE_MS = 100
"""A burst of changes is handed over at most this long after it started."""

START_AFTER = 1.0
"""Seconds after a registry's first lookup before a reuse starts its watcher: one-shot commands start none."""

STEP_MS = 20
"""The watcher hands over a burst once no change came for this long; also how fast it stops."""

# File systems whose changes made elsewhere raise no local notification: stat them instead.
NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "fuse.sshfs", "davfs"}
)

STARTING, LIVE, FAILED, STOPPED = "starting", "live", "failed", "stopped"
_MISSING: Any = object()

# A forked child inherits a registry's watcher state but not its thread: it counts forks to notice.
_forks = [0]


def _forked() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)

Signature = tuple[int, int] | None
Look = Callable[[str], Signature]


def notifications_wanted() -> bool:
    """False when ``TOOLCASCADE_WATCH`` is ``off``/``0``/``false``/``no``: stat at an interval instead."""
    return os.environ.get("TOOLCASCADE_WATCH", "").strip().lower() not in ("off", "0", "false", "no")


def network_mounts(roots: Iterable[str], table: str = "/proc/mounts") -> set[str]:
    """The ``roots`` that live on a network file system, by the mount ``table`` (Linux; elsewhere none known)."""
    try:
        with open(table, encoding="utf-8", errors="replace") as mounts:
            rows = [line.split()[1:3] for line in mounts if len(line.split()) >= 3]
    except OSError:
        return set()
    points = sorted(((point.replace("\\040", " "), kind) for point, kind in rows), key=lambda p: len(p[0]))
    found = set()
    for root in roots:
        kind = ""
        for point, fs in points:  # the longest mount point above root wins: sorted shortest first
            if root == point or root.startswith(os.path.join(point, "")):
                kind = fs
        if kind in NETWORK_FS:
            found.add(root)
    return found


class Watcher:
    """The watching thread's side: changed paths collected from ``watchfiles``, nothing of the registry.

    ``count`` grows with every handed-over burst, so the registry sees at a
    glance (one int compare) whether there is anything to apply.
    """

    __slots__ = ("roots", "changes", "count", "lock", "stop", "state", "thread", "__weakref__")

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self.changes: set[str] = set()
        self.count = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.state = STARTING
        self.thread = threading.Thread(target=self.run, name="toolcascade-watcher", daemon=True)

    def start(self) -> None:
        """Start the thread; its state turns ``live`` once every watch is in place."""
        self.thread.start()

    def run(self) -> None:
        """The thread: watch until stopped; any failure leaves the state ``failed`` (the registry stats instead)."""
        try:
            from watchfiles._rust_notify import RustNotify  # the core never imports watchfiles at import time

            notify = RustNotify(list(self.roots), False, False, 0, True, True)
        except Exception as exc:  # not installed, a vanished root, the OS watch limit: fall back, say why
            log.debug("file notifications unavailable (%s: %s); stat-ing at an interval", type(exc).__name__, exc)
            self.state = FAILED
            return
        try:
            self.state = LIVE  # the watches are in place: the constructor returns once they are
            while not self.stop.is_set():
                got = notify.watch(DEBOUNCE_MS, STEP_MS, 0, self.stop)
                if isinstance(got, set) and got:
                    with self.lock:
                        self.changes.update(path for _kind, path in got)
                        self.count += 1
                elif got == "stop":
                    break
        except Exception as exc:  # events may have been lost from here on: the registry looks at everything
            log.debug("file notifications failed (%s: %s); stat-ing at an interval", type(exc).__name__, exc)
            self.state = FAILED
        finally:
            notify.close()
            if self.state == LIVE:
                self.state = STOPPED

    def take(self) -> set[str]:
        """The paths changed since the last take."""
        with self.lock:
            changes, self.changes = self.changes, set()
        return changes

    def close(self, wait: float = 0.0) -> None:
        """Ask the thread to stop (it does within ``STEP_MS``); wait up to ``wait`` seconds for it."""
        self.stop.set()
        if wait and self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(wait)


def _stop(watcher: Watcher) -> None:
    watcher.stop.set()


class Freshness:
    """Which remembered paths a lookup must stat again, and the watcher that spares the rest.

    The registry owns the remembered signatures (``seen``: path -> (mtime,
    size) or None) and calls in with them, holding its lock (``lock``): one
    thread at a time reads and writes this bookkeeping and ``seen``, so a
    path another thread marked as looked-at has its new signature in
    ``seen`` already. ``look`` is the stat function (``registry.signature``).
    """

    def __init__(
        self,
        roots: Iterable[str],
        frozen: tuple[str, ...] = (),
        interval: float = INTERVAL,
        notify: bool | None = None,
        *,
        lock: threading.RLock | None = None,
    ) -> None:
        # The registry's lock: close() takes it, every other method is called with it held (Registry.watch).
        self.lock = lock if lock is not None else threading.RLock()
        self.frozen = frozen
        self._frozen_below = tuple(os.path.join(folder, "") for folder in frozen)
        # Watched roots: the search paths that are not frozen and not inside another one.
        wanted = sorted({r for r in roots if not self.is_frozen(r)}, key=len)
        self.roots: tuple[str, ...] = tuple(
            r for i, r in enumerate(wanted) if not any(r.startswith(os.path.join(o, "")) for o in wanted[:i])
        )
        self.interval = interval
        self.notify = notifications_wanted() if notify is None else notify
        self.live: tuple[str, ...] = ()  # the roots notifications cover right now
        self._live_below: tuple[str, ...] = ()
        self._identity: dict[str, tuple[int, int]] = {}
        self._watcher: Watcher | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._taken = 0
        self.epoch = 0
        self._epoch_at = float("-inf")
        self._stamps: dict[str, int] = {}  # path -> epoch it was last stat-ed in
        self._covered: dict[str, bool] = {}  # path -> below a live root with no symlink on the way
        self._uncovered: dict[frozenset[str], tuple[str, ...]] = {}  # a cached value's paths to stat
        self._verified: dict[frozenset[str], int] = {}  # a cached value's paths -> epoch they were verified in
        self._generation = -1
        self._born = float("inf")  # when the first lookup came
        self._forks = _forks[0]
        self.bound = 16_384
        # Listings in progress (Registry.discover): no watcher starts during one. A listing is one long
        # operation, not a long-lived program's reuse; a one-shot ``list`` then starts no thread at all.
        self.listings = 0

    # -- queries -----------------------------------------------------------

    def is_frozen(self, path: str) -> bool:
        """True for paths in a folder that is never watched (an installed package's built-ins)."""
        return bool(self.frozen) and (path in self.frozen or path.startswith(self._frozen_below))

    def covers(self, path: str) -> bool:
        """True when a notification would name a change of ``path`` (or it is frozen): no stat needed."""
        found = self._covered.get(path)
        if found is None:
            if len(self._covered) >= self.bound:
                self._covered.clear()
            found = self._covered[path] = self._covers(path)
        return found

    def _covers(self, path: str) -> bool:
        if self.is_frozen(path):
            return True
        if path in self.live:
            return True  # a root itself: its replacement is caught by the identity check
        if not path.startswith(self._live_below):
            return False
        # A symlink's target may change without an event naming the link.
        if os.path.islink(path):
            return False
        return self.covers(os.path.dirname(path))

    def current(self, path: str) -> bool:
        """True when ``path``'s remembered signature needs no stat now (covered, or stat-ed this epoch)."""
        return self._stamps.get(path) == self.epoch or self.covers(path)

    def stamp(self, path: str) -> None:
        """Note that ``path`` was just stat-ed."""
        if len(self._stamps) >= self.bound:
            self._stamps.clear()  # only an optimisation: a missing stamp costs one more stat
        self._stamps[path] = self.epoch

    def stamp_all(self, paths: list[str]) -> None:
        """``stamp`` of each of ``paths`` (a listing's index looked at all of them at once)."""
        if len(self._stamps) + len(paths) > self.bound:
            for path in paths:
                self.stamp(path)
            return
        self._stamps.update(dict.fromkeys(paths, self.epoch))

    # -- what a lookup calls ------------------------------------------------

    def quiet(self, paths: frozenset[str], generation: int) -> bool:
        """True when ``paths`` were verified in this epoch at ``generation`` and ``settle`` has nothing to do.

        The lock-free answer of ``Caches.current``: it only reads (one dict
        item and a few attributes, each read atomic), so a lookup that finds
        nothing due takes no lock. Anything due (a notification waiting, the
        watcher's state moved, the interval passed, a fork) answers False,
        and the caller takes the lock and settles. Its conditions are the
        negation of ``settle``'s branches: a change to one changes the other.
        """
        if self._verified.get(paths) != self.epoch or generation != self._generation:
            return False
        watcher = self._watcher
        if watcher is not None:
            if watcher.count != self._taken or self._forks != _forks[0]:
                return False
            state = watcher.state
            if state == LIVE:
                if not self.live:
                    return False
            elif state != STARTING and (self.live or state == FAILED):
                return False
        now = monotonic()
        return self._born <= now and now - self._epoch_at < self.interval

    def settle(self, seen: dict[str, Signature], generation: int, look: Look) -> bool:
        """Apply notifications and the passing of time; False when a remembered path changed.

        Costs two compares when nothing happened, whatever the number of paths.
        """
        if generation != self._generation:  # every derived value is new: forget what was verified for old ones
            self._generation = generation
            self._uncovered.clear()
            self._verified.clear()
        fresh = True
        watcher = self._watcher
        if watcher is not None and self._forks != _forks[0]:  # a forked child: no thread follows its files
            self._forks = _forks[0]
            watcher = None
            fresh = self._lose(seen, look)
        if watcher is not None:
            if watcher.count != self._taken:
                self._taken = watcher.count
                fresh = self._apply(watcher.take(), seen, look)
            state = watcher.state
            if state == LIVE and not self.live:
                fresh = self._go_live(watcher, seen, look) and fresh
            elif state != LIVE and state != STARTING and (self.live or state == FAILED):
                fresh = self._lose(seen, look) and fresh
        now = monotonic()
        if now < self._born:
            self._born = now
        if now - self._epoch_at >= self.interval:
            self.epoch += 1
            self._epoch_at = now
            if self.live and not self._same_roots():
                fresh = self._lose(seen, look) and fresh
        return fresh

    def verify(self, paths: frozenset[str], seen: dict[str, Signature], look: Look) -> bool:
        """Check the paths a cached value was computed from; False when one changed.

        O(1) once the value was verified in this epoch, or when notifications
        cover all its paths; else one stat per uncovered path per epoch.
        """
        epoch = self.epoch
        if self._verified.get(paths) == epoch:
            return True
        if (
            self.notify
            and self._watcher is None
            and self.roots
            and not self.listings
            and monotonic() - self._born >= START_AFTER
        ):
            # Values still reused START_AFTER after the first lookup: a long-lived program, where following
            # edits pays off. A one-shot command (toolcascade run, list) is usually over by then and starts no thread.
            self.start()
        todo = self._uncovered.get(paths)
        if todo is None:
            todo = tuple(p for p in paths if not self.covers(p))
            if len(self._uncovered) >= self.bound:
                self._uncovered.clear()
            self._uncovered[paths] = todo
        fresh = True
        stamps = self._stamps
        for path in todo:
            if stamps.get(path) == epoch:
                continue
            now = look(path)
            self.stamp(path)
            if seen.get(path, _MISSING) != now:
                seen[path] = now  # a path missing from seen is conservatively a change
                fresh = False
        if fresh:
            if len(self._verified) >= self.bound:
                self._verified.clear()
            self._verified[paths] = epoch
        return fresh

    def everything(self, seen: dict[str, Signature], look: Look) -> bool:
        """Stat every remembered path now (``Manager.refresh()``); False when one changed."""
        fresh = True
        self.epoch += 1
        self._epoch_at = monotonic()
        if self._watcher is not None:  # what it reported so far is looked at below; taken first, so a change
            self._taken = self._watcher.count  # reported during the stats is applied by the next lookup, not lost
            self._watcher.take()
        for path in list(seen):
            if self.is_frozen(path):
                continue
            now = look(path)
            self._stamps[path] = self.epoch
            if seen[path] != now:
                seen[path] = now
                fresh = False
        return fresh

    def reset(self) -> None:
        """Forget every stamp and verification (``clear_cache``); the watcher keeps running."""
        self._stamps.clear()
        self._covered.clear()
        self._uncovered.clear()
        self._verified.clear()
        self.epoch += 1

    # -- the watcher ---------------------------------------------------------

    def start(self) -> None:
        """Start the watcher thread over the existing roots, unless on a network file system."""
        roots = tuple(r for r in self.roots if os.path.isdir(r))
        remote = network_mounts(roots)
        roots = tuple(r for r in roots if r not in remote)
        watcher = self._watcher = Watcher(roots)
        self._forks = _forks[0]
        if not roots:
            watcher.state = FAILED
            return
        self._identity = {r: _identity(r) for r in roots}
        # The thread holds the Watcher only: this object (and its registry) can still be collected.
        self._finalizer = weakref.finalize(self, _stop, watcher)
        watcher.start()

    def close(self, wait: float = 1.0) -> None:
        """Stop the watcher thread (waiting up to ``wait`` seconds); later lookups stat at the interval."""
        with self.lock:
            self.notify = False
            watcher = self._watcher
            self.live, self._live_below = (), ()
            self._covered.clear()
            self._uncovered.clear()
            self._verified.clear()
        if watcher is not None:  # waited for outside the lock: lookups go on meanwhile
            watcher.close(wait)
            if self._finalizer is not None:
                self._finalizer.detach()

    @property
    def watching(self) -> bool:
        """True while notifications cover the roots."""
        return bool(self.live)

    def _go_live(self, watcher: Watcher, seen: dict[str, Signature], look: Look) -> bool:
        # Edits between a path's last stat and the watches being in place raised no event: look once more.
        self.live = watcher.roots
        self._live_below = tuple(os.path.join(r, "") for r in watcher.roots)
        self._covered.clear()
        self._uncovered.clear()
        self._verified.clear()
        return self.everything(seen, look)

    def _lose(self, seen: dict[str, Signature], look: Look) -> bool:
        # Events may have been missed: stat everything, then at the interval; a later reuse restarts a watcher.
        watcher = self._watcher
        if watcher is not None:
            watcher.close()
            if self._finalizer is not None:
                self._finalizer.detach()
        if watcher is not None and watcher.state == FAILED:
            self.notify = False  # it failed once here (limit reached, no watchfiles): do not retry each run
        self._watcher = None
        self.live, self._live_below = (), ()
        self._covered.clear()
        self._uncovered.clear()
        self._verified.clear()
        return self.everything(seen, look)

    def _same_roots(self) -> bool:
        """False when a watched root was replaced (renamed away, re-created): its watch follows the old one."""
        return all(_identity(root) == known for root, known in self._identity.items())

    def _apply(self, changes: set[str], seen: dict[str, Signature], look: Look) -> bool:
        """Stat the reported paths, and the folders above them up to a root, that something depends on."""
        fresh = True
        done: set[str] = set()
        roots = set(self.live)
        for path in changes:
            while path not in done:
                done.add(path)
                if path in seen:
                    now = look(path)
                    self.stamp(path)
                    if seen[path] != now:
                        seen[path] = now
                        fresh = False
                parent = os.path.dirname(path)
                if path in roots or parent == path:
                    break
                path = parent
        return fresh


def _identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)
