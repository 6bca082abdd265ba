"""Kept verdicts: what ``check`` found over a catalogue, kept on disk so an unchanged one is not checked again.

``check`` loads every tool, plans it and runs a dozen checks on it (seconds
over 10,000 tools). Its problems depend only on files: the tools, the
``AUTHORITY.md`` files and named authorities, partials, the built-ins, the
managed and user levels. So a check writes what it found with the signature
((mtime_ns, size), or absent) of every file and folder it depends on, and the
next check over the same search paths returns it when every one of them still
has that signature: one stat per path instead of a parse, a plan and the
checks per tool. Any edit, new or deleted file (its folder's signature
changes), or another engine checks everything again.

**What a verdict depends on.** Every path the registry looked at during the
check (its ``Snapshot``: tool files, the folders refs were resolved in, the
authority files of every cascade), every file and folder under each search
path and each named-authority folder (hidden ones aside: partials and
authority files are read there without the registry), and the folders a
tool's ``paths`` metadata adds (present or not). Its key holds what shapes
the results besides files: the on-disk index's key (the package and its
source files, Python, search paths and their trust, ``Limits``, formats,
plugins, model aliases), the working directory (problems show paths relative
to it), the trusted folders and the managed and user authority files.
Instruction files (``CLAUDE.md``, ...) are read by every check: they are few.

**Trust and races.** As the index (``orchestrator.index``): JSON in the
user's cache folder, checked on the way in, ignored when malformed, written
atomically, never an error; ``TOOLCASCADE_INDEX=off`` turns it off. A check
whose paths changed while it ran (the signature the registry read differs
from the one after) or within ``RACY_NS`` of the write keeps nothing, and
neither does a manager with registered functions (code, not files).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cachefolder import cache_folder, prune, read_json, replace_file
from .index import RACY_NS, Index
from .problems import Problem
from .searchpath import UNSEEN, Signature, signature

if TYPE_CHECKING:
    from .manager import Manager

log = logging.getLogger("orchestrator.verdicts")

VERSION = 1
"""The file layout; a file of another version is ignored."""

VERDICT_BYTES = 64 * 1024 * 1024
"""A kept verdict larger than this is neither read nor written (10,000 tools take ~1 MB)."""

VERDICT_FILES = 16
"""Verdict files kept in the cache folder (one per set of search paths); the least recently written go first."""

SEVERITIES = frozenset({"error", "warning"})


class Verdicts:
    """The kept verdict of one manager's check: ``kept()`` before checking, ``keep()`` after."""

    def __init__(self, file: Path, material: dict[str, Any]) -> None:
        self.file = file
        self.material = material
        self.before: dict[str, Signature] = {}  # the walked paths' signatures when the check began

    @classmethod
    def open(cls, manager: Manager) -> Verdicts | None:
        """The verdict file of ``manager``'s search paths and options, or None when nothing can be kept."""
        registry = manager.registry
        if registry.functions:
            return None
        index = Index.open(registry)
        folder = cache_folder()
        if index is None or folder is None:
            return None
        try:
            material = {
                "version": VERSION,
                "index": index.material,
                "cwd": str(manager.cwd),
                "trusted": sorted(str(path) for path in manager.trusted),
                "placed": [[level, str(path)] for level, path in manager.authorities.placed_files()],
                "authorities": str(manager.authorities.builtin),
            }
            text = json.dumps(material, sort_keys=True)
            material = json.loads(text)
        except Exception as exc:  # an unencodable option: nothing kept, never an error
            log.debug("no kept verdicts: %s: %s", type(exc).__name__, exc)
            return None
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        return cls(folder / f"check-{digest}.json", material)

    def kept(self) -> list[Problem] | None:
        """The problems the last check found, when every path it depended on is unchanged; else None."""
        data = read_json(self.file, VERDICT_BYTES)
        try:
            if not isinstance(data, dict) or data.get("version") != VERSION or data.get("key") != self.material:
                return None
            for path, sig in data["paths"]:
                if type(path) is not str or signature(path) != (None if sig is None else tuple(sig)):
                    return None
            return [_problem(row) for row in data["problems"]]
        except (ValueError, TypeError, KeyError):
            return None

    def begin(self, manager: Manager) -> None:
        """The check starts: note the signature of every file and folder it may read without the registry."""
        builtin = manager.authorities.builtin
        roots = [sp.folder for sp in manager.paths[:-1]]
        roots += [str(folder) for folder in manager.authorities.folders(manager.paths) if folder != builtin]
        walked = walk(roots, manager.limits.folder_files)
        self.before = {} if walked is None else {path: signature(path) for path in walked}

    def keep(self, manager: Manager, run: Iterable[str], looked: Iterable[str], problems: list[Problem]) -> None:
        """Write ``problems`` with the signatures of what the check read; nothing when it changed meanwhile."""
        try:
            paths = self._paths(manager, run, looked)
            if paths is None:
                return
            rows = [[p.path, p.line, p.message, p.severity] for p in problems]
            data = {"version": VERSION, "key": self.material, "paths": paths, "problems": rows}
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
            if len(text) <= VERDICT_BYTES:
                replace_file(self.file, text)
                prune(self.file.parent, "check-", VERDICT_FILES)
        except Exception as exc:  # a full disk, a read-only home: the check is done anyway
            log.debug("verdicts not written: %s: %s", type(exc).__name__, exc)

    def _paths(self, manager: Manager, run: Iterable[str], looked: Iterable[str]) -> list[list[Any]] | None:
        """Every path the verdict depends on with its signature, or None: one changed during the check or lately."""
        if not self.before:
            return None  # the walk was refused (too many files): nothing vouches for new ones
        registry = manager.registry
        racy = time.time_ns() - RACY_NS
        found = []
        before = self.before
        for path in sorted({*run, *looked, *before}):
            now = signature(path)
            # What the check began with and what the registry last saw: a file edited while the check ran and
            # looked at again after its stat interval (a slow check) has the new signature in the registry only.
            first, read = before.get(path, now), registry.seen(path)
            if first != now or (read is not UNSEEN and read != now) or (now is not None and now[0] >= racy):
                return None
            found.append([path, None if now is None else list(now)])
        return found


def _problem(row: Any) -> Problem:
    """A kept row as a Problem.

    Raises:
        ValueError: not a row ``keep`` writes.
    """
    path, line, message, severity = row
    if not (path is None or type(path) is str) or not (line is None or type(line) is int):
        raise ValueError("malformed problem")
    if type(message) is not str or severity not in SEVERITIES:
        raise ValueError("malformed problem")
    return Problem(path, line, message, severity)


def walk(roots: Iterable[str], limit: int) -> list[str] | None:
    """Every folder and file under ``roots``, the roots included (hidden ones aside; symlinked folders not entered).

    None past ``limit`` entries under one root (a check reports such a search path instead).
    """
    found: list[str] = []
    for root in dict.fromkeys(roots):
        found.append(root)
        count = 0
        todo = [root]
        while todo:
            folder = todo.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        count += 1
                        if count > limit:
                            return None
                        if entry.name.startswith("."):
                            continue
                        found.append(entry.path)
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
            except (OSError, ValueError):
                continue  # unreadable or absent: its signature (or its absence) is kept with the rest
    return found
