"""Lifetime: what a Manager keeps and ends (``Manager.resource``, ``Manager.close``).

A Manager keeps per-manager objects made on first use (a model client, a
pool of MCP sessions: ``keep``) and ends them, newest first, when it closes.
The executors that ``delegate`` uses are shared by every Manager of the
process: the process's open managers are counted here, and the last one to
close ends the executors.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

# The Lifetimes of this process not ended yet that hold the executors. Weak: a Manager collected without
# close() counts no more.
_open: weakref.WeakSet[Lifetime] = weakref.WeakSet()
_open_lock = threading.Lock()


class Lifetime:
    """One Manager's kept objects and whether it is closed; thread-safe."""

    __slots__ = ("__weakref__", "closed", "_kept", "_lock", "_holds")

    def __init__(self) -> None:
        self.closed = False
        self._kept: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        units = sys.modules.get("orchestrator.units")  # not imported: no unit runs here
        # A Manager made to run a unit in a worker: its caller's Manager holds the executors.
        self._holds = units is None or not units.on_worker()
        if self._holds:
            with _open_lock:
                _open.add(self)

    def keep(self, key: Hashable, make: Callable[[], T]) -> T | None:
        """What is kept under ``key``, made by ``make()`` on first use (once, from any thread); None once closed."""
        with self._lock:
            if self.closed:
                return None
            if key not in self._kept:
                self._kept[key] = make()
            return self._kept[key]  # type: ignore[no-any-return]

    def end(self, first: Callable[[], None]) -> None:
        """Close once: ``first()``, then each kept object's ``close()`` newest first, then the executors if last."""
        with _open_lock:
            if self.closed:
                return
            self.closed = True
            _open.discard(self)
            last = self._holds and not _open
        first()
        with self._lock:
            kept = list(self._kept.values())
            self._kept.clear()
        for thing in reversed(kept):
            closing = getattr(thing, "close", None)
            if callable(closing):
                closing()
        executors = sys.modules.get("orchestrator.executor")  # not imported: no executor was ever made
        if last and executors is not None:
            executors.close_executors()
