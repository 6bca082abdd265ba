"""Likely typos ``check`` warns about: names one edit from a tool name, unknown frontmatter keys, misspelt refs.

A metadata key or a directive one edit from a tool name silently becomes
data or text instead of running that tool; ``NearNames`` finds such names
without comparing every pair.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .directives import find_directives
from .problems import Report
from .registry import Snapshot, close_refs

if TYPE_CHECKING:
    from .manager import Manager
    from .tool import Tool

# Shorter keys (log, cwd, tag, dog ...) are one edit from too many words to be worth a warning.
MIN_TYPO_LENGTH = 4


def one_edit_apart(a: str, b: str) -> bool:
    """True when one insertion, deletion, substitution or swap of neighbours turns ``a`` into ``b``."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        swapped = start + 1 < len(a) and a[start] == b[start + 1] and a[start + 1] == b[start]
        return a[start + 1 :] == b[start + 1 :] or (swapped and a[start + 2 :] == b[start + 2 :])
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return shorter[start:] == longer[start + 1 :]


class NearNames:
    """Names indexed by their deletion neighbourhoods: which lie one edit from a key, without comparing all pairs.

    Two strings one insertion, deletion, substitution or swap of neighbours
    apart always share a string made by deleting at most one character from
    each (a swap ``xPQy``/``xQPy``: both give ``xQy``). So a key's candidates
    are the names filed under the key and its one-character deletions, a
    handful of dict lookups; ``one_edit_apart`` then decides each candidate,
    so the answer is exactly the all-pairs one.
    """

    def __init__(self, names: Iterable[str]) -> None:
        # Indexed by length on demand: a name one edit from a key is at most one character longer or shorter, so
        # the metadata keys a check asks about (``tags``, ``owner``) never index a catalog's long refs.
        self._by_length: dict[int, list[str]] = {}
        for name in set(names):
            self._by_length.setdefault(len(name), []).append(name)
        self.by_variant: dict[str, list[str]] = {}  # each indexed name under itself and its deletions
        self.compared = 0  # candidates given to one_edit_apart: what tests count instead of time
        self._near: dict[str, list[str]] = {}  # each key's answer: a catalog's tools share their keys

    def near(self, key: str) -> list[str]:
        """The names one edit from ``key`` (never ``key`` itself), sorted (the same list for the same key)."""
        known = self._near.get(key)
        if known is None:
            known = self._near[key] = self._find(key)
        return known

    def _find(self, key: str) -> list[str]:
        for length in (len(key) - 1, len(key), len(key) + 1):
            self._index(self._by_length.pop(length, ()))
        candidates: set[str] = set()
        for variant in _deletions(key):
            candidates.update(self.by_variant.get(variant, ()))
        self.compared += len(candidates)
        return sorted(name for name in candidates if one_edit_apart(key, name))

    def _index(self, names: Iterable[str]) -> None:
        """File ``names`` (each once, all of one length) under themselves and their one-character deletions."""
        found = self.by_variant
        for name in names:
            for variant in _deletions(name):
                bucket = found.get(variant)
                if bucket is None:
                    found[variant] = [name]
                else:
                    bucket.append(name)  # a name's variants are distinct: a list holds it once


def _deletions(text: str) -> set[str]:
    """``text`` and every string one character shorter made from it."""
    return {text, *(text[:i] + text[i + 1 :] for i in range(len(text)))}


def did_you_mean(name: str, refs: Iterable[str]) -> str:
    """``; did you mean 'a' or 'b'?`` with the refs ``name`` may have meant (``close_refs``), else ``""``."""
    close = close_refs(name, refs)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def suggest(name: str, candidates: Iterable[str]) -> str:
    """``; did you mean 'x'?`` with the closest of ``candidates``, else ``""``."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_keys(
    frontmatter: Mapping[str, Any], known: Iterable[str], path: Path | None, lines: Mapping[str, int], report: Report
) -> None:
    """Warn of each frontmatter key not in ``known``: it is ignored."""
    known = tuple(known)
    for key in frontmatter:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        report.warn(path, lines.get(key), f"unknown frontmatter key {key!r} is ignored{hint}")


def near_misses(
    manager: Manager,
    metadata: Mapping[str, Any],
    path: Path | None,
    lines: Mapping[str, int],
    near: NearNames,
    report: Report,
    run: Snapshot,
) -> None:
    """Warn of metadata keys one edit from a tool name: they silently become data instead of middleware.

    What a key is (a tool, or the names one edit from it) is looked up once
    per ``run``: a catalog's tools share their keys, and a run looks at each
    folder once, so the answer is the same each time.
    """
    static = metadata.get("$static")
    deliberate = {static} if isinstance(static, str) else set(static) if isinstance(static, list) else set()
    known = run.values
    for key in metadata:
        if not isinstance(key, str) or key.startswith("$") or key in deliberate or len(key) < MIN_TYPO_LENGTH:
            continue
        close = known.get(("near-miss", near, key))
        if close is None:
            close = known[("near-miss", near, key)] = (
                () if manager.registry.exists(key, manager.paths, run) else tuple(near.near(key))
            )
        if close:
            report.warn(path, lines.get(key), f"metadata key {key!r} is not a tool; did you mean {close[0]!r}?")


def check_directives(manager: Manager, tool: Tool, near: NearNames, report: Report, run: Snapshot) -> None:
    """A directive one edit from a tool name: it names no tool, so it stays text (most likely a typo)."""
    prompt = tool.prompt
    if not isinstance(prompt, str) or ":" not in prompt:
        return
    for directive in find_directives(prompt):
        name = directive.name
        if len(name) < MIN_TYPO_LENGTH or manager.registry.exists(name, manager.paths, run):
            continue
        close = near.near(name)
        if close:
            report.warn(
                tool.path,
                tool.prompt_line + directive.line - 1,
                f"directive :{name} names no tool, so it stays text; did you mean {close[0]!r}?",
            )
