"""Every tool folder's parsed frontmatters, kept in the cache folder: a ``check`` after a ``list`` parses no YAML.

A listing parses every tool file's frontmatter (``loader.load_yaml``); what
it parsed is kept here, one file per tool folder, keyed by the block's text
(with its first line and the ``Limits`` it was parsed under), so the next
process reading the same text (a ``check`` after a ``list``) takes the
parsed value instead of parsing YAML again. No timestamp is trusted: an
edited file has another text and is parsed again.

The package's own files are kept apart (``cachefolder.kept_frontmatter``,
written at once: a first invoke reads one small file). Here blocks are
collected in memory and a folder's file is written at exit (or by
``flush_blocks``), so a listing of 10,000 files writes each folder once.

**Trust.** As everything in the cache folder (``orchestrator.cachefolder``):
JSON read only from a regular file owned by this user and writable by nobody
else, within ``SHARD_BYTES``, for this parser (its code's and PyYAML's
signatures) and this folder; a row of a shape parsing never gives is
ignored, never trusted. Only parsed data is kept: where a tool was found,
and so whether it is trusted, is never read from here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from .cachefolder import (
    PLAIN_DEPTH,
    VERSION,
    cache_folder,
    enabled,
    parser_material,
    plain,
    prune,
    read_json,
    replace_file,
)
from .frozen import FrozenDict, FrozenList, freeze

log = logging.getLogger("orchestrator.frontmatters")

SHARD_BYTES = 16 * 1024 * 1024
"""A folder's kept frontmatters larger than this are neither read nor written."""

SHARD_FILES = 4_096
"""Folders whose frontmatters are kept (one file each); the least recently written go first."""

SHARD_SMALLEST = 4
"""A folder with fewer parsed blocks is not kept: opening its file would cost what parsing them does."""

SHARD_MEMORY = 50_000
"""Blocks held in memory across folders; past it the folders are written and forgotten (a server's bound)."""


class _Shard:
    """One folder's kept blocks: read once from its file, written back when blocks were added or used."""

    __slots__ = ("added", "blocks", "file", "used")

    def __init__(self, file: Path | None, blocks: dict[str, Any]) -> None:
        self.file = file
        self.blocks = blocks  # key -> [data, lines]; data frozen once handed out
        self.used: set[str] = set()  # keys looked up or added in this process
        self.added = False


_shards: dict[str, _Shard] = {}
_held = 0  # blocks _shards holds (read or added) since they were last forgotten: SHARD_MEMORY bounds it
_shard_lock = threading.Lock()
_shard_material: dict[str, Any] | None = None
_flush_at_exit = False
_limits_text: tuple[Any, str] = (None, "")


def _reset_after_fork() -> None:
    global _shard_lock
    _shard_lock = threading.Lock()  # a lock another thread held at the fork would never be released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _shard(folder: str) -> _Shard:
    """The kept blocks of ``folder`` (read from its file on first use); called under ``_shard_lock``."""
    global _shard_material, _held
    shard = _shards.get(folder)
    if shard is not None:
        return shard
    base = cache_folder() if enabled() else None
    file = None
    blocks: dict[str, Any] = {}
    if base is not None:
        try:
            if _shard_material is None:
                _shard_material = json.loads(json.dumps(parser_material()))
            name = hashlib.sha256(json.dumps([_shard_material, folder]).encode("utf-8", "surrogatepass")).hexdigest()
            file = base / f"blocks-{name[:32]}.json"
        except Exception as exc:  # no parser to describe: keep nothing
            log.debug("no kept frontmatters: %s: %s", type(exc).__name__, exc)
    if file is not None:
        data = read_json(file, SHARD_BYTES)
        if (
            isinstance(data, dict)
            and data.get("version") == VERSION
            and data.get("key") == _shard_material
            and data.get("folder") == folder
            and type(data.get("blocks")) is dict
        ):
            blocks = data["blocks"]
    _held += len(blocks)
    shard = _shards[folder] = _Shard(file, blocks)
    return shard


def _key(block: str, first_line: int, limits: Any) -> str:
    """The key of a block: its first line, ``limits`` and text, hashed (``repr(limits)`` made once per ``Limits``).

    The last key is remembered: a block that missed is kept next, under the same key.
    """
    global _limits_text, _last_key
    last = _last_key
    if last[0] is block and last[1] == first_line and last[2] is limits:
        return last[3]  # type: ignore[no-any-return]
    held, text = _limits_text
    if held is not limits:
        text = repr(limits)
        _limits_text = (limits, text)
    key = hashlib.sha256(f"{first_line}\0{text}\0{block}".encode("utf-8", "surrogatepass")).hexdigest()
    _last_key = (block, first_line, limits, key)
    return key


_last_key: tuple[Any, ...] = (None, None, None, "")
_STR = frozenset({str})
_INT = frozenset({int})


def kept_block(folder: str, block: str, first_line: int, limits: Any) -> tuple[FrozenDict, dict[str, int]] | None:
    """The (data, key lines) ``loader.load_yaml`` made of this exact block of a file in ``folder``, or None.

    Keyed by the block's text (with its first line and ``limits``), so no
    timestamp is trusted: an edited file is parsed again. The data comes
    back frozen and shared (``orchestrator.frozen``); the lines are the
    caller's own. A row of the wrong shape is ignored, never trusted.
    """
    key = _key(block, first_line, limits)
    with _shard_lock:
        shard = _shard(folder)
        row = shard.blocks.get(key)
        if type(row) is not list or len(row) != 2:
            return None
        data, lines = row
        if type(data) is not FrozenDict:  # as read from the file: checked and frozen once
            if type(data) is not dict or type(lines) is not dict:
                return None
            if not (set(map(type, lines)) <= _STR and set(map(type, lines.values())) <= _INT):
                return None  # the line of each key: a string to an int (never a bool), checked in C
            data = _frozen(data)
            if data is None:
                return None
            row[0] = data
        shard.used.add(key)
    return data, dict(lines)


def keep_block(folder: str, block: str, first_line: int, limits: Any, data: Any, lines: dict[str, int]) -> None:
    """Remember a parsed block of a file in ``folder`` for the next process (written at exit); never raises.

    ``data`` is frozen here (a copy unless it already is): later changes by
    the caller never reach what is kept.
    """
    global _flush_at_exit, _held
    try:
        frozen = freeze(data)
    except RecursionError:
        return  # a value holding itself: never kept (the write checks no cycles)
    if not plain(frozen, frozen=True):
        return  # a date, a set, deeper than PLAIN_DEPTH: not carried exactly
    key = _key(block, first_line, limits)
    with _shard_lock:
        shard = _shard(folder)
        if shard.file is None:
            return
        shard.blocks[key] = [frozen, dict(lines)]
        shard.used.add(key)
        shard.added = True
        if not _flush_at_exit:
            import atexit

            atexit.register(_flush_at_exit_now)
            _flush_at_exit = True
        _held += 1
        if _held > SHARD_MEMORY:
            _write_shards(forget=True)


def flush_blocks(timeout: float = -1) -> None:
    """Write every folder's newly kept blocks now (also done at exit); never raises.

    ``timeout``: seconds to wait for another thread that is keeping a block (-1: as long as it takes); at
    exit a daemon thread stopped mid-keep never releases it, and nothing is written rather than the exit hang.
    """
    if not _shard_lock.acquire(timeout=timeout):
        return
    try:
        _write_shards(forget=False)
    finally:
        _shard_lock.release()


def _flush_at_exit_now() -> None:
    flush_blocks(timeout=EXIT_WAIT)


EXIT_WAIT = 2.0
"""Seconds the exit waits for a thread keeping a block before it writes the kept blocks (else it writes none)."""


def _write_shards(forget: bool) -> None:
    """Write the folders whose blocks were added; ``forget``: drop every folder from memory. Under ``_shard_lock``.

    A folder keeps the blocks this process used and, of the others (files
    edited since, or not read this time), only the most recent, as many as
    the folder has entries: its file stays within twice what the folder holds.
    """
    global _held
    wrote = False
    for folder, shard in list(_shards.items()):
        if shard.added and shard.file is not None and len(shard.blocks) >= SHARD_SMALLEST:
            stale = [key for key in shard.blocks if key not in shard.used]
            room = max(len(shard.used), _entries(folder))
            kept = {key: shard.blocks[key] for key in stale[max(0, len(stale) - room) :]}
            kept.update((key, shard.blocks[key]) for key in shard.blocks if key in shard.used)
            try:
                text = _ENCODE({"version": VERSION, "key": _shard_material, "folder": folder, "blocks": kept})
                if len(text) <= SHARD_BYTES:
                    replace_file(shard.file, text.encode("utf-8", "surrogatepass"))
                    wrote = True
            except Exception as exc:  # an unwritable cache: the next process parses again
                log.debug("frontmatters of %s not written: %s: %s", folder, type(exc).__name__, exc)
            shard.blocks = kept
            shard.added = False
        if forget:
            del _shards[folder]
    if forget:
        _held = 0
    if wrote:
        base = cache_folder()
        if base is not None:
            prune(base, "blocks-", SHARD_FILES)


_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
"""A folder's file as JSON text (the same text ``json.dumps`` with these separators makes).

No circular check: it was ~10% of the write (an id put in and taken out of a dict per mapping and list), and nothing
kept holds a cycle: a kept block passed ``plain`` (bounded by ``PLAIN_DEPTH``) or was decoded from JSON. Were one
there, the encoder's recursion limit raises and that folder is not written. The rest of the write is the C encoder
itself (read-only mappings cost it a list of items each); no value is walked in Python here."""


def _entries(folder: str) -> int:
    """How many entries ``folder`` has now (0 when it cannot be read)."""
    try:
        with os.scandir(folder) as found:
            return sum(1 for _ in found)
    except OSError:
        return 0


def _frozen(value: dict[str, Any]) -> FrozenDict | None:
    """A frozen copy of decoded JSON ``value``, or None when ``plain`` would refuse it (one pass: checked and built).

    Equal mappings and lists (the same ``params`` in a folder's tools) come back as one shared, read-only
    object (``_INTERNED``): what a check works out of such a value by its identity is worked out once.
    """
    try:
        return _freeze_plain(value, 0)[0]  # type: ignore[no-any-return]
    except ValueError:
        return None


_INTERNED: dict[Any, Any] = {}
"""A frozen mapping or list by its content (``_freeze_plain``'s key): equal values read from kept files, shared."""

INTERNED = 65_536
"""Values ``_INTERNED`` holds at most; it starts again when full (only a shortcut)."""


def _freeze_plain(value: Any, depth: int) -> tuple[Any, Any]:
    """(``freeze(value)``, a hashable key equal only for equal values of the same JSON types), for JSON's types.

    Raises:
        ValueError: a value ``plain`` refuses (a float that is not finite, a non-string key, too deep).
    """
    kind = type(value)
    if kind is str:
        return value, value
    if kind is dict or kind is list:
        if depth >= PLAIN_DEPTH:
            raise ValueError("too deep")
        parts: list[Any] = ["d" if kind is dict else "l"]
        # A string is its own frozen value and key: taken inline, not by a call (most of a frontmatter's leaves).
        if kind is list:
            items = []
            for item in value:
                if type(item) is str:
                    frozen = key = item
                else:
                    frozen, key = _freeze_plain(item, depth + 1)
                items.append(frozen)
                parts.append(key)
            made: Any = FrozenList(items)
        else:
            out = {}
            for name, item in value.items():
                if type(name) is not str:
                    raise ValueError("a key that is not a string")
                if type(item) is str:
                    out[name] = key = item
                else:
                    out[name], key = _freeze_plain(item, depth + 1)
                parts.append(name)
                parts.append(key)
            made = FrozenDict(out)
        if depth < 2:
            return made, None  # a frontmatter and its metadata: each file's own, not worth a key
        content = tuple(parts)
        shared = _INTERNED.get(content)
        if shared is not None:
            return shared, content
        if len(_INTERNED) >= INTERNED:
            _INTERNED.clear()
        _INTERNED[content] = made
        return made, content
    if value is None:
        return None, None
    if kind is int or kind is bool:
        return value, (kind, value)  # 1, True and 1.0 are equal in Python, never in JSON
    if kind is float and value == value and value not in (float("inf"), float("-inf")):
        return value, (kind, repr(value))  # -0.0 == 0.0, but not as JSON text
    raise ValueError("not carried exactly by JSON")
