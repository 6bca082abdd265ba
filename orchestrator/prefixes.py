"""Prefixes: what the cascades of a catalog's tools share, the merge of their leading authority levels, done once.

Planning 10,000 tools under 100 folders merged the same two authorities
10,000 times. Their levels are shared (``cascade._authority_level`` makes
one per parsed file), so their merge and the keys they leave are kept by the
levels' identities (the entry holds the levels, so no identity is reused),
and each tool's own levels are merged onto them: the same values, order and
provenance as one merge of every level (``cascade.merge_levels``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from .cascade import MISSING, POLICIES, Level, Merged, Source, merge_levels
from .errors import ConfigurationError
from .frozen import freeze
from .names import names

T = TypeVar("T")

# What the leading authority levels leave, shared by every tool under them, by the levels' identities:
# (the levels, kept alive so no identity is reused, and what was made of them). At most _PREFIXES_SIZE entries each.
_PREFIXES: dict[tuple[int, ...], tuple[tuple[Level, ...], Merged]] = {}  # their merge
_PREFIX_KEYS: dict[
    tuple[int, ...], tuple[tuple[Level, ...], tuple[dict[str, None], set[str], list[str]]]
] = {}  # key sets (copied on use), and the keys they leave
_PREFIXES_SIZE = 1024
_SHARED_KINDS = frozenset({"authority", "managed"})


def _shared(levels: Sequence[Level]) -> int:
    """How many of ``levels`` lead as authority (or managed) levels: those every tool under them shares."""
    shared = 0
    while shared < len(levels) and levels[shared].kind in _SHARED_KINDS:
        shared += 1
    return shared


def _kept(
    cache: dict[tuple[int, ...], tuple[tuple[Level, ...], T]], prefix: Sequence[Level], make: Callable[[], T]
) -> T:
    """``make()`` for the levels ``prefix``, made once per set of them and kept in ``cache`` by their identities."""
    key = tuple(map(id, prefix))
    hit = cache.get(key)
    if hit is None:
        hit = (tuple(prefix), make())
        if len(cache) >= _PREFIXES_SIZE:
            cache.clear()
        cache[key] = hit
    return hit[1]


def merge_plain(levels: Sequence[Level], tool: str) -> Merged:
    """``merge_levels(levels, None, tool)``: templates left as written, the leading authority levels merged once.

    A last level without annotations (most tools' own) is merged onto their merge by ``_merge_own``.

    Raises:
        ConfigurationError: a merge policy that does not fit.
    """
    shared = _shared(levels)
    if shared < 2:
        return merge_levels(levels, None, tool)
    prefix = levels[:shared]
    base = _kept(_PREFIXES, prefix, lambda: merge_levels(prefix, None, tool))
    if shared == len(levels):
        return base
    if shared == len(levels) - 1 and not levels[-1].annotations:
        return _merge_own(base, levels[-1])
    return merge_levels(levels[shared:], None, tool, base)


def _merge_own(base: Merged, level: Level) -> Merged:
    """``merge_levels([level], None, tool, base)`` for a level without annotations: only its data is merged.

    Its keys are merged as ``Merger.add`` merges them; every annotation
    (order, ``$static``, ``$dynamic``, locks, policies, ``$attach``) is the
    base's, shared rather than copied, and the base's values are frozen already.

    Raises:
        ConfigurationError: a merge policy that does not fit.
    """
    values = dict(base.values)
    sources = dict(base.sources)
    removed = base.removed
    policies = base.policies
    fresh = Source(level.name, level.kind, "default", (level.name,))  # every new key's, shared (it is immutable)
    for key, value in level.data.items():
        policy = policies.get(key, "default")
        old = values.get(key, MISSING)
        if old is MISSING and policy == "default":
            values[key] = value  # a key the base lacks: the level's (frozen) value as it is
            sources[key] = fresh
        else:
            try:
                values[key] = freeze(POLICIES[policy](old, value))
            except ConfigurationError as exc:
                raise ConfigurationError(
                    exc.detail, level=level.name, key=key, path=level.path, line=level.lines.get(key)
                ) from None
            previous = sources.get(key)
            chain = (*previous.levels, level.name) if previous and old is not MISSING else (level.name,)
            sources[key] = Source(level.name, level.kind, policy, chain)
        if key in removed:
            removed = {k: v for k, v in removed.items() if k != key}
    return Merged(
        values,
        sources,
        base.order,
        base.static,
        base.dynamic,
        base.locked,
        removed,
        policies,
        base.attach,
        base.attach_level,
    )


def static_keys(levels: Sequence[Level]) -> list[str]:
    """Keys of levels 1-3 after ``$remove``, before overrides, minus ``$static`` (R-CAS-8).

    The leading authority levels' part is worked out once (``_kept``), as their merge is.
    """
    shared = _shared(levels)
    if shared < 2:
        keys, static = _key_sets(levels)
    else:
        prefix = levels[:shared]
        prefix_keys, prefix_static, left = _kept(_PREFIX_KEYS, prefix, lambda: _prefix_key_sets(prefix))
        if shared == len(levels) - 1 and not levels[-1].annotations:
            # Most tools' own level: its new keys follow the prefix's (no $remove, $static or $dynamic to apply),
            # without copying the prefix's sets for each tool.
            return left + [k for k in levels[-1].data if k not in prefix_keys and k not in prefix_static]
        keys, static = _key_sets(levels[shared:], dict(prefix_keys), set(prefix_static))
    return [k for k in keys if k not in static]


def _prefix_key_sets(prefix: Sequence[Level]) -> tuple[dict[str, None], set[str], list[str]]:
    """``_key_sets(prefix)``, and the keys they leave (those not listed in ``$static``)."""
    keys, static = _key_sets(prefix)
    return keys, static, [k for k in keys if k not in static]


def _key_sets(
    levels: Iterable[Level], keys: dict[str, None] | None = None, static: set[str] | None = None
) -> tuple[dict[str, None], set[str]]:
    """The keys ``levels`` leave (in order) and those ``$static`` lists, onto ``keys`` and ``static``."""
    keys = {} if keys is None else keys
    static = set() if static is None else static
    for level in levels:
        notes = level.annotations
        if notes:
            for key in names(notes.get("$remove"), "$remove"):
                keys.pop(key, None)
            static.update(names(notes.get("$static"), "$static"))
            static.difference_update(names(notes.get("$dynamic"), "$dynamic"))
        keys.update(dict.fromkeys(level.data))
    return keys, static
