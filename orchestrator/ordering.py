"""Entries and their order: phases, before/after constraints, a stable topological sort.

Every constraint becomes an edge, then the graph is sorted once (R-CHAIN-3):
among the nodes free to go next, the earliest phase first, then the one
inserted first. Phase sentinels (``$name``) are nodes that never reach the
chain. Sorts are cached by the shape of their input: at most
``SHAPE_CACHE_SIZE`` shapes, each of at most ``SHAPE_CACHE_ENTRIES`` entries
and ``SHAPE_CACHE_CHARS`` characters of names (larger chains, which only
callers build, are sorted every time rather than kept alive by the cache).

Extra middleware comes from callers as data (R-CHAIN-4); every malformed spec
is refused with ``ConfigurationError`` naming the accepted forms (``FORMS``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, OrderCycleError, SecurityError
from .names import brief, names

if TYPE_CHECKING:
    from .cascade import Merged
    from .tool import Tool

DEFAULT_AFTER = ("$configure",)
DEFAULT_BEFORE = ("$post-configure",)
FIELDS = ("name", "args", "before", "after", "remove", "fn")
FORMS = "a middleware spec is {args: ..., before: [...], after: [...], remove: true} or a list of such with name"

# Bounds of the sorted-chain cache (see the module docstring).
SHAPE_CACHE_SIZE = 4096
SHAPE_CACHE_ENTRIES = 64
SHAPE_CACHE_CHARS = 4096

Shape = tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """One middleware in a chain: a tool name, its args, its constraints, or a direct ``fn``."""

    name: str
    args: Any = None
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    remove: bool = False
    fn: Callable[..., Any] | None = None
    # When the entry's tool has work for a target (its frontmatter's ``when``; orchestrator.conditions).
    when: Callable[..., bool] | None = field(default=None, compare=False, repr=False)

    @property
    def constrained(self) -> bool:
        """True when the entry brings constraints of its own (else the defaults apply)."""
        return bool(self.before or self.after)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``fn`` left out), as an entry round-trips through JSON."""
        data: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.before:
            data["before"] = list(self.before)
        if self.after:
            data["after"] = list(self.after)
        if self.remove:
            data["remove"] = True
        return data


def constraints(spec: Mapping[str, Any] | None, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(before, after) from an ``$order`` value or an entry spec.

    Raises:
        ConfigurationError: ``spec`` is not a mapping, or a constraint is not a name or list of names.
    """
    if not spec:
        return (), ()
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"the order of {name!r} must be {{before: [...], after: [...]}}, not {brief(spec)}")
    before, after = spec.get("before"), spec.get("after")  # the messages are built only for a constraint given
    return (
        names(before, f"before of {name!r}") if before is not None else (),
        names(after, f"after of {name!r}") if after is not None else (),
    )


def check_spec(name: Any, spec: Any, source: str) -> str:
    """Check one extra-middleware spec from caller data; return the entry name it gives.

    ``name`` is the mapping key (mapping form) or None (list form, where the
    spec carries ``name``). Accepted: ``args`` anything, ``before``/``after``
    a name or list of names, ``remove`` a boolean, ``fn`` a callable.

    Raises:
        ConfigurationError: not a mapping, unknown fields, a missing or ``$`` name,
            fields of the wrong type. The message shows the accepted forms.
    """
    if not isinstance(spec, Mapping):
        label = f"middleware {brief(name)}" if name is not None else "middleware"
        raise ConfigurationError(f"{label} from {source}: {FORMS}; got {brief(spec)}")
    unknown = [key for key in spec if key not in FIELDS]
    name = spec.get("name", name)
    if not isinstance(name, str) or not name or name.startswith("$"):
        raise ConfigurationError(
            f"middleware from {source} needs a 'name' that is a tool name, not a '$' sentinel; "
            f"{FORMS}; got name {brief(name)}"
        )
    if unknown:
        raise ConfigurationError(
            f"middleware {name!r} from {source}: unknown field(s) {', '.join(sorted(brief(k) for k in unknown))} "
            f"(fields: {', '.join(FIELDS)}; tool arguments go under 'args')"
        )
    for field_ in ("before", "after"):
        if spec.get(field_) is not None:
            names(spec[field_], f"middleware {name!r} from {source}: {field_}")
    remove = spec.get("remove")
    if remove is not None and not isinstance(remove, bool):
        raise ConfigurationError(
            f"middleware {name!r} from {source}: 'remove' must be true or false, not {brief(remove)}"
        )
    fn = spec.get("fn")
    if fn is not None and not callable(fn):
        raise ConfigurationError(f"middleware {name!r} from {source}: 'fn' must be callable, not {brief(fn)}")
    return name


def entry_from_spec(name: str | None, spec: Any, source: str) -> Entry:
    """Build an Entry from caller data: ``{args, before, after, remove, fn}`` (plus ``name`` in list form).

    Raises:
        ConfigurationError: not a mapping, unknown fields, a missing or ``$`` name, malformed
            constraints, a ``remove`` that is not a boolean or an ``fn`` that is not callable.
    """
    name = check_spec(name, spec, source)
    before, after = constraints(spec, name)
    # A spec says what changes. Without args a new entry runs with {} (as `name: {}` in metadata does);
    # an existing one keeps its own (build_chain).
    args = spec["args"] if "args" in spec else {}
    return Entry(name, args, before, after, bool(spec.get("remove", False)), spec.get("fn"))


def _rank(entry_after: Iterable[str], rank: Mapping[str, int]) -> int:
    return max((rank[s] for s in entry_after if s in rank), default=0)


def _sort_indexes(shape: Shape, phases: tuple[str, ...]) -> tuple[int, ...]:
    rank = {phase: i for i, phase in enumerate(phases)}
    # node -> its successors; nodes and successors in the order first mentioned (ties keep to it)
    succ: dict[Any, dict[Any, None]] = {}
    key: dict[Any, tuple[int, int]] = {}

    def edge(u: Any, v: Any) -> None:
        succ.setdefault(u, {})
        succ.setdefault(v, {})
        succ[u][v] = None

    for phase in phases:
        succ.setdefault(phase, {})
        key[phase] = (rank[phase], -1)
    for u, v in pairwise(phases):
        edge(u, v)
    by_name: dict[str, list[int]] = {}
    for index, (name, _, _) in enumerate(shape):
        by_name.setdefault(name, []).append(index)

    def nodes(ref: str) -> list[Any]:
        if ref.startswith("$"):
            if ref not in key:
                succ.setdefault(ref, {})
                key[ref] = (0, -1)
            return [ref]
        return list(by_name.get(ref, ()))  # constraints on absent entries are ignored

    for index, (_name, before, after) in enumerate(shape):
        if not before and not after:
            before, after = DEFAULT_BEFORE, DEFAULT_AFTER
        succ.setdefault(index, {})
        key[index] = (_rank(after, rank), index)
        for ref in after:
            for node in nodes(ref):
                if node != index:
                    edge(node, index)
        for ref in before:
            for node in nodes(ref):
                if node != index:
                    edge(index, node)
    order = _topological(succ, key)
    if order is None:
        raise OrderCycleError(shape[n][0] if isinstance(n, int) else n for n in _cycle(succ))
    return tuple(n for n in order if isinstance(n, int))


def _topological(succ: dict[Any, dict[Any, None]], key: Mapping[Any, tuple[int, int]]) -> list[Any] | None:
    """Kahn's algorithm, always taking the smallest key (ties: first mentioned); None on a cycle."""
    position = {node: i for i, node in enumerate(succ)}
    indegree = dict.fromkeys(succ, 0)
    for out in succ.values():
        for node in out:
            indegree[node] += 1
    ready = [(key[node], position[node], node) for node, count in indegree.items() if count == 0]
    heapq.heapify(ready)
    order: list[Any] = []
    while ready:
        node = heapq.heappop(ready)[2]
        order.append(node)
        for child in succ[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, (key[child], position[child], child))
    return order if len(order) == len(succ) else None


def _cycle(succ: dict[Any, dict[Any, None]]) -> list[Any]:
    """The nodes of one cycle, as networkx's ``find_cycle`` names it (only a cycle error needs networkx)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(succ)
    graph.add_edges_from((u, v) for u, out in succ.items() for v in out)
    return [edge[0] for edge in nx.find_cycle(graph)]


# Most chains are a handful of entries from files: cached. A chain a caller
# built from thousands of names would only crowd the cache (and be kept alive
# by it), so it is sorted every time.
_sorted_indexes = lru_cache(maxsize=SHAPE_CACHE_SIZE)(_sort_indexes)


def _cacheable(shape: Shape) -> bool:
    """True when ``shape`` is small enough to keep in the sorted-chain cache."""
    if len(shape) > SHAPE_CACHE_ENTRIES:
        return False
    chars = 0
    for name, before, after in shape:
        chars += len(name) + sum(map(len, before)) + sum(map(len, after))
    return chars <= SHAPE_CACHE_CHARS


def shape_of(entries: Sequence[Entry]) -> Shape:
    """The part of a chain its order depends on."""
    return tuple((e.name, e.before, e.after) for e in entries)


def sort_entries(entries: Sequence[Entry], phases: tuple[str, ...], tool: str | None = None) -> list[Entry]:
    """Entries in chain order (R-CHAIN-3); the same input always gives the same order.

    Raises:
        OrderCycleError: the constraints form a cycle (listed in the message).
    """
    shape = shape_of(entries)
    try:
        indexes = _sorted_indexes(shape, phases) if _cacheable(shape) else _sort_indexes(shape, phases)
    except OrderCycleError as exc:
        raise OrderCycleError(exc.cycle, tool=tool) from None
    return [entries[i] for i in indexes]


def with_args(entry: Entry, args: Any) -> Entry:
    """``entry`` with other args (``dataclasses.replace`` without its per-call field introspection)."""
    return Entry(entry.name, args, entry.before, entry.after, entry.remove, entry.fn, entry.when)


def with_when(entry: Entry, when: Callable[..., bool]) -> Entry:
    """``entry`` with the ``when`` of its tool (as ``with_args``)."""
    return Entry(entry.name, entry.args, entry.before, entry.after, entry.remove, entry.fn, when)


def strip(entry: Entry, gone: set[str]) -> Entry:
    """The entry without constraints that name entries in ``gone`` (already run)."""
    before = tuple(n for n in entry.before if n not in gone)
    after = tuple(n for n in entry.after if n not in gone)
    if before == entry.before and after == entry.after:
        return entry
    return replace(entry, before=before, after=after)


def extra_specs(value: Any, source: str) -> list[tuple[str, Mapping[str, Any], str]]:
    """Extra middleware in either form (mapping name -> spec, or list of specs with ``name``), each checked.

    Raises:
        ConfigurationError: not a mapping or a list, or a malformed spec (see ``check_spec``);
            the message shows the accepted forms.
    """
    if value is None:
        return []
    found = []
    if isinstance(value, Mapping):
        for name, spec in value.items():
            if not isinstance(name, str):
                raise ConfigurationError(f"middleware from {source}: names must be strings; {FORMS}; got {brief(name)}")
            check_spec(name, spec, source)
            found.append((name, spec, source))
    elif isinstance(value, list):
        for spec in value:
            if not isinstance(spec, Mapping) or "name" not in spec:
                raise ConfigurationError(
                    f"middleware from {source}: each list item needs a 'name'; {FORMS}; got {brief(spec)}"
                )
            found.append((check_spec(None, spec, source), spec, source))
    else:
        raise ConfigurationError(
            f"middleware from {source} must be a mapping or a list: {FORMS}; got {type(value).__name__}"
        )
    return found


def build_chain(
    tool: Tool,
    merged: Merged,
    verdicts: Iterable[tuple[str, bool, str]],
    extra: list[tuple[str, Mapping[str, Any], str]],
    phases: tuple[str, ...],
    origins: dict[str, str],
) -> list[Entry]:
    """The sorted chain: an entry per middleware key, then extra middleware applied (R-CHAIN-4, R-CHAIN-5).

    ``origins`` is filled with where each entry came from (for explain).

    Raises:
        SecurityError: extra middleware removing or overriding a locked entry.
        ConfigurationError: malformed extra middleware; OrderCycleError on a cycle.
    """
    entries: dict[str, Entry] = {}
    for key, middleware, _reason in verdicts:
        if middleware:
            try:
                before, after = constraints(merged.order.get(key), key)
            except ConfigurationError as exc:
                raise ConfigurationError(exc.detail, tool=tool.name, key="$order") from None
            entries[key] = Entry(key, merged.values[key], before, after)
            origins[key] = "metadata"
    for name, spec, source in extra:
        current = entries.get(name)
        if spec.get("remove"):
            if current is not None:
                if name in merged.locked:
                    raise SecurityError(
                        f"middleware {name!r} is locked and cannot be removed", tool=tool.name, key=name
                    )
                del entries[name]
            continue
        made = entry_from_spec(name, spec, source)
        if current is None:
            entries[name] = made
            origins[name] = "extra"
            continue
        if name in merged.locked:
            raise SecurityError(f"middleware {name!r} is locked and cannot be overridden", tool=tool.name, key=name)
        entries[name] = replace(
            current,
            args=made.args if "args" in spec else current.args,
            fn=made.fn if made.fn is not None else current.fn,
            before=made.before if made.constrained else current.before,
            after=made.after if made.constrained else current.after,
        )
        origins[name] = "override"
    return sort_entries(list(entries.values()), phases, tool.name)


def unsorted_chain(merged: Merged, verdicts: Iterable[tuple[str, bool, str]]) -> list[Entry]:
    """The middleware entries in merged order, unsorted: what ``show`` lists when ``$order`` has a cycle."""
    entries = []
    for key, middleware, _why in verdicts:
        if middleware:
            before, after = constraints(merged.order.get(key), key)
            entries.append(Entry(key, merged.values[key], before, after))
    return entries
