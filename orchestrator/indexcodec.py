"""How the on-disk index (``orchestrator.index``) writes cached values as JSON data, and reads them back checked.

Two of the registry's derived caches are kept: ``names`` (what one folder
offers, ``orchestrator.folders.Names``) and ``described`` (one ``list`` row,
a ``ToolInfo``). ``Encoder`` turns a value into JSON data, or refuses one
JSON does not carry exactly; ``Decoder`` checks every field of what it reads
back and raises ``ValueError`` for anything an ``Encoder`` would not write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .cachefolder import plain
from .folders import Names
from .frozen import freeze
from .searchpath import UNSEEN
from .tool import ToolInfo

_TEXTS = frozenset({str, type(None)})  # what ``_text`` accepts

MISS: Any = UNSEEN  # what a lookup returns for nothing kept, and the signature of a path never looked at


def _text(value: Any) -> bool:
    return value is None or type(value) is str


class Encoder:
    """Cached values as JSON data; equal ``params`` are written once (a catalog's tools share a few shapes)."""

    def __init__(self) -> None:
        self.values: list[list[Any]] = []  # [params, frozen]
        self._numbers: dict[tuple[str, bool], int] = {}

    def number(self, params: Any, frozen: bool) -> int:
        """The number ``params`` is written under (equal values share one; key order kept: it shows in listings).

        Values are told apart by their ``repr``: for what JSON carries (dicts,
        lists, strings, ints, floats, bools, None: ``plain`` values, or JSON
        read back) two reprs are equal exactly when the JSON texts are, key
        order, ``1`` against ``1.0`` against ``true`` included; and the C repr
        is a third of the cost of JSON encoding (``JSONEncoder.encode`` builds
        its encoder every call): ~2 us a row of a listing.
        """
        shape = (repr(params), frozen)
        found = self._numbers.get(shape)
        if found is None:
            found = self._numbers[shape] = len(self.values)
            self.values.append([params, frozen])
        return found

    def encode(self, name: str, value: Any) -> Any:
        """``value`` of the derived cache ``name`` as JSON data, or MISS when it cannot be carried exactly."""
        if name == "described":
            info = value
            if type(info) is not ToolInfo or info.error is not None:
                return MISS
            texts = (info.description, info.role, info.format)
            if not (type(info.ref) is str and type(info.name) is str and type(info.kind) is str):
                return MISS
            if type(info.hidden) is not bool or not (
                type(texts[0]) in _TEXTS and type(texts[1]) in _TEXTS and type(texts[2]) in _TEXTS
            ):  # tested inline, as ``Decoder.described`` does: a generator per row
                return MISS
            frozen = plain(info.params, True)
            if not (frozen or plain(info.params)):
                return MISS
            number = self.number(info.params, frozen)
            path = None if info.path is None else str(info.path)
            return [info.ref, info.name, info.kind, info.description, info.hidden, number, path, *texts[1:]]
        if name == "names":
            refs = [[last, str(path), fmt] for last, (path, fmt) in value.refs.items()]
            clashes = [[ref, str(a), str(b), kind] for ref, a, b, kind in value.clashes]
            if not all(_text(fmt) for _l, _p, fmt in refs) or type(value.files) is not int:
                return MISS
            return {"refs": refs, "clashes": clashes, "files": value.files}
        return MISS


class Decoder:
    """What an ``Encoder`` wrote, checked; each shared value and path is made once."""

    def __init__(self, values: Any) -> None:
        if type(values) is not list:
            raise ValueError("malformed values")
        self.values = values
        self._made: dict[int, Any] = {}
        self._paths: dict[str, Path] = {}

    def path(self, text: Any) -> Path:
        """``text`` as a Path (one per text): its folder's joined with its name (Python 3.11: 60% of parsing it whole).

        Raises:
            ValueError: not a string.
        """
        if type(text) is not str:
            raise ValueError("malformed path")
        found = self._paths.get(text)
        if found is None:
            folder, _, name = text.rpartition("/")
            if not (folder and folder[-1] != "/" and os.sep == "/" and os.altsep is None):
                folder, name = os.path.split(text)  # else what it gives, without its cost
            found = self._paths[text] = self.path(folder) / name if folder and name else Path(text)
        return found

    def value(self, number: Any) -> Any:
        """The ``params`` value numbered ``number``; frozen ones are shared, plain ones copied per use.

        Raises:
            ValueError: no such value, or not one ``plain`` accepts.
        """
        if type(number) is not int or not 0 <= number < len(self.values):
            raise ValueError("malformed value number")
        made = self._made.get(number, MISS)
        if made is MISS:
            row = self.values[number]
            if type(row) is not list or len(row) != 2 or type(row[1]) is not bool or not plain(row[0]):
                raise ValueError("malformed value")
            made = self._made[number] = (freeze(row[0]), True) if row[1] else (row[0], False)
        return made[0] if made[1] else json.loads(json.dumps(made[0]))

    def described(self, data: Any) -> ToolInfo:
        """The ``ToolInfo`` (a row of ``list``) ``Encoder.encode("described", ...)`` made ``data`` from.

        Raises:
            ValueError: ``data`` is not what ``encode`` writes.
        """
        if type(data) is not list or len(data) != 9:
            raise ValueError("a described row is a list of 9")
        ref, tool, kind, description, hidden, number, path, role, fmt = data
        if not (type(ref) is str and type(tool) is str and type(kind) is str and type(hidden) is bool):
            raise ValueError("malformed described row")
        if not (type(description) in _TEXTS and type(role) in _TEXTS and type(fmt) in _TEXTS):
            raise ValueError("malformed described row")  # tested inline: a generator per row cost 10 ms
        if path is not None:
            path = self._paths.get(path) or self.path(path)  # one Path per text, shared with ``names``
        made = self._made.get(number, MISS) if type(number) is int else MISS
        params = made[0] if made is not MISS and made[1] else self.value(number)  # a frozen value is shared
        return ToolInfo(ref, tool, kind, description, hidden, params, path, None, role, fmt)

    def decode(self, name: str, data: Any) -> Any:
        """The cached value ``Encoder.encode`` made ``data`` from.

        Raises:
            ValueError: ``data`` is not what ``encode`` writes.
        """
        if name == "described":
            return self.described(data)
        if name == "names":
            refs = {}
            for last, path, fmt in data["refs"]:
                if type(last) is not str or not _text(fmt):
                    raise ValueError("malformed names row")
                refs[last] = (self.path(path), fmt)
            clashes = []
            for ref, a, b, kind in data["clashes"]:
                if type(ref) is not str or type(kind) is not str:
                    raise ValueError("malformed clash")
                clashes.append((ref, self.path(a), self.path(b), kind))
            files = data["files"]
            if type(files) is not int:
                raise ValueError("malformed file count")
            return Names(refs, tuple(clashes), files)
        raise ValueError(f"no index for {name!r}")
