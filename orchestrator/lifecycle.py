"""Lifetime: what a Manager keeps and ends (``Manager.resource``, ``Manager.close``, ``with Manager()``).

A Manager keeps per-manager objects made on first use (a model client, a
pool of MCP sessions: ``keep``) and ends them, newest first, when it closes.
The executors that ``delegate`` uses are shared by every Manager of the
process: the process's open managers are counted here, and the last one to
close ends the executors. ``close`` also ends the run log's recorder that
``recorder`` starts. The Manager's lifecycle methods (``resource``,
``close``, ``aclose``, ``with`` and ``async with``) are the functions at the
end of this module.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread

from .errors import InvocationError

if TYPE_CHECKING:
    from .manager import Manager
    from .recorder import Recorder

T = TypeVar("T")
M = TypeVar("M")

# The Lifetimes of this process not ended yet that hold the executors. Weak: a Manager collected without
# close() counts no more.
_open: weakref.WeakSet[Lifetime] = weakref.WeakSet()
_open_lock = threading.Lock()


class Lifetime:
    """One Manager's kept objects, its session store, and whether it is closed; thread-safe.

    ``sessions`` is what the program gave for the session store (a store, a
    path, or None for the default): ``store()`` opens it on first use.
    """

    __slots__ = ("__weakref__", "closed", "sessions", "_store", "_kept", "_lock", "_holds")

    def __init__(self, sessions: Any = None) -> None:
        self.closed = False
        self.sessions = sessions
        self._store: Any = None
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

    def store(self) -> Any:
        """The session store, opened on first use (``orchestrator.sessions.open_store``); never closed here.

        A store keeps no connection between calls, and a store object the program passed stays the program's.
        """
        store = self._store
        if store is None:
            from .sessions import open_store  # sqlite only for programs that keep sessions

            store = self._store = open_store(self.sessions)
        return store

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


def recorder(manager: Manager, runlog: Any) -> Recorder | None:
    """The recorder of ``Manager(runlog=...)`` (``orchestrator.recorder``), which ``close`` ends; None for no run log.

    Raises:
        ConfigurationError: ``runlog`` is not a path, a ``RunLog``, True or None.
    """
    if runlog is None or runlog is False:
        return None
    from .recorder import recorder_for  # sqlite and the recorder only for programs that keep a run log

    return recorder_for(manager, runlog)


# -- the Manager's lifecycle methods (``Manager.close`` ... are these functions) -------------------------------


def is_closed(manager: Manager) -> bool:
    """``Manager.closed``: true once ``close()`` ran; the manager invokes nothing more."""
    return manager.lifetime.closed


def sessions(manager: Manager) -> Any:
    """``Manager.sessions``: the session store, opened on first use from the ``sessions`` given to the constructor."""
    return manager.lifetime.store()


def resource(manager: Manager, key: Hashable, make: Callable[[], T]) -> T:
    """What this manager keeps under ``key``: made by ``make()`` on first use, once, from any thread.

    For what is worth reusing across calls and runs (a model client, a
    connection pool). ``key`` says what makes two of them the same (a base
    URL, a timeout), never a secret. ``close()`` calls each one's own
    ``close()``, if it has one, newest first.

    Raises:
        InvocationError: the manager is closed.
    """
    kept = manager.lifetime.keep(key, make)
    if kept is None and manager.lifetime.closed:
        raise refused("resource")
    return kept  # type: ignore[return-value]


def close(manager: Manager) -> None:
    """End what this manager started; idempotent. It waits for threads and processes: ``aclose`` in async code.

    Stops the file watcher thread and waits for it, and closes what
    ``resource`` kept (newest first). The executors that
    ``delegate`` uses are shared by every Manager of the process: when no
    other open Manager is left, the process pools' workers are killed and
    reaped (a call still running on one fails with ``InvocationError``)
    and the in-process engine's Managers are closed; they start again
    when a unit needs them. Session stores keep no connection between
    calls, so none is left open (a store object the program passed stays
    the program's). Afterwards ``invoke``, ``invoke_sync``, ``resume``
    and ``resume_sync`` raise ``InvocationError``; finding, listing and
    explaining tools still work (edits are seen by a stat at an interval).
    """
    manager.lifetime.end(partial(_stop, manager))


def _stop(manager: Manager) -> None:
    """The first steps of ``close``: the file watcher, the run log's pending rows, the MCP servers remote tools started."""
    manager.registry.freshness.close()
    if manager.recorder is not None:
        manager.recorder.close()
    remote = sys.modules.get("orchestrator.remote")  # not imported: no remote tool was looked up
    if remote is not None:
        remote.close_pool(manager.registry)


async def aclose(manager: Manager) -> None:
    """``close()`` on a worker thread, so the event loop keeps running while workers are reaped."""
    await anyio.to_thread.run_sync(manager.close)


def enter(manager: M) -> M:
    """``with Manager(...) as manager:``: the manager itself."""
    return manager


def leave(manager: Manager, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
    """The end of a ``with`` block: ``close()``."""
    manager.close()


async def aenter(manager: M) -> M:
    """``async with Manager(...) as manager:``: the manager itself."""
    return manager


async def aleave(manager: Manager, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
    """The end of an ``async with`` block: ``aclose()``."""
    await manager.aclose()


def refused(what: str, tool: str | None = None) -> InvocationError:
    """The typed error for a call on a closed manager."""
    return InvocationError(f"{what}() on a closed Manager: make a new Manager to run tools", tool=tool)


async def closed(what: str, tool: str | None) -> Any:
    """A coroutine that raises ``refused(what, tool)`` when awaited (an invoke on a closed manager)."""
    raise refused(what, tool)
