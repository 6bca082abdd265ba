"""Entries and their order: phases, before/after constraints, a stable topological sort.

Every constraint becomes an edge, then the graph is sorted once (R-CHAIN-3):
among the nodes free to go next, the earliest phase first, then the one
inserted first. Phase sentinels (``$name``) are nodes that never reach the
chain. Sorts are cached by the shape of their input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, OrderCycleError, SecurityError

if TYPE_CHECKING:
    from .cascade import Merged
    from .tool import Tool

DEFAULT_AFTER = ("$configure",)
DEFAULT_BEFORE = ("$post-configure",)
FIELDS = ("name", "args", "before", "after", "remove", "fn")

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


def names(value: Any, what: str) -> tuple[str, ...]:
    """A constraint list: a name or list of names, as a tuple.

    Raises:
        ConfigurationError: anything else.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigurationError(f"{what} must be a name or a list of names, not {value!r}")


def constraints(spec: Mapping[str, Any] | None, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(before, after) from an ``$order`` value or an entry spec."""
    if not spec:
        return (), ()
    return names(spec.get("before"), f"before of {name!r}"), names(spec.get("after"), f"after of {name!r}")


def entry_from_spec(name: str | None, spec: Any, source: str) -> Entry:
    """Build an Entry from caller data: ``{args, before, after, remove, fn}`` (plus ``name`` in list form).

    Raises:
        ConfigurationError: unknown fields, a missing or ``$`` name, malformed constraints.
    """
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"middleware spec from {source} must be a mapping, not {type(spec).__name__}")
    unknown = set(spec) - set(FIELDS)
    name = spec.get("name", name)
    if unknown:
        raise ConfigurationError(
            f"middleware {name!r} from {source}: unknown field(s) {', '.join(sorted(unknown))} "
            f"(fields: {', '.join(FIELDS)}; tool arguments go under 'args')"
        )
    if not isinstance(name, str) or not name or name.startswith("$"):
        raise ConfigurationError(f"middleware from {source} needs a 'name' that is not a '$' sentinel")
    before, after = constraints(spec, name)
    fn = spec.get("fn")
    if fn is not None and not callable(fn):
        raise ConfigurationError(f"middleware {name!r} from {source}: 'fn' must be callable")
    return Entry(name, spec.get("args"), before, after, bool(spec.get("remove", False)), fn)


def _rank(entry_after: Iterable[str], rank: Mapping[str, int]) -> int:
    return max((rank[s] for s in entry_after if s in rank), default=0)


@lru_cache(maxsize=4096)
def _sorted_indexes(shape: Shape, phases: tuple[str, ...]) -> tuple[int, ...]:
    import networkx as nx  # imported on the first sort: most runs are served from the cache

    rank = {phase: i for i, phase in enumerate(phases)}
    graph = nx.DiGraph()
    key: dict[Any, tuple[int, int]] = {}
    for phase in phases:
        graph.add_node(phase)
        key[phase] = (rank[phase], -1)
    graph.add_edges_from(pairwise(phases))
    by_name: dict[str, list[int]] = {}
    for index, (name, _, _) in enumerate(shape):
        by_name.setdefault(name, []).append(index)

    def nodes(ref: str) -> list[Any]:
        if ref.startswith("$"):
            if ref not in key:
                graph.add_node(ref)
                key[ref] = (0, -1)
            return [ref]
        return list(by_name.get(ref, ()))  # constraints on absent entries are ignored

    for index, (_name, before, after) in enumerate(shape):
        if not before and not after:
            before, after = DEFAULT_BEFORE, DEFAULT_AFTER
        graph.add_node(index)
        key[index] = (_rank(after, rank), index)
        for ref in after:
            graph.add_edges_from((node, index) for node in nodes(ref) if node != index)
        for ref in before:
            graph.add_edges_from((index, node) for node in nodes(ref) if node != index)
    try:
        order = list(nx.lexicographical_topological_sort(graph, key=key.__getitem__))
    except nx.NetworkXUnfeasible as exc:
        cycle = [edge[0] for edge in nx.find_cycle(graph)]
        raise OrderCycleError(shape[n][0] if isinstance(n, int) else n for n in cycle) from exc
    return tuple(n for n in order if isinstance(n, int))


def shape_of(entries: Sequence[Entry]) -> Shape:
    """The part of a chain its order depends on."""
    return tuple((e.name, e.before, e.after) for e in entries)


def sort_entries(entries: Sequence[Entry], phases: tuple[str, ...], tool: str | None = None) -> list[Entry]:
    """Entries in chain order (R-CHAIN-3); the same input always gives the same order.

    Raises:
        OrderCycleError: the constraints form a cycle (listed in the message).
    """
    try:
        indexes = _sorted_indexes(shape_of(entries), phases)
    except OrderCycleError as exc:
        raise OrderCycleError(exc.cycle, tool=tool) from None
    return [entries[i] for i in indexes]


def strip(entry: Entry, gone: set[str]) -> Entry:
    """The entry without constraints that name entries in ``gone`` (already run)."""
    before = tuple(n for n in entry.before if n not in gone)
    after = tuple(n for n in entry.after if n not in gone)
    if before == entry.before and after == entry.after:
        return entry
    return replace(entry, before=before, after=after)


def extra_specs(value: Any, source: str) -> list[tuple[str, Mapping[str, Any], str]]:
    """Extra middleware in either form (mapping name -> spec, or list of specs with ``name``)."""
    if value is None:
        return []
    found = []
    if isinstance(value, Mapping):
        for name, spec in value.items():
            if not isinstance(spec, Mapping):
                raise ConfigurationError(f"middleware {name!r} from {source}: spec must be a mapping, not {spec!r}")
            found.append((name, spec, source))
    elif isinstance(value, list):
        for spec in value:
            if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
                raise ConfigurationError(f"middleware from {source}: each list item needs a 'name'")
            found.append((spec["name"], spec, source))
    else:
        raise ConfigurationError(f"middleware from {source} must be a mapping or a list, not {type(value).__name__}")
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
