"""The metadata cascade: levels, merge policies, ``$remove``, ``$private``, provenance.

Levels, lowest precedence first (R-CAS-1): the authority chain, the tool's
``$inherit`` chain, the tool's own metadata, overrides. Each level is split
once into data keys and ``$`` annotations (cached in a ``Plan``); per
invocation only levels that hold templates are rendered and merged again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .authorities import DEFAULT_PHASES, Authority
from .errors import ConfigurationError
from .frozen import TUPLE, answer_by_identity, freeze
from .interpolate import has_templates, has_templates_frozen, render_value
from .names import names
from .tool import Tool

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""Sentinel for "no value yet", distinct from an explicit ``null``."""

ANNOTATIONS = frozenset(
    {"$inherit", "$private", "$merge", "$remove", "$static", "$dynamic", "$order", "$locked", "$attach"}
)
ORDER_FIELDS = ("before", "after")
ATTACH = ("any", "middleware")
"""Values of ``$attach``: which tools a metadata key may run (R-CAS-7); ``any`` is the default."""


# -- merge policies: one function each, chosen from POLICIES -----------------


def _need(kind: type, value: Any, policy: str) -> None:
    if not isinstance(value, kind):
        raise ConfigurationError(f"merge policy {policy!r} needs a {kind.__name__}, got {type(value).__name__}")


def merge_default(old: Any, new: Any) -> Any:
    """Mapping onto mapping merges deeply; anything else replaces."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = merge_default(old.get(key, MISSING), value) if key in old else value
        return merged
    return new


def merge_replace(old: Any, new: Any) -> Any:
    """The new value wins as it is."""
    return new


def merge_deep(old: Any, new: Any) -> Any:
    """Deep merge of mappings; refuses anything else."""
    _need(Mapping, new, "deep")
    if old is MISSING:
        return new
    _need(Mapping, old, "deep")
    return merge_default(old, new)


def merge_append(old: Any, new: Any) -> Any:
    """List concatenation, accumulated value first."""
    _need(list, new, "append")
    if old is MISSING:
        return new
    _need(list, old, "append")
    return [*old, *new]


def merge_prepend(old: Any, new: Any) -> Any:
    """List concatenation, new value first."""
    _need(list, new, "prepend")
    if old is MISSING:
        return new
    _need(list, old, "prepend")
    return [*new, *old]


def merge_union(old: Any, new: Any) -> Any:
    """Accumulated list plus the new items it does not hold yet."""
    _need(list, new, "union")
    if old is MISSING:
        return new
    _need(list, old, "union")
    return [*old, *(item for item in new if item not in old)]


POLICIES: dict[str, Callable[[Any, Any], Any]] = {
    "default": merge_default,
    "replace": merge_replace,
    "deep": merge_deep,
    "append": merge_append,
    "prepend": merge_prepend,
    "union": merge_union,
}


# -- levels and plans ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Level:
    """One level of the cascade, split into data and annotations."""

    name: str
    kind: str  # 'managed' | 'authority' | 'inherit' | 'tool' | 'override'
    data: Mapping[str, Any]
    annotations: Mapping[str, Any]
    templated: bool
    path: Path | None = None
    lines: Mapping[str, int] = field(default_factory=dict)
    templates: frozenset[str] = frozenset()  # the keys whose value holds a template: only they are rendered


def make_level(
    name: str,
    kind: str,
    metadata: Mapping[str, Any],
    *,
    hide_private: bool,
    path: Path | None = None,
    lines: Mapping[str, int] | None = None,
) -> Level:
    """Split metadata into a Level; ``hide_private`` drops the keys its ``$private`` lists.

    Raises:
        ConfigurationError: a malformed annotation.
    """
    lines = lines or {}
    metadata = freeze(metadata)  # level data is shared by every invocation through the cached plan
    annotations = {k: v for k, v in metadata.items() if k.startswith("$")}
    if annotations:
        private = _checked(annotations, lines, {"level": name, "path": path})
        hidden = private if hide_private else ()
        data = {k: v for k, v in metadata.items() if not k.startswith("$") and k not in hidden}
    else:  # most tools' own metadata: nothing to check, nothing hidden
        data = dict(metadata)
    # A file's values are shared (its plan is cached, equal ones across files): each walked once. Overrides are
    # made per call: walked, never remembered.
    holds = has_templates if kind == "override" else has_templates_frozen
    templates = frozenset(key for key, value in data.items() if holds(value))
    return Level(name, kind, data, annotations, bool(templates), path, lines, templates)


def _checked(annotations: Mapping[str, Any], lines: Mapping[str, int], where: dict[str, Any]) -> set[str]:
    """The names ``$private`` lists, once every annotation of a level is checked.

    Raises:
        ConfigurationError: an unknown or malformed annotation, at its line.
    """
    for key in annotations:
        if key not in ANNOTATIONS:  # a typo would silently change nothing: say so
            close = _close(key, sorted(ANNOTATIONS))
            hint = f"did you mean {close[0]!r}?" if close else f"annotations are {', '.join(sorted(ANNOTATIONS))}"
            raise ConfigurationError(f"unknown annotation {key!r}; {hint}", key=key, line=lines.get(key), **where)
    private = set(names(annotations.get("$private"), "$private", key="$private", line=lines.get("$private"), **where))
    for key in ("$remove", "$static", "$dynamic", "$locked"):
        names(annotations.get(key), key, key=key, line=lines.get(key), **where)
    policies = annotations.get("$merge", {})
    if not isinstance(policies, Mapping) or any(not isinstance(p, str) or p not in POLICIES for p in policies.values()):
        raise ConfigurationError(
            f"$merge must map keys to one of {', '.join(sorted(POLICIES))}",
            key="$merge",
            line=lines.get("$merge"),
            **where,
        )
    if annotations.get("$attach", "any") not in ATTACH:
        raise ConfigurationError(
            "$attach must be 'middleware' (a key runs a tool only when that tool is declared role: middleware, "
            "or is a built-in; every other key is data) or 'any' (every key that names a tool runs it)",
            key="$attach",
            line=lines.get("$attach"),
            **where,
        )
    order = annotations.get("$order", {})
    if not isinstance(order, Mapping) or not all(isinstance(v, Mapping) for v in order.values()):
        raise ConfigurationError(
            "$order must map entry names to {before: [...], after: [...]}",
            key="$order",
            line=lines.get("$order"),
            **where,
        )
    for entry, spec in order.items():
        for field_ in spec:
            if field_ not in ORDER_FIELDS:
                close = _close(str(field_), ORDER_FIELDS)
                hint = f"did you mean {close[0]!r}?" if close else "an order has only before and after"
                raise ConfigurationError(
                    f"unknown field {field_!r} in the order of {entry!r}; {hint}",
                    key="$order",
                    line=lines.get("$order"),
                    **where,
                )
    return private


@dataclass(frozen=True, slots=True)
class Plan:
    """The args-independent part of a tool's cascade, computed once per tool."""

    tool: Tool
    levels: tuple[Level, ...]
    phases: tuple[str, ...]
    base: Merged  # the merge of the levels before the first one holding a template
    rest: tuple[Level, ...]  # the levels from there on, rendered per invocation
    raw: Merged  # the whole merge with templates left as written (listings, check, trust)
    static: Merged | None  # the same, when no level holds a template: what every invocation uses
    keys: tuple[str, ...]  # the static key set of R-CAS-8
    managed: frozenset[str]  # the keys a managed level locked: no later level, nor any caller, sets or removes them
    authorities: tuple[str, ...]
    env: bool  # whether templates may see environment variables
    strays: tuple[tuple[str, str], ...] = ()  # (entry, name) of each ``$order`` name nothing matches (order_strays)


def inherit_levels(tool: Tool, find: Callable[[str], Tool], stack: tuple[str, ...] = ()) -> list[Level]:
    """Level 2 for ``tool``: each ``$inherit``-ed tool's own inherit chain, then its public keys.

    Raises:
        ConfigurationError: an inherit cycle, or an inherited name that is not a tool.
    """
    inherited_names = tool.metadata.get("$inherit")
    if inherited_names is False or inherited_names is None:
        return []
    where: dict[str, Any] = {"tool": tool.name, "path": tool.path, "line": tool.line_of("$inherit"), "key": "$inherit"}
    levels: list[Level] = []
    for name in names(inherited_names, "$inherit", **where):
        if name in stack or name == tool.name:
            raise ConfigurationError("$inherit forms a cycle: " + " -> ".join([*stack, tool.name, name]), **where)
        parent = find(name)
        levels.extend(inherit_levels(parent, find, (*stack, tool.name)))
        # visibility is the tool's own and is never inherited (R-TOOL-6)
        inherited = {k: v for k, v in parent.metadata.items() if k != "visibility"}
        levels.append(
            make_level(parent.name, "inherit", inherited, hide_private=True, path=parent.path, lines=parent.lines)
        )
    unique: dict[tuple[str, Path | None], Level] = {}
    for level in levels:
        unique.setdefault((level.name, level.path), level)
    return list(unique.values())


# An authority's Level, shared by every tool under it, by (path, name, hide_private): (its metadata, the Level).
# The parsed metadata's identity tells a re-read file apart; at most _AUTHORITY_LEVELS_SIZE entries.
_AUTHORITY_LEVELS: dict[tuple[Path, str, bool, str | None], tuple[Mapping[str, Any], Level]] = {}
_AUTHORITY_LEVELS_SIZE = 1024


def _authority_level(authority: Authority, hide_private: bool) -> Level:
    """The Level of ``authority`` (made once per parsed file: listing 10,000 tools made it 10,000 times).

    A managed authority's level is of kind ``managed``: its ``$locked`` keys hold against every later level.
    """
    key = (authority.path, authority.name, hide_private, authority.placed)
    hit = _AUTHORITY_LEVELS.get(key)
    if hit is not None and hit[0] is authority.metadata:
        return hit[1]
    level = make_level(
        authority.name,
        "managed" if authority.placed == "managed" else "authority",
        authority.metadata,
        hide_private=hide_private,
        path=authority.path,
        lines=authority.lines,
    )
    if len(_AUTHORITY_LEVELS) >= _AUTHORITY_LEVELS_SIZE:
        _AUTHORITY_LEVELS.clear()
    _AUTHORITY_LEVELS[key] = (authority.metadata, level)
    return level


class Governed:
    """What the authorities over a tool give its plan: the same for every tool under them (``governed``).

    A slotted class, not a NamedTuple or dataclass: building one of those at import costs every process
    (``list`` imports this module) about a million instructions.
    """

    __slots__ = ("levels", "managed", "names", "phases")

    def __init__(
        self, levels: tuple[Level, ...], managed: frozenset[str], phases: tuple[str, ...], names: tuple[str, ...]
    ) -> None:
        self.levels = levels  # theirs, root-most first (the nearest one's ``$private`` keys kept)
        self.managed = managed  # the keys their managed levels lock (``managed_keys``)
        self.phases = phases  # the nearest phases any of them declares
        self.names = names


_GOVERNED: dict[int, tuple[Any, Any]] = {}  # id(an authority chain) -> (it, its Governed)


def governed(authorities: Sequence[Authority]) -> Governed:
    """What ``authorities`` (a chain, root-most first) give each tool's plan, worked out once per chain.

    The tools of a folder share their chain (``Authorities.governing``): planning 10,000 of them made its
    levels, phases and names 10,000 times. A chain that is no tuple (one that could change) is worked out anew.

    Raises:
        ConfigurationError: a malformed ``$locked`` in a managed level.
    """
    return answer_by_identity(_GOVERNED, authorities, _governed, 1024, TUPLE)  # type: ignore[no-any-return]


def _governed(authorities: Sequence[Authority]) -> Governed:
    levels = tuple(_authority_level(a, hide_private=i < len(authorities) - 1) for i, a in enumerate(authorities))
    phases = next((a.phases for a in reversed(authorities) if a.phases is not None), DEFAULT_PHASES)
    return Governed(levels, managed_keys(levels), phases, tuple(a.name for a in authorities))


def tool_levels(tool: Tool, authorities: Sequence[Authority], find: Callable[[str], Tool]) -> list[Level]:
    """Levels 1-3 for ``tool``; ``authorities`` is its authority chain, root-most first, nearest last."""
    if tool.metadata.get("$inherit") is False:  # no authority, but a managed level's policy holds all the same
        managed = [_authority_level(a, hide_private=True) for a in authorities if a.placed == "managed"]
        return [
            *managed,
            make_level(tool.name, "tool", tool.metadata, hide_private=False, path=tool.path, lines=tool.lines),
        ]
    levels = list(governed(authorities).levels)
    levels.extend(inherit_levels(tool, find))
    levels.append(make_level(tool.name, "tool", tool.metadata, hide_private=False, path=tool.path, lines=tool.lines))
    return levels


def managed_keys(levels: Sequence[Level]) -> frozenset[str]:
    """The keys the managed levels among ``levels`` lock (their ``$locked``)."""
    found: set[str] = set()
    for level in levels:
        if level.kind == "managed":
            found.update(names(level.annotations.get("$locked"), "$locked", path=level.path, level=level.name))
    return frozenset(found)


def guard_managed(level: Level, managed: frozenset[str], tool: str) -> None:
    """Refuse a level that sets or removes a key a managed level locked.

    Raises:
        ConfigurationError: naming the key, the level and its file and line.
    """
    removed = names(level.annotations.get("$remove"), "$remove", path=level.path, level=level.name)
    for key in [*(k for k in level.data if k in managed), *(k for k in removed if k in managed)]:
        raise ConfigurationError(
            f"{key!r} is locked by the managed level: {level.kind} {level.name!r} may not set or remove it",
            tool=tool,
            path=level.path,
            line=level.lines.get(key),
            level=level.name,
            key=key,
        )


# -- merging ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """Where a merged key's value came from."""

    level: str
    kind: str
    policy: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Merged:
    """The outcome of a cascade: values, provenance, and the merged annotations."""

    values: Mapping[str, Any]
    sources: Mapping[str, Source]
    order: Mapping[str, Mapping[str, Any]]
    static: frozenset[str]
    dynamic: frozenset[str]
    locked: frozenset[str]
    removed: Mapping[str, str]
    policies: Mapping[str, str]
    attach: str = "any"  # the ``$attach`` in force: 'middleware' lets keys run declared middleware only
    attach_level: str | None = None  # the level that set it, for explain


class Merger:
    """Accumulates levels one by one (R-CAS-5, R-CAS-6), recording provenance."""

    __slots__ = (
        "values",
        "sources",
        "policies",
        "order",
        "static",
        "dynamic",
        "locked",
        "removed",
        "attach",
        "attach_level",
    )

    def __init__(self, start: Merged | None = None) -> None:
        self.values: dict[str, Any] = dict(start.values) if start else {}
        self.sources: dict[str, Source] = dict(start.sources) if start else {}
        self.policies: dict[str, str] = dict(start.policies) if start else {}
        self.order: dict[str, Mapping[str, Any]] = dict(start.order) if start else {}
        self.static: set[str] = set(start.static) if start else set()
        self.dynamic: set[str] = set(start.dynamic) if start else set()
        self.locked: set[str] = set(start.locked) if start else set()
        self.removed: dict[str, str] = dict(start.removed) if start else {}
        self.attach: str = start.attach if start else "any"
        self.attach_level: str | None = start.attach_level if start else None

    def add(self, level: Level, data: Mapping[str, Any] | None = None) -> None:
        """Merge one level; ``data`` is its rendered data when it held templates.

        Raises:
            ConfigurationError: a merge policy that does not fit the values.
        """
        notes = level.annotations
        self.policies.update(notes.get("$merge", {}))
        for key in names(notes.get("$remove"), "$remove"):
            if self.values.pop(key, MISSING) is not MISSING:
                self.sources.pop(key, None)
                self.removed[key] = level.name
        for key in names(notes.get("$static"), "$static"):
            self.static.add(key)
            self.dynamic.discard(key)
        for key in names(notes.get("$dynamic"), "$dynamic"):
            self.dynamic.add(key)
            self.static.discard(key)
        self.locked.update(names(notes.get("$locked"), "$locked"))
        if "$attach" in notes:  # the nearest level that says it wins, as with $merge
            self.attach, self.attach_level = notes["$attach"], level.name
        self.order.update(notes.get("$order", {}))
        for key, value in (level.data if data is None else data).items():
            policy = self.policies.get(key, "default")
            old = self.values.get(key, MISSING)
            try:
                self.values[key] = POLICIES[policy](old, value)
            except ConfigurationError as exc:
                raise ConfigurationError(
                    exc.detail, level=level.name, key=key, path=level.path, line=level.lines.get(key)
                ) from None
            previous = self.sources.get(key)
            chain = (*previous.levels, level.name) if previous and old is not MISSING else (level.name,)
            self.sources[key] = Source(level.name, level.kind, policy, chain)
            self.removed.pop(key, None)

    def result(self) -> Merged:
        # Merging builds new containers (dict(old) in merge_default): freeze them, as cached plans are shared.
        return Merged(
            {key: freeze(value) for key, value in self.values.items()},
            self.sources,
            self.order,
            frozenset(self.static),
            frozenset(self.dynamic),
            frozenset(self.locked),
            self.removed,
            self.policies,
            self.attach,
            self.attach_level,
        )


def _place(tool: str, level: Level, key: str) -> Callable[[], dict[str, Any]]:
    """Where a template sits, for error messages (built only when one fails)."""
    return lambda: {"tool": tool, "level": level.name, "key": key, "path": level.path, "line": level.lines.get(key)}


def merge_levels(
    levels: Sequence[Level],
    variables: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None,
    tool: str,
    start: Merged | None = None,
) -> Merged:
    """Merge ``levels`` in order, rendering templated levels with ``variables(meta_so_far)``.

    Raises:
        InterpolationError, SecurityError: a template failed or broke the sandbox.
        ConfigurationError: a merge policy that does not fit.
    """
    merger = Merger(start)
    for level in levels:
        data = None
        if level.templated and variables is not None:
            scope = variables(merger.values)
            templates = level.templates
            data = {
                key: render_value(value, scope, _place(tool, level, key)) if key in templates else value
                for key, value in level.data.items()
            }
        merger.add(level, data)
    return merger.result()


def rerender(
    raw: Merged,
    base: Merged | None,
    level: Level,
    variables: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    tool: str,
) -> Merged:
    """``merge_levels([level], variables, tool, base)`` when ``level`` is the plan's one templated level.

    ``raw`` is the plan's merge with templates as written: every key, policy,
    annotation and provenance is the same for any args, so only ``level``'s
    templated keys are rendered and merged again onto what ``base`` holds.
    Callers keep the general path for a level with ``$remove`` (it changes
    what a key merges onto).

    Raises:
        InterpolationError, SecurityError: a template failed or broke the sandbox.
        ConfigurationError: a merge policy that does not fit the rendered value.
    """
    before = base.values if base is not None else {}
    scope = variables(before)
    values = dict(raw.values)
    for key in level.templates:
        value = render_value(level.data[key], scope, _place(tool, level, key))
        try:
            values[key] = freeze(POLICIES[raw.policies.get(key, "default")](before.get(key, MISSING), value))
        except ConfigurationError as exc:
            raise ConfigurationError(
                exc.detail, level=level.name, key=key, path=level.path, line=level.lines.get(key)
            ) from None
    return Merged(
        values,
        raw.sources,
        raw.order,
        raw.static,
        raw.dynamic,
        raw.locked,
        raw.removed,
        raw.policies,
        raw.attach,
        raw.attach_level,
    )


def override_level(overrides: Mapping[str, Any]) -> Level:
    """Level 4: caller overrides, taken as data (never rendered, R-CAS-4)."""
    level = make_level("overrides", "override", overrides, hide_private=False)
    return Level(level.name, level.kind, level.data, level.annotations, False)


def _close(word: str, choices: Sequence[str]) -> list[str]:
    """The choice closest to a misspelt ``word`` (at most one), for 'did you mean' hints."""
    import difflib  # only a misspelling needs it

    return difflib.get_close_matches(word, choices, n=1)


def untrusted_level(level: Level, tool: Tool, roots: Sequence[Path], trusted_siblings: set[Path]) -> bool:
    """Whether ``level``'s file lies in a folder the program does not trust, or in an untrusted ``authorities/``.

    ``roots`` are the untrusted search paths' roots, ``trusted_siblings`` the
    ``authorities/`` folders beside trusted ones. The tool's own level is as
    trusted as the tool; a level without a file (a registered function's
    metadata, the program's overrides) is the program's own. The rule that
    model routes (``orchestrator.agent.routes``) and MCP servers
    (``orchestrator.remote``) apply.
    """
    if level.kind == "tool":
        return not tool.trusted
    if level.path is None:
        return False
    for root in roots:
        siblings = root.parent / "authorities"
        if level.path.is_relative_to(root) or (
            level.path.is_relative_to(siblings) and siblings not in trusted_siblings
        ):
            return True
    return False
