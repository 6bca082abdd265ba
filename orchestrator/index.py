"""The index: what a listing computed, kept on disk so the next process's first listing is cheap.

A listing (``Manager.list_tools()``, ``check``) reads every tool file, and a
new process used to do all of it again. The registry already caches each
derived value with the files and folders it came from; the index persists
two of those caches, each entry with the signature ((mtime_ns, size), or
absent) every path it depends on had when it was computed:

- ``names``: what one folder offers (``Registry.names``), and
- ``described``: one ``list`` row (``Manager.describe``, a ``ToolInfo``).

A new registry's listing reuses an entry only when every one of its paths
still has that signature (one stat per path per listing); anything else is
computed as before and the index rewritten. A folder's entry also depends on
every file whose declared ``name`` it read (a name edited in place changes
the file, not the folder). An index is only a cache: it never changes a
result, only how much of it is read from tool files.

**Where.** One JSON file per set of search paths and everything else that
shapes the values (formats selection, ``Limits``, the package and its
source files, the Python version, installed format plugins, model aliases),
in the user's cache folder (``orchestrator.cachefolder``): ``TOOLCASCADE_CACHE`` when set, else
``$XDG_CACHE_HOME/toolcascade``, else ``~/.cache/toolcascade``
(``%LOCALAPPDATA%\\toolcascade`` on Windows). Never inside a tool folder, so
no folder can ship a poisoned index. ``TOOLCASCADE_INDEX=off`` turns it off.

**Trust.** The file is data (``json``, never pickle): every field is checked
on the way in, and a file that is not a regular file owned by this user and
writable by nobody else, larger than ``INDEX_BYTES``, truncated, of another
version or for another key is ignored (and rewritten when it can be).
Writes go to a temporary file renamed over the old one, so a reader sees a
whole file whatever other processes do. Failures to read or write are never
errors: the listing computes what it needs.

**Frozen folders.** An installed package's built-ins (``Manager(watch_builtins=False)``)
are never stat-ed: an entry depends on them through the key (the package's
version, its source files' signatures and the frozen folders), not through a
row, so a warm listing reads and rewrites nothing for them.

**Racy timestamps.** An entry any of whose paths changed within
``RACY_NS`` (2 s) of the write is not written: a later edit in the same
timestamp granule could leave its signature unchanged. Errors are never
written: a broken tool is loaded, and reported, every time. Values JSON does
not carry exactly (YAML dates, non-string keys, tuples) are not written either.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cachefolder import cache_folder, enabled, package_code, package_version, plain, prune, read_json, replace_file
from .indexcodec import MISS, Decoder, Encoder
from .searchpath import Signature
from .searchpath import signature as _signature

if TYPE_CHECKING:
    from .registry import Registry  # the registry opens the index and hands itself in

log = logging.getLogger("orchestrator.index")

VERSION = 1
"""The file layout; a file of another version is ignored."""

INDEX_BYTES = 64 * 1024 * 1024
"""An index larger than this is neither read nor written (10,000 tools take ~4 MB)."""

INDEX_FILES = 32
"""Index files kept in the cache folder (one per set of search paths); the least recently written go first."""

RACY_NS = 2_000_000_000
"""Entries whose paths changed less than this long before the write are not written (git's racy rule)."""

PERSISTED = frozenset({"names", "described"})
"""The registry's derived caches the index keeps."""

_INT = {int}


FORMATS_GROUP = "toolcascade.formats"
"""The entry point group format plugins are installed under (``orchestrator.formats.ENTRY_POINTS``)."""


def _plugins() -> list[list[Any]]:
    """The installed format adapters: each entry point, and the signature of every plugin's module file.

    The built-in formats (``orchestrator.formats.*``) are the package's own
    code, whose files the key holds already (``package_code``): they are
    named, not imported, so a repeated listing imports no format at all. Only
    when another distribution installs a format is every one loaded, as before.
    """
    from .cachefolder import kept_entry_points

    kept = kept_entry_points(FORMATS_GROUP)
    if kept is None:
        from .formats import entry_points

        kept = [(point.name, point.value) for point in entry_points(FORMATS_GROUP)]
    found: list[list[Any]] = [[name, value] for name, value in sorted(kept)]
    if all(value.startswith(f"{__package__}.formats.") for _name, value in kept):
        return found
    from .formats import registered

    for name, fmt in sorted(registered().items()):
        module = sys.modules.get(type(fmt).__module__)
        file = getattr(module, "__file__", None)
        found.append([name, type(fmt).__module__, type(fmt).__qualname__, _signature(file) if file else None])
    return found


class Index:
    """One registry's index file: entries loaded once, each reused when its paths are unchanged."""

    def __init__(self, file: Path, material: dict[str, Any]) -> None:
        self.file = file
        self.material = material
        self.rows: list[tuple[str, Signature]] = []
        self.texts: list[str] = []  # each row's path
        self.members: dict[int, tuple[int, ...]] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.loaded = False
        # Per listing: whether each row matched the disk (each path stat-ed at most once), made by its first lookup.
        self._valid: list[bool] = []
        self._checked = False
        self._rows_served = False  # this listing's first row lookup decoded every row (``_serve_rows``)
        # (cache name, key) served from the file or computed during a listing: their paths are complete.
        self.kept: dict[tuple[str, Any], str] = {}
        # The files whose declared names each folder's scan read, by folder path.
        self.scanned: dict[str, tuple[str, ...]] = {}
        self.stale = False  # the file is missing, unreadable or holds entries no longer valid: rewrite it
        self.decoder = Decoder([])

    @classmethod
    def open(cls, registry: Registry) -> Index | None:
        """The index of ``registry``'s search paths and options, or None when off or not possible."""
        if not enabled():
            return None
        folder = cache_folder()
        formats = registry.formats
        if folder is None or not plain(formats if not isinstance(formats, tuple) else list(formats)):
            return None
        try:
            material = {
                "version": VERSION,
                "package": package_version(),
                "python": sys.version,
                "cache_tag": sys.implementation.cache_tag,
                "paths": [[sp.folder, sp.trusted] for sp in registry.paths],
                "frozen": list(registry.frozen),
                "limits": repr(registry.limits),
                "formats": formats if not isinstance(formats, tuple) else list(formats),
                "plugins": _plugins(),
                "aliases": os.environ.get("TOOLCASCADE_MODEL_ALIASES"),
                "code": package_code(),
            }
            text = json.dumps(material, sort_keys=True)
            material = json.loads(text)  # as the file holds it (lists for tuples), to compare with what is read
            digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        except Exception as exc:  # a plugin that fails to load, an unencodable option: no index, never an error
            log.debug("no index: %s: %s", type(exc).__name__, exc)
            return None
        return cls(folder / f"index-{digest}.json", material)

    # -- reading -------------------------------------------------------------

    def load(self) -> None:
        """Read the file once; anything malformed leaves the index empty (it is rewritten later)."""
        if self.loaded:
            return
        self.loaded = True
        data = read_json(self.file, INDEX_BYTES)
        try:
            if not isinstance(data, dict) or data.get("version") != VERSION or data.get("key") != self.material:
                raise ValueError("not an index of these search paths")
            rows: list[tuple[str, Signature]] = []
            add = rows.append
            for path, sig in data["paths"]:  # tested inline: a generator per row cost more than the row
                if type(path) is not str:
                    raise ValueError("malformed path row")
                if sig is None:
                    add((path, None))
                elif type(sig) is list and len(sig) == 2 and type(sig[0]) is int and type(sig[1]) is int:
                    add((path, (sig[0], sig[1])))
                else:
                    raise ValueError("malformed path row")
            members = {}
            for key, ids in data["members"].items():
                members[int(key)] = tuple(self._ids(ids, len(rows)))
            decoder = Decoder(data["values"])
            entries = data["entries"]
            if not isinstance(entries, dict) or not all(isinstance(entries.get(n, {}), dict) for n in PERSISTED):
                raise ValueError("malformed entries")
        except (ValueError, TypeError, KeyError, AttributeError):
            self.stale = True
            return
        self.rows, self.members, self.decoder = rows, members, decoder
        self.texts = [path for path, _sig in rows]
        self.entries = {name: entries.get(name, {}) for name in PERSISTED}

    @staticmethod
    def _ids(ids: Any, count: int) -> list[int]:
        """Row numbers, checked.

        Raises:
            ValueError: not a list of row numbers.
        """
        if type(ids) is not list or (ids and (set(map(type, ids)) != _INT or min(ids) < 0 or max(ids) >= count)):
            raise ValueError("malformed row numbers")
        return ids

    def begin(self) -> None:
        """A listing starts: every path is looked at again (once, by its first lookup)."""
        self.load()
        self._valid = []
        self._checked = False
        self._rows_served = False

    def _check_rows(self, registry: Registry) -> None:
        """Look at every row's path once (one ``watch`` over them all) and note which rows are unchanged.

        Called by a listing's first lookup, after the listing raised the
        registry's bounds to its catalogue: every path is remembered, as any
        looked-at path is (the invariant of ``watch``). A folder's row is
        unchanged when its member files are too (one level deep, whatever
        the file says: no recursion to exhaust).
        """
        self._checked = True
        same = [now == sig for now, (_path, sig) in zip(registry.look_all(self.texts), self.rows, strict=True)]
        valid = same.copy()
        for row, files in self.members.items():
            if valid[row] and not all(map(same.__getitem__, files)):
                valid[row] = False
        self._valid = valid

    def valid(self, row: int) -> bool:
        """True when this listing found row ``row``'s path unchanged (False before its first lookup looked)."""
        valid = self._valid
        return row < len(valid) and valid[row]

    def lookup(self, registry: Registry, name: str, key: Any, checked: set[str] | None) -> Any:
        """The value of ``(name, key)`` when the file holds it and its paths are unchanged, else MISS.

        A value served is stored in the registry's derived cache with its
        paths, and they join ``checked``, as a computed value's would. The
        first lookup of a row (``described``) serves every row at once: a listing asks for all of them.
        """
        generation = registry.generation  # a change noticed meanwhile (any thread) keeps the value out of the cache
        code = self.code(registry, name, key)
        if code is None:
            return MISS
        if not self._checked:
            self._check_rows(registry)
        if name == "described":
            if not self._rows_served:
                self._rows_served = True
                self._serve_rows(registry, checked, generation)
            entry = registry.derived.get(name, {}).get(key)
            if entry is None or entry[2] is not checked or (name, key) not in self.kept:
                return MISS  # not kept, changed, or served to another pass: computed as before
            return entry[0]
        found = self._entry(name, self.entries.get(name, {}).get(code))
        if found is None:
            return MISS
        if checked is not None:
            checked.update(found[1])
        if registry.store(name, key, [*found, checked], generation):
            self.kept[(name, key)] = code
        return found[0]

    def _entry(self, name: str, row: Any) -> tuple[Any, frozenset[str]] | None:
        """A row of the file decoded, with its paths; None when absent, malformed or a path changed."""
        if row is None:
            return None
        try:
            data, ids = row
            ids = self._ids(ids, len(self.rows))
            if not all(map(self._valid.__getitem__, ids)):
                self.stale = True
                return None
            value = self.decoder.decode(name, data)
        except (ValueError, TypeError, KeyError):
            self.stale = True
            return None
        return value, frozenset(map(self.texts.__getitem__, ids))

    def _serve_rows(self, registry: Registry, checked: set[str] | None, generation: int) -> None:
        """Every ``described`` row whose paths are unchanged into the registry's cache, in one pass.

        What ``lookup`` does for one row, for all: each value is stored with
        its paths and ``checked`` (which they join), under one hold of the
        lock, and only while no change was seen since ``generation``.
        """
        served: list[tuple[Any, list[Any]]] = []
        used: set[int] = set()  # the rows of every path served: numbers, joined as texts once at the end
        valid, texts, count, paths = self._valid, self.texts, len(self.rows), registry.paths
        described = self.decoder.described
        # ``_entry`` inlined (its checks the same), the decoder's row method called directly: once per tool.
        for code, row in self.entries.get("described", {}).items():
            try:
                data, ids = row
                ids = self._ids(ids, count)
                if not all(map(valid.__getitem__, ids)):
                    self.stale = True
                    continue
                info = described(data)
            except (ValueError, TypeError, KeyError):
                self.stale = True
                continue
            if info.ref != code:
                continue
            used.update(ids)
            served.append(((code, paths), [info, frozenset(map(texts.__getitem__, ids)), checked]))
        if not registry.store_many("described", served, generation):
            return
        if checked is not None:
            checked.update(map(texts.__getitem__, used))
        self.kept.update((("described", key), key[0]) for key, _entry in served)

    def computed(self, registry: Registry, name: str, key: Any) -> None:
        """A value of a kept cache was computed during a listing: write it with the next save."""
        code = self.code(registry, name, key)
        if code is not None:
            self.kept[(name, key)] = code
            self.stale = True

    @staticmethod
    def code(registry: Registry, name: str, key: Any) -> str | None:
        """The text an entry is filed under, or None for keys the index does not keep."""
        if name == "described":
            ref, paths = key
            return ref if paths == registry.paths else None
        if name == "names":
            sp, prefix = key
            return json.dumps([sp.folder, sp.trusted, list(prefix)])
        return None

    # -- writing -------------------------------------------------------------

    def save(self, registry: Registry) -> None:
        """Write what the listing kept, when anything changed; never raises."""
        if not self.stale:
            return
        try:
            data = self._payload(registry)
            self._write(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
        except Exception as exc:  # a full disk, a read-only home, a value json refuses: the listing is done anyway
            log.debug("index not written: %s: %s", type(exc).__name__, exc)
        self.stale = False

    def _payload(self, registry: Registry) -> dict[str, Any]:
        table = _Table(registry, {**self._loaded_members(), **self.scanned})
        ids, rows, members, deps_of = table.ids, table.rows, table.members, table.deps_of
        encoder = Encoder()
        entries: dict[str, dict[str, Any]] = {name: {} for name in PERSISTED}
        for (name, key), code in list(self.kept.items()):
            entry = registry.derived.get(name, {}).get(key)
            if entry is None or len(entry) != 3:
                del self.kept[(name, key)]  # dropped since (a file changed): computed again when asked
                continue
            value = encoder.encode(name, entry[0])
            if value is MISS:
                continue
            deps = deps_of(sorted(entry[1]))
            if deps is not None:
                entries[name][code] = [value, deps]
        # What the file held and this listing did not ask for (``check`` lists names, not rows) is kept.
        carry = _Carry(self, encoder, ids, rows, members)
        for name in PERSISTED:
            for code, row in self.entries.get(name, {}).items():
                if code not in entries[name]:
                    carried = carry.entry(name, row)
                    if carried is not None:
                        entries[name][code] = carried
        return {
            "version": VERSION,
            "key": self.material,
            "paths": rows,
            "members": members,
            "values": encoder.values,
            "entries": entries,
        }

    def _loaded_members(self) -> dict[str, tuple[str, ...]]:
        """The member files of each folder row of the file as read (its entries may be written again)."""
        return {
            self.rows[row][0]: tuple(self.rows[m][0] for m in files)
            for row, files in self.members.items()
            if self.valid(row)
        }

    def _write(self, data: bytes) -> None:
        """Replace the file with ``data`` atomically; drop the oldest index files beyond ``INDEX_FILES``.

        Raises:
            OSError: the folder cannot be made or written.
        """
        if len(data) > INDEX_BYTES:
            return
        folder = self.file.parent
        replace_file(self.file, data)
        prune(folder, "index-", INDEX_FILES)

    def drop(self) -> None:
        """Forget the entries and remove the file (``Manager.clear_cache()``)."""
        self.rows, self.texts, self.members, self.entries, self.decoder = [], [], {}, {}, Decoder([])
        self.kept.clear()
        self.scanned.clear()
        self._valid = []
        self.loaded = True
        self.stale = True
        try:
            os.unlink(self.file)
        except OSError:
            pass


class _Carry:
    """Entries of the file as read, written again with the new path table unless one of their paths changed."""

    def __init__(
        self, index: Index, encoder: Encoder, ids: dict[str, int], rows: list[list[Any]], members: dict[str, list[int]]
    ) -> None:
        self.index = index
        self.encoder = encoder
        self.ids = ids
        self.rows = rows
        self.members = members
        self._numbers: dict[int, int] = {}

    def entry(self, name: str, row: Any) -> list[Any] | None:
        """``row`` renumbered for the new file, or None: malformed, or a path changed (or was stat-ed changed)."""
        index = self.index
        try:
            data, old = row
            old = index._ids(old, len(index.rows))
            if name == "described":
                if type(data) is not list or len(data) != 9:
                    return None
                data = [*data[:5], self._value(data[5]), *data[6:]]
        except (ValueError, TypeError):
            return None
        found = []
        for i in old:
            at = self._row(i)
            if at is None:
                return None
            files = index.members.get(i)
            if files and str(at) not in self.members:
                inner = [self._row(m) for m in files]
                if None in inner:
                    return None
                self.members[str(at)] = inner  # type: ignore[assignment]
            found.append(at)
        return [data, found]

    def _value(self, number: Any) -> int:
        """The new number of the old file's value ``number``.

        Raises:
            ValueError: no such value.
        """
        values = self.index.decoder.values
        if type(number) is not int or not 0 <= number < len(values):
            raise ValueError("malformed value number")
        found = self._numbers.get(number)
        if found is None:
            params, frozen = values[number]
            found = self._numbers[number] = self.encoder.number(params, frozen)
        return found

    def _row(self, i: int) -> int | None:
        """The new row of the old row ``i``: None when it was seen changed, or the new table has it otherwise."""
        index = self.index
        valid = index._valid
        if i < len(valid) and not valid[i]:
            return None
        path, sig = index.rows[i]
        want = None if sig is None else list(sig)
        at = self.ids.get(path)
        if at is None:
            at = self.ids[path] = len(self.rows)
            self.rows.append([path, want])
        elif self.rows[at][1] != want:
            return None
        return at


class _Table:
    """The path table a write builds: each path's row (its signature when read), once, and each folder's members."""

    def __init__(self, registry: Registry, folders: dict[str, tuple[str, ...]]) -> None:
        self.registry = registry
        self.folders = folders  # folder -> the files whose declared names its entry read
        self.racy = time.time_ns() - RACY_NS
        self.declared = registry.declared_signatures()
        self.frozen = registry.freshness.is_frozen
        self.ids: dict[str, int] = {}
        self.rows: list[list[Any]] = []
        self.members: dict[str, list[int]] = {}
        self.refused: set[str] = set()
        self.done: dict[str, int] = {}  # each path's row once it passed (-1: frozen, vouched for by the key)

    def sig_of(self, path: str) -> Signature | Any:
        seen = self.registry.seen(path)
        read = self.declared.get(path, seen)
        if seen is not MISS and read != seen:
            return MISS  # the file changed between reading its name and loading it: vouch for neither
        return read

    def row_of(self, path: str) -> int | None:
        """The row of ``path``, or None: never looked at, changed while read, or racy."""
        sig = self.sig_of(path)
        if sig is MISS or (sig is not None and sig[0] >= self.racy):
            return None
        at = self.ids.get(path)
        if at is None:
            at = self.ids[path] = len(self.rows)
            self.rows.append([path, None if sig is None else list(sig)])
        return at

    def deps_of(self, paths: Iterable[str]) -> list[int] | None:
        """The rows of ``paths`` (a folder's with its members), or None when one cannot be vouched for."""
        found = []
        done, members = self.done, self.members
        for path in paths:
            at = done.get(path)
            if at is not None:
                if at >= 0:
                    found.append(at)
                continue
            if self.frozen(path):
                done[path] = -1
                continue
            if path in self.refused:
                return None
            at = self.row_of(path)
            if at is None:
                self.refused.add(path)
                return None
            files = self.folders.get(path)
            if files and str(at) not in members:
                inner = [self.row_of(file) for file in files]
                if None in inner:
                    self.refused.add(path)
                    return None
                members[str(at)] = inner  # type: ignore[assignment]
            done[path] = at
            found.append(at)
        return found
