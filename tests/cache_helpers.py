"""What the tests of things kept in the cache folder share (tests/test_index.py, tests/test_verdicts.py).

Kept entries are trusted only for files older than the "racy" window, so
tests age their files with ``os.utime``; ``Loads`` counts the files a
registry reads, to show what a kept entry spared; ``tools_asked`` the tools
a method (a lookup, a plan) was asked about, to show what a listing spared.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def age(*roots: Path, seconds: float = 60.0) -> None:
    """Set every file and folder under ``roots`` (and the roots) ``seconds`` into the past."""
    when = time.time() - seconds
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                os.utime(Path(folder, name), (when, when))
            os.utime(folder, (when, when))


class Loads:
    """The tool files a registry reads (parses, imports or scans for a name), by file name."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(Path(path).name)
            return real(path, *args, **kwargs)

        return counted


def tools_asked(monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> list[str]:
    """The names of the tools ``owner.method`` is called with (its first argument) from now on, in order."""
    seen: list[str] = []
    real = getattr(owner, method)

    def counted(self: object, tool: object, *args: object, **kwargs: object) -> object:
        seen.append(getattr(tool, "name", "?"))
        return real(self, tool, *args, **kwargs)

    monkeypatch.setattr(owner, method, counted)
    return seen
