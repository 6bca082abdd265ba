"""One helper for tests that edit tool files and invoke at once.

Edits are seen through file notifications or a stat at most every
``freshness.INTERVAL``: within a fraction of a second, not necessarily by an
invocation made in the same instant. A program that just edited files says
so with ``Manager.refresh()``; tests do the same through ``refresh``.
"""

from __future__ import annotations

from typing import Any


def refresh(manager: Any) -> None:
    """Make ``manager`` look at its files now, as ``Manager.refresh()`` does (``manager`` or its registry)."""
    if hasattr(manager, "refresh"):
        manager.refresh()
    else:  # a Registry
        manager.watch()


def eager(manager: Any) -> Any:
    """``manager``, looking at its files on every lookup (no watcher, no interval), and returned.

    For test modules whose tests write tool files between invocations
    everywhere: the behaviour before file notifications, at its cost.
    """
    freshness = manager.registry.freshness
    freshness.interval = 0.0
    freshness.notify = False
    return manager
