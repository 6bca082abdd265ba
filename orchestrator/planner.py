"""Planner: everything about a tool that does not depend on args, compiled once into a ``Pipeline``.

A Plan holds the tool's cascade levels and their template-free merge; the
SCC of the tool dependency graph decides auto-static (R-CAS-8); toolKeys
classify each merged key (R-CAS-7); ``pipeline(ref, paths)`` compiles a ref
into its immutable ``Pipeline`` (orchestrator.pipeline). All of it is cached
in the registry with the files and folders it was computed from, so edits
are followed.
"""

from __future__ import annotations

import inspect
import logging
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .authorities import Authorities
from .cascade import Level, Merged, Plan, governed, guard_managed, merge_levels, tool_levels
from .conditions import Start, condition, idle_prefix, possible
from .errors import ConfigurationError, OrchestratorError, ToolDefinitionError, ToolNotFoundError
from .frozen import TUPLE, answer_by_identity
from .graph import reachable_components
from .ordering import Entry, build_chain, with_args, with_when
from .prefixes import merge_plain, static_keys
from .registry import Registry, SearchPath, builtin_folder, is_file
from .tool import Tool

if TYPE_CHECKING:
    from .pipeline import Children, Pipeline, Verdict

log = logging.getLogger("orchestrator")
NO_KEYS: frozenset[str] = frozenset()
Shape = tuple[str, bool, "Verdict | None", bool, frozenset[str] | None]
"""A merged key as ``toolkeys`` sees it for any tool: (name, static, its usual verdict, whether a cycle decides,
the named tool's SCC)."""
OrderNames = tuple[tuple[str, str], ...]
"""(entry, name) pairs from a ``$order``: the entry, and each name its ``before``/``after`` gives."""

NESTING = 8
"""How many levels of middleware-of-middleware a static chain resolves ahead; deeper entries resolve when entered."""


def own(tool: Tool, paths: tuple[SearchPath, ...]) -> tuple[str, int, tuple[SearchPath, ...]]:
    """The cache key of what is planned or compiled from ``tool`` itself: its uri, and which parse of it.

    A run may still hold a tool's previous version (a long agent run, the run
    log's writer thread) and plan it after its file changed: what it gets is
    its own and never what a call of the file as it is now is served. The
    parsed file is cached while unchanged, so calls share one entry; the value
    holds the tool, so its ``id`` is not reused while the entry lives.
    """
    return (tool.uri, id(tool), paths)


class _Nesting(threading.local):
    """How deep this thread's static chains resolve entries ahead (each thread computes its own)."""

    depth = 0


class Planner:
    """Plans, SCCs and toolKeys for tools, cached and following file edits."""

    def __init__(self, registry: Registry, authorities: Authorities) -> None:
        self.registry = registry
        self.authorities = authorities
        self._nesting = _Nesting()  # static chains computed inside one another on this thread
        self._strays: set[tuple[str, str, str]] = set()  # (where, entry, name) warned about: once each, at most 1,024

    def plan(self, tool: Tool, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> Plan:
        """The cached, args-independent part of ``tool``'s cascade."""
        return self.registry.memo("plans", own(tool, paths), lambda deps: self._make_plan(tool, paths, deps), checked)

    def plan_once(self, tool: Tool, paths: tuple[SearchPath, ...], checked: set[str]) -> Plan:
        """``plan``, for a pass that plans each tool once (``check``): a plan not cached already is not kept.

        Keeping 10,000 plans nobody asks for again cost a ``check`` a cache entry and a set of its files each,
        about a fifth of planning. A plan not kept needs no files of its own: those it reads are the run's
        (``checked``), so each lookup it makes (its authorities, the tools its ``$order`` names) is served as the
        run's, verified once per run, and the files join the run's as ``plan`` adds them.
        """
        if own(tool, paths) in self.registry.cache("plans"):
            return self.plan(tool, paths, checked)  # cached: served once its files are seen unchanged
        return self._make_plan(tool, paths, checked)

    def _make_plan(self, tool: Tool, paths: tuple[SearchPath, ...], deps: set[str]) -> Plan:
        if tool.path is not None:
            deps.add(str(tool.path))
        authorities = self.authorities.governing(tool, paths, deps)

        def find(name: str) -> Tool:
            try:
                return self.registry.find(name, paths, deps)
            except ToolNotFoundError as exc:
                raise ConfigurationError(
                    f"$inherit names {name!r}, which is not a tool{_sibling_hint(tool, name)}",
                    tool=tool.name,
                    path=tool.path,
                    line=tool.line_of("$inherit"),
                    key="$inherit",
                ) from exc

        shared = governed(authorities)  # the same for every tool under these authorities
        levels = tuple(tool_levels(tool, authorities, find))
        managed = shared.managed  # only managed levels lock keys: the authorities', with or without $inherit
        if managed:
            for level in levels:
                if level.kind != "managed":
                    guard_managed(level, managed, tool.name)
        first = len(levels)
        for index, level in enumerate(levels):
            if level.templated:
                first = index
                break
        base = merge_plain(levels[:first], tool.name)
        raw = merge_levels(levels[first:], None, tool.name, base) if first < len(levels) else base
        strays = tuple(order_strays(raw, lambda n: self.registry.exists(n, paths, deps)))
        for entry, name in strays:
            self._warn_stray(tool, levels, entry, name)
        trust = raw.values.get("trust")
        env = tool.trusted and isinstance(trust, Mapping) and trust.get("env") is True
        return Plan(
            tool=tool,
            levels=levels,
            phases=shared.phases,
            base=base,
            rest=levels[first:],
            raw=raw,
            static=raw if first == len(levels) else None,
            keys=tuple(static_keys(levels)),
            managed=managed,
            authorities=() if tool.metadata.get("$inherit") is False else shared.names,
            env=env,
            strays=strays,
        )

    def _warn_stray(self, tool: Tool, levels: tuple[Level, ...], entry: str, name: str) -> None:
        """Warn once per Manager about a ``$order`` name that matches nothing, at the file that wrote it.

        An authority's ``$order`` is planned with every tool below it: one mistake is one warning.
        """
        level = next((lv for lv in reversed(levels) if entry in lv.annotations.get("$order", ())), None)
        path: Path | None = tool.path
        line = tool.line_of("$order")
        if level is not None and level.path is not None:  # the level that wrote it
            path, line = level.path, level.lines.get("$order")
        where = f"{path}:{line}" if path is not None and line else str(path or tool.name)
        if (where, entry, name) in self._strays:
            return
        if len(self._strays) >= 1_024:
            self._strays.clear()
        self._strays.add((where, entry, name))
        log.warning(
            "%s: $order of %r names %r, which is neither a key, a tool nor a phase: the constraint is ignored",
            where,
            entry,
            name,
        )

    def component(self, tool: Tool, paths: tuple[SearchPath, ...], checked: set[str] | None) -> frozenset[str]:
        def compute(deps: set[str]) -> tuple[Tool, frozenset[str]]:  # the tool kept alive with it (``own``)
            def find(key: str) -> Tool | None:
                try:
                    return self.registry.find(key, paths, deps)
                except (ToolNotFoundError, ToolDefinitionError):
                    return None

            def keys_of(node: Tool) -> Iterable[str]:
                plan = self.plan(node, paths, deps)
                if plan.raw.attach != "middleware":
                    return plan.keys
                # Under `$attach: middleware` a key naming an undeclared tool is data: no edge (R-CAS-8).
                return [k for k in plan.keys if k in plan.raw.dynamic or self._attachable(find(k))]

            components = reachable_components(tool, keys_of, find)
            return tool, components[tool.uri]

        return self.registry.memo("scc", own(tool, paths), compute, checked)[1]

    def _in_cycle(self, tool: Tool, name: str, paths: tuple[SearchPath, ...], deps: set[str]) -> bool:
        """Whether the tool ``name`` names is in ``tool``'s SCC, asked of the named tool's own (cached) SCC.

        SCCs are classes: U is in T's SCC exactly when T is in U's. The
        middleware a key names (the built-ins, above all) are few and shared,
        so their SCCs are computed once, not one walk per tool that names them.
        """
        try:
            named = self.registry.find(name, paths, deps)
        except (ToolNotFoundError, ToolDefinitionError):
            return False  # a node without edges: in no cycle (its error surfaces when it is invoked)
        return tool.uri in self.component(named, paths, deps)

    def target(self, key: str, paths: tuple[SearchPath, ...], checked: set[str]) -> tuple[str, str] | None:
        """The uri of the tool ``key`` names and where it is, for people (``tools/shout.py``), or None.

        A tool that takes a built-in's name says so: ``tools/execute.py, in
        place of the built-in execute.py`` (it runs wherever the built-in would).
        """
        if key in self.registry.functions:
            found = self.registry.functions[key].uri, "a registered function"
        else:
            try:
                hit = self.registry.locate(key, paths, checked)
            except ToolNotFoundError:
                return None
            if hit is None:
                return None
            path, sp = hit
            if sp == self.registry.paths[-1]:
                return _shown(path, sp.root, True)
            found = _shown(path, sp.root, False)
        builtin = self.registry.paths[-1]
        hidden = self.registry.names(builtin, (), checked).refs.get(key) if "/" not in key else None
        return (found[0], f"{found[1]}, in place of the built-in {hidden[0].name}") if hidden is not None else found

    def _attachable(self, tool: Tool | None) -> bool:
        """Whether a key may run ``tool`` under ``$attach: middleware``: declared middleware, or a built-in."""
        if tool is None:
            return False
        return tool.frontmatter.get("role") == "middleware" or (
            tool.root is not None and tool.root == self.registry.paths[-1].root
        )

    def attachable(self, name: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> bool:
        """Whether the tool ``name`` names is declared ``role: middleware`` or is a built-in (``$attach``).

        A name that finds no tool (or a broken one) is not attachable.
        """
        try:
            return self._attachable(self.registry.find(name, paths, checked))
        except (ToolNotFoundError, ToolDefinitionError):
            return False

    def toolkeys(
        self, tool: Tool, merged: Merged, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> tuple[Verdict, ...]:
        """Classify every merged key as middleware or data, with the reason (R-CAS-7, R-CAS-8).

        Most tools get their key shape's usual verdicts (``_usual_verdicts``), served from the shape's cache
        entry without one of their own: a ``check`` of 10,000 tools stored 10,000 entries, each a miss.

        Raises:
            ConfigurationError: a ``$dynamic`` key that names no tool.
        """
        usual = _usual_verdicts(self._keys_shape(merged, paths, checked))
        if usual is not None and tool.name not in usual.names and not any(tool.uri in c for c in usual.cycles):
            return usual.verdicts  # every key's usual verdict: the tool names itself in no key, is in no cycle
        key = (tool.uri, paths, tuple(merged.values), merged.static, merged.dynamic, merged.attach)

        def compute(deps: set[str]) -> tuple[Verdict, ...]:
            from .pipeline import Verdict  # the running layer's (a pipeline binds calls); only for such a tool

            verdicts: list[Verdict] = []
            for name, static, common, asks, cycle in self._keys_shape(merged, paths, deps):
                if static:
                    verdicts.append(common)  # type: ignore[arg-type]  # a static key's is never None
                elif name == tool.name:
                    verdicts.append(Verdict(name, False, "self-reference"))
                elif common is None:
                    raise ConfigurationError(
                        "listed in $dynamic but names no tool", tool=tool.name, key=name, path=tool.path
                    )
                elif asks and (tool.uri in cycle if cycle is not None else self._in_cycle(tool, name, paths, deps)):
                    verdicts.append(
                        Verdict(name, False, f"auto-static: {name} is in a dependency cycle with {tool.name}")
                    )
                else:
                    verdicts.append(common)
            return tuple(verdicts)

        return self.registry.memo("toolkeys", key, compute, checked)

    def _keys_shape(self, merged: Merged, paths: tuple[SearchPath, ...], checked: set[str] | None) -> tuple[Shape, ...]:
        """What ``toolkeys`` finds of each merged key apart from the tool: shared by tools with the same keys.

        Per key: whether it is listed in ``$static``; its verdict for a tool
        that neither is the tool it names nor is in a cycle with it (None: a
        ``$dynamic`` key naming no tool, which ``toolkeys`` raises for the
        tool); whether the cycle decides; and the named tool's SCC, which
        holds a tool exactly when the two are in a cycle (None when it could
        not be computed here: ``toolkeys`` then asks ``_in_cycle``, which
        raises as before). Only what a verdict can reach is looked up, as
        ``toolkeys`` did per tool: 10,000 tools under one authority name the
        same middleware keys.
        """
        key = (paths, tuple(merged.values), merged.static, merged.dynamic, merged.attach, merged.attach_level)

        def compute(deps: set[str]) -> tuple[Shape, ...]:
            from .pipeline import Verdict  # the running layer's (a pipeline binds calls); only on a miss

            shape: list[Shape] = []
            declared_only = merged.attach == "middleware"
            for name in merged.values:
                if name in merged.static:
                    shape.append((name, True, Verdict(name, False, "listed in $static"), False, None))
                    continue
                found = self.target(name, paths, deps)
                if name in merged.dynamic:
                    common = Verdict(name, True, "listed in $dynamic") if found is not None else None
                    shape.append((name, False, common, False, None))
                elif found is None:
                    shape.append((name, False, Verdict(name, False, "names no tool"), False, None))
                elif declared_only and not self.attachable(name, paths, deps):
                    why = _undeclared(name, found[1], merged.attach_level)
                    shape.append((name, False, Verdict(name, False, why), False, None))
                else:
                    cycle: frozenset[str] | None
                    try:
                        cycle = self.component(self.registry.find(name, paths, deps), paths, deps)
                    except (ToolNotFoundError, ToolDefinitionError):
                        cycle = NO_KEYS  # a node without edges: in no cycle (as ``_in_cycle``)
                    except OrchestratorError:
                        cycle = None  # raised again, for the tool that asks (``_in_cycle``)
                    shape.append((name, False, Verdict(name, True, f"names a tool ({found[1]})"), True, cycle))
            return tuple(shape)

        return self.registry.memo("keyshapes", key, compute, checked)

    def pipeline(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None) -> Pipeline:
        """What ``ref`` compiles to against ``paths`` (cached with every file it came from).

        One cache entry, validated once per run against every file it
        depends on: the hot path of every invocation.

        Raises:
            OrchestratorError: the ref finds no tool, or its file or cascade is malformed.
        """
        registry = self.registry
        key = (ref, paths)
        generation = registry.generation
        hit = registry.derived["pipelines"].get(key)
        if hit is not None:
            if hit[2] is checked and checked is not None:  # already validated in this run
                return hit[0]  # type: ignore[no-any-return]
            # What memo() does on a hit, without building compute, and without adding the hit's files to the
            # run's set (O(files) per run for a large graph): a compute compiling ahead adds them (_children).
            if registry.current(hit[1], checked, generation):
                hit[2] = checked
                return hit[0]  # type: ignore[no-any-return]

        def compute(deps: set[str]) -> Pipeline:
            tool = self.registry.find(ref, paths, deps)
            plan = self.plan(tool, paths, deps)  # a reused plan's files join deps (Registry.memo)
            return self.compiled(tool, plan, paths, deps)

        return registry.memo("pipelines", key, compute, checked)

    def compiled(self, tool: Tool, plan: Plan, paths: tuple[SearchPath, ...], checked: set[str] | None) -> Pipeline:
        """``tool``'s pipeline under ``plan``: verdicts, the sorted chain, the part that runs, its entries' pipelines.

        The chain is that of the metadata as written (``plan.raw``):
        templates render values, never keys, annotations or the order, so
        one chain serves every call; a call gives each entry its rendered
        value. The part that runs leaves out the leading entries without work
        (``conditions.idle_prefix``), up to the first entry whose own args
        hold a template (its condition may read them: the caller asks it on
        each call), and, wherever they sit, those the tool itself rules out
        (``conditions.possible``): decided once here, not on every call.
        """
        merged = plan.raw

        def compute(deps: set[str]) -> Pipeline:
            from .pipeline import Pipeline  # the running layer's (a pipeline binds calls); only on a miss

            verdicts = self.toolkeys(tool, merged, paths, deps)
            entries = tuple(self.conditioned(build_chain(tool, merged, verdicts, [], plan.phases, {}), paths, deps))
            templated = (
                frozenset(key for level in plan.rest for key in level.templates) if plan.static is None else NO_KEYS
            )
            fixed = next((i for i, e in enumerate(entries) if e.name in templated), len(entries))
            idle = idle_prefix(Start(tool, merged.values, plan.env, entries), entries[:fixed])
            runs = possible(entries[idle:], tool, self._allows(paths, deps))
            code = getattr(tool.fn, "__code__", None)  # an async def main: the runner awaits it as a leaf's body
            main = tool.fn if code is not None and code.co_flags & inspect.CO_COROUTINE else None
            return Pipeline(tool, plan, verdicts, entries, runs, self._children(runs, paths, deps), templated, main)

        # Keyed by the plan too: a plan made before a change was seen (the change is seen while this call
        # compiles) must not give its pipeline to later calls, whose own plan is made again.
        return self.registry.memo("compiled", (*own(tool, paths), id(plan)), compute, checked)

    def _children(self, entries: tuple[Entry, ...], paths: tuple[SearchPath, ...], deps: set[str]) -> Children:
        """The pipelines of a chain's tool entries, their files added to ``deps`` (R-INV-2, step 2 ahead).

        The runner then enters such an entry without a lookup of its own. An
        entry that does not compile now (missing, malformed) is left out: its
        error is raised where it is entered, as before. Past ``NESTING``
        levels of middleware of middleware nothing is compiled ahead.
        """
        from .pipeline import Children  # the running layer's (a pipeline binds calls); only on a miss

        found: dict[str, Pipeline] = {}
        nesting = self._nesting
        if nesting.depth >= NESTING:
            return Children(paths, found)
        nesting.depth += 1
        try:
            for entry in entries:
                name = entry.name
                if entry.fn is not None or name in found:
                    continue
                try:
                    compiled = self.pipeline(name, paths, deps)
                except OrchestratorError:
                    continue
                hit = self.registry.derived["pipelines"].get((name, paths))
                if hit is None or hit[0] is not compiled:
                    continue  # not cached (a file changed while computing it): nothing vouches for it later
                deps.update(hit[1])
                found[name] = compiled
        finally:
            nesting.depth -= 1
        return Children(paths, found)

    def bound_chain(self, pipeline: Pipeline, merged: Merged, prune: bool) -> list[Entry]:
        """A templated pipeline's chain for one call: each entry with its value in ``merged`` (the rendered one)."""
        values = merged.values
        entries = pipeline.runs if prune else pipeline.entries
        return [e if e.args is values[e.name] else with_args(e, values[e.name]) for e in entries]

    def _allows(self, paths: tuple[SearchPath, ...], deps: set[str]) -> Callable[[str], Any]:
        """The tool-only part of each middleware's ``when``, by name (``conditions.possible``)."""
        return lambda name: (self.condition(name, paths, deps) or (None, None, None))[2]

    def condition(self, name: str, paths: tuple[SearchPath, ...], checked: set[str] | None) -> Any:
        """The ``when`` of the middleware tool ``name`` as (predicate, description), or None (cached).

        Raises:
            ConfigurationError: a malformed ``when`` in that tool's frontmatter.
        """

        def compute(deps: set[str]) -> Any:
            try:
                found = self.registry.find(name, paths, deps)
            except (ToolNotFoundError, ToolDefinitionError):
                return None  # reported where the entry is invoked
            return condition(found.frontmatter.get("when"), found.name, found.path, found.fn)

        return self.registry.memo("conditions", (name, paths), compute, checked)

    def conditioned(self, entries: list[Entry], paths: tuple[SearchPath, ...], checked: set[str] | None) -> list[Entry]:
        """``entries`` with each tool entry's ``when`` attached, so the runner passes over work-less ones."""
        out = []
        for entry in entries:
            if entry.fn is None:
                found = self.condition(entry.name, paths, checked)
                if found is not None:
                    entry = with_when(entry, found[0])
            out.append(entry)
        return out


def _undeclared(name: str, where: str, level: str | None) -> str:
    """Why a key naming a tool is data under ``$attach: middleware`` (for explain)."""
    return (
        f"$attach: middleware ({level}): {name} names {where}, which is not declared role: middleware; "
        f"list it in $dynamic to run it"
    )


def replaced_builtin(ref: str, path: Path | None) -> Path | None:
    """The built-in tool file that the tool found as ``ref`` (its file ``path``) takes the place of, or None.

    A tool named like a built-in, earlier in the search paths, runs wherever
    the built-in would: for every tool when the default authority names it
    (``execute``), for every tool that sets the key otherwise (``log``).
    ``show`` and ``check`` say so; a ref in a subfolder (``team/log``) hides
    nothing.
    """
    if "/" in ref or "\\" in ref or ref.startswith("."):
        return None
    folder = builtin_folder("tools")
    if path is not None and path.parent.resolve() == folder.resolve():
        return None  # the built-in itself
    for ext in (".py", ".md"):
        candidate = folder / f"{ref}{ext}"
        if is_file(candidate):
            return candidate
    return None


@lru_cache(maxsize=4096)
def _shown(path: Path, root: Path, builtin: bool) -> tuple[str, str]:
    """A tool file's uri and where it is, for people: asked for every key of every tool ``check`` reads."""
    if builtin:
        return path.as_uri(), f"built-in {path.relative_to(root).as_posix()}"
    return path.as_uri(), (Path(root.name) / path.relative_to(root)).as_posix()


def _sibling_hint(tool: Tool, name: str) -> str:
    """'; refs start at the search path: did you mean ...' when ``name`` sits beside the tool."""
    if tool.path is None or tool.root is None or tool.path.parent == tool.root:
        return ""
    for ext in (".md", ".py"):
        beside = tool.path.parent / f"{name}{ext}"
        if beside.is_file():
            ref = beside.relative_to(tool.root).with_suffix("").as_posix()
            return f"; refs start at the search path: did you mean {ref!r}?"
    return ""


class _Usual:
    """A key shape's verdicts for a tool that no key names and that is in no cycle with one (``_usual_verdicts``).

    A slotted class: a NamedTuple built at import would cost every process that imports the planner.
    """

    __slots__ = ("cycles", "names", "verdicts")

    def __init__(
        self, names: frozenset[str], cycles: tuple[frozenset[str], ...], verdicts: tuple[Verdict, ...]
    ) -> None:
        self.names = names  # the keys
        self.cycles = cycles  # the SCCs of the tools the keys that a cycle decides name
        self.verdicts = verdicts


_USUAL: dict[int, tuple[Any, Any]] = {}  # id(a key shape) -> (it, its _Usual or None)


def _usual_verdicts(shape: tuple[Shape, ...]) -> _Usual | None:
    """What ``toolkeys`` gives most tools of ``shape`` (a catalog's tools share a few), worked out once per shape.

    None when some key needs the tool itself: a ``$dynamic`` key naming no tool (raised for the tool), or a
    key whose named tool's SCC is unknown here (``_in_cycle`` asks for the tool).
    """
    return answer_by_identity(_USUAL, shape, _usual, 1024, TUPLE)  # type: ignore[no-any-return]


def _usual(shape: tuple[Shape, ...]) -> _Usual | None:
    if not all(
        static or (common is not None and (not asks or cycle is not None)) for _n, static, common, asks, cycle in shape
    ):
        return None
    return _Usual(
        frozenset(name for name, *_rest in shape),
        tuple(cycle for _n, _s, _c, asks, cycle in shape if asks and cycle),
        tuple(common for _n, _s, common, _a, _c in shape),  # type: ignore[misc]  # never None here
    )


def order_strays(merged: Merged, exists: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    """(entry, name) for every name in ``$order`` that is neither a merged key, a tool nor a phase.

    Such a constraint is ignored (R-CHAIN-3), which is what a typo
    (``after: [shuot]``) silently does; ``check`` and the planner say so.
    """
    values = merged.values
    for entry, name in order_names(merged.order)[0]:
        if name not in values and not exists(name):
            yield entry, name


# (entry, name) pairs by ``$order`` shape: its entries and their specs' identities -> (the specs, kept alive so no
# identity is reused, and the pairs). A catalog's tools share one authority's specs. At most _ORDER_NAMES_SIZE.
_ORDER_NAMES: dict[tuple[Any, ...], tuple[tuple[Any, ...], tuple[OrderNames, OrderNames]]] = {}
_ORDER_NAMES_SIZE = 1024


def order_names(order: Mapping[str, Any]) -> tuple[OrderNames, OrderNames]:
    """The names a merged ``$order`` uses, as (entry, name): (entries and the keys or tools their constraints
    name; the phases (``$...``) their constraints name), worked out once per shape of ``$order``.
    """
    specs = tuple(order.values())
    key = (*order, *map(id, specs))
    hit = _ORDER_NAMES.get(key)
    if hit is not None and all(map(operator.is_, hit[0], specs)):
        return hit[1]
    plain: list[tuple[str, str]] = []
    phases: list[tuple[str, str]] = []
    for entry, spec in order.items():
        names = [entry]
        if isinstance(spec, Mapping):
            for field in ("before", "after"):
                value = spec.get(field)
                if isinstance(value, str):
                    names.append(value)
                elif isinstance(value, list | tuple):
                    names += [v for v in value if isinstance(v, str)]
        for index, name in enumerate(names):
            if not name.startswith("$"):
                plain.append((entry, name))
            elif index:
                phases.append((entry, name))
    found = (tuple(plain), tuple(phases))
    if len(_ORDER_NAMES) >= _ORDER_NAMES_SIZE:
        _ORDER_NAMES.clear()
    _ORDER_NAMES[key] = (specs, found)
    return found
