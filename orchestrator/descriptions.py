"""Descriptions: what a tool is and why, without running it (``Manager.describe``, ``list_tools``, ``explain``).

The Manager's read-only side, written as functions of the manager so that
``manager.py`` stays the facade. A description is cached with the files it
came from; an explanation is built per call from the same steps an
invocation takes (``orchestrator.binding``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .authorities import Authority
from .binding import prepare
from .cascade import (
    MISSING,
    POLICIES,
    Level,
    Merged,
    guard_managed,
    make_level,
    managed_keys,
    merge_levels,
    tool_levels,
)
from .collector import paused
from .errors import OrchestratorError, OrderCycleError, ToolNotFoundError
from .explain import Explanation, explanation
from .frozen import freeze
from .options import extract_options
from .registry import SearchPath, check_ref
from .schema import json_schema
from .tool import Tool, ToolInfo

if TYPE_CHECKING:
    from .context import Context
    from .manager import Manager


def list_tools(manager: Manager, hidden: bool) -> list[ToolInfo]:
    """Every tool reachable through ``manager``'s search paths (see ``Manager.list_tools``)."""
    found = []
    checked: set[str] = set()  # one listing, one look at each file and folder
    listing = Listing()
    paths = manager.paths
    described = manager.registry.cache("described")
    with paused():  # what a listing builds is kept in the caches: collections would find nothing to free
        for ref, path, _sp in manager.registry.discover(paths, parse=True):
            hit = described.get((ref, paths))
            if hit is not None and hit[2] is checked:  # memo's first test: a row this listing already verified
                info = hit[0]  # (a kept index serves every row at once: orchestrator.index)
            else:
                try:
                    info = describe(manager, ref, paths, checked, listing)
                except OrchestratorError as exc:
                    found.append(ToolInfo(ref, ref, "unknown", None, False, None, path, exc))
                    continue
            if hidden or not info.hidden:
                found.append(info)
    return found


def describe(
    manager: Manager,
    ref: str,
    paths: tuple[SearchPath, ...],
    checked: set[str] | None,
    listing: Listing | None = None,
) -> ToolInfo:
    """What ``ref`` is (see ``Manager.describe``); its ``params`` are JSON Schema, a Picoschema shorthand expanded.

    A row never plans the tool: ``listed_params`` merges only the keys a row
    shows through its authority and inherit levels. When that meets any
    error the full plan decides, so a broken tool's row carries the error an
    invocation would raise.

    Raises:
        OrchestratorError: the tool cannot be found, loaded or its cascade resolved.
    """
    if type(ref) is not str:
        check_ref(ref)  # refused before it is hashed into a cache key
    shared = listing if listing is not None else Listing()

    def compute(deps: set[str]) -> ToolInfo:
        tool = manager.registry.find(ref, paths, deps)
        try:
            params = listed_params(manager, tool, paths, deps, shared)
        except OrchestratorError:  # the plan raises the error an invocation would, with its own words
            params = manager.planner.plan(tool, paths, deps).raw.values.get("params")
        return row(ref, tool, params)

    # Cached with the files it came from: a warm listing makes no new objects (a full GC over 10,000
    # tools' worth of them took longer than the listing itself).
    return manager.registry.memo("described", (ref, paths), compute, checked)


def planned(manager: Manager, ref: str, paths: tuple[SearchPath, ...]) -> ToolInfo:
    """``describe`` through the tool's full plan, never cached: what a row must equal (tests, ``check``).

    Raises:
        OrchestratorError: the tool cannot be found, loaded or planned.
    """
    deps: set[str] = set()
    tool = manager.registry.find(ref, paths, deps)
    return row(ref, tool, manager.planner.plan(tool, paths, deps).raw.values.get("params"))


def row(ref: str, tool: Tool, params: Any) -> ToolInfo:
    """The ``list`` row of ``tool`` found as ``ref``, its merged ``params`` given (unrendered)."""
    role = tool.frontmatter.get("role")
    return ToolInfo(
        ref,
        tool.name,
        tool.kind,
        tool.description,
        tool.hidden or role == "middleware",  # the tool's own: never inherited (R-TOOL-6)
        json_schema(params, "params", tool),  # a shorthand as JSON Schema
        tool.path,
        role=role if isinstance(role, str) else None,
        format=tool.format,
    )


LISTED = frozenset({"params"})
"""The cascade keys a ``list`` row shows; every other row field is the tool's own."""


@dataclass(frozen=True, slots=True)
class Chain:
    """One authority chain as a listing merges it: shared by every tool under the same nearest authority.

    ``keys`` are the keys a row's merge must carry: the listed ones, every
    key a ``$merge`` policy other than ``default`` or ``replace`` may refuse,
    and every key a managed level locks (their checks are the plan's).
    ``prefix`` is the merge of the authority levels over ``keys``.
    """

    nearest: Authority
    authorities: tuple[Authority, ...]
    deps: frozenset[str]
    levels: tuple[Level, ...]
    keys: frozenset[str]
    managed: frozenset[str]
    prefix: Merged


class Listing:
    """What one listing computes once for all its tools: each folder's nearest authority, each authority chain and
    its merge."""

    def __init__(self) -> None:
        self.chains: dict[tuple[int, tuple[SearchPath, ...]], Chain] = {}
        # A folder's nearest authority and the files it was found from, by (folder, search path root, paths).
        self.nearest: dict[tuple[str, str, tuple[SearchPath, ...]], tuple[Authority, frozenset[str]]] = {}

    def authority(self, manager: Manager, tool: Tool, paths: tuple[SearchPath, ...], deps: set[str]) -> Authority:
        """``tool``'s nearest authority (``Authorities.find``), looked up once per folder: every tool there has the
        same, unless it names one. The files the lookup depended on join ``deps`` for each tool, as a lookup's would.

        Raises:
            OrchestratorError: the lookup's own errors (a failure is not kept).
        """
        authorities = manager.planner.authorities
        if tool.authority or tool.path is None or tool.root is None:
            return authorities.find(tool, paths, deps)
        key = (os.path.dirname(tool.path), os.fspath(tool.root), paths)
        found = self.nearest.get(key)
        if found is None:
            looked: set[str] = set()
            found = self.nearest[key] = (authorities.find(tool, paths, looked), frozenset(looked))
        deps.update(found[1])
        return found[0]

    def chain(self, manager: Manager, tool: Tool, nearest: Authority, paths: tuple[SearchPath, ...]) -> Chain:
        """The chain of ``nearest`` (computed by its first tool; a failure is not kept).

        Raises:
            OrchestratorError: the chain, or a level of it, is malformed.
        """
        key = (id(nearest), paths)
        found = self.chains.get(key)
        if found is not None and found.nearest is nearest:
            return found
        deps: set[str] = set()
        authorities = tuple(manager.planner.authorities.chain(nearest, paths, deps))
        # The authority levels alone: tool_levels of a tool with no metadata of its own.
        levels = tuple(tool_levels(replace(tool, metadata={}), authorities, _no_inherit)[:-1])
        managed = managed_keys(levels)
        for level in levels:
            if managed and level.kind != "managed":
                guard_managed(level, managed, tool.name)
        keys = LISTED | managed | _checked_policies(levels)
        prefix = merge_levels([_only(level, keys) for level in levels], None, tool.name)
        found = self.chains[key] = Chain(nearest, authorities, frozenset(deps), levels, keys, managed, prefix)
        return found


def listed_params(manager: Manager, tool: Tool, paths: tuple[SearchPath, ...], deps: set[str], listing: Listing) -> Any:
    """The merged, unrendered ``params`` of ``tool`` as its plan would hold them, without planning it.

    Only the keys a row shows, and those whose merge or lock can fail, are
    merged through the authority and ``$inherit`` levels (the cascade's own
    functions, as the planner calls them); no verdict, chain or key lookup.

    Raises:
        OrchestratorError: whatever the plan would raise, or anything in doubt: the caller then plans.
    """
    if tool.path is not None:
        deps.add(str(tool.path))
    nearest = listing.authority(manager, tool, paths, deps)
    chain = listing.chain(manager, tool, nearest, paths)
    deps.update(chain.deps)
    meta = tool.metadata
    if any(key.startswith("$") for key in meta):
        return _annotated_params(manager, tool, paths, deps, chain)
    if not chain.managed:  # no annotation, no $inherit, no lock: the tool's keys onto the chain's merge
        return _onto(chain, meta)
    own = make_level(
        tool.name,
        "tool",
        {key: value for key, value in meta.items() if key in chain.keys},
        hide_private=False,
        path=tool.path,
        lines=tool.lines,
    )
    guard_managed(own, chain.managed, tool.name)
    return merge_levels((own,), None, tool.name, chain.prefix).values.get("params")


def _onto(chain: Chain, meta: Mapping[str, Any]) -> Any:
    """The merged ``params`` of a tool level holding ``meta`` (no annotations) over ``chain``: ``Merger.add``'s
    merge of each key the row needs, with the policies in force (the tool declares none).

    Raises:
        ConfigurationError: a policy refuses a value (as the plan's merge would).
    """
    values, policies = chain.prefix.values, chain.prefix.policies
    params = values.get("params", MISSING)
    for key in chain.keys:
        if key in meta:
            merged = POLICIES[policies.get(key, "default")](values.get(key, MISSING), meta[key])
            if key == "params":
                params = merged
    return None if params is MISSING else freeze(params)


def _annotated_params(manager: Manager, tool: Tool, paths: tuple[SearchPath, ...], deps: set[str], chain: Chain) -> Any:
    """``listed_params`` of a tool with annotations (``$inherit``, ``$merge``, ``$remove`` ...): every level again."""

    def find(name: str) -> Tool:
        return manager.registry.find(name, paths, deps)  # not found: the plan words the error

    keys = chain.keys
    while True:
        shown = {key: value for key, value in tool.metadata.items() if key.startswith("$") or key in keys}
        levels = tool_levels(replace(tool, metadata=shown), chain.authorities, find)
        managed = managed_keys(levels)
        wanted = keys | managed | _checked_policies(levels)
        if wanted <= keys:
            break
        keys = wanted  # a policy or lock the tool's own levels add: merge those keys too
    if managed:
        for level in levels:
            if level.kind != "managed":
                guard_managed(level, managed, tool.name)
    return merge_levels([_only(level, keys) for level in levels], None, tool.name).values.get("params")


def _checked_policies(levels: Iterable[Level]) -> frozenset[str]:
    """The keys a ``$merge`` of ``levels`` gives a policy that may refuse a value (all but default and replace)."""
    found: set[str] = set()
    for level in levels:
        policies = level.annotations.get("$merge")
        if isinstance(policies, Mapping):
            found.update(key for key, policy in policies.items() if policy not in ("default", "replace"))
    return frozenset(found)


def _only(level: Level, keys: frozenset[str]) -> Level:
    """``level`` with only ``keys`` of its data (annotations whole: ``$remove`` and ``$merge`` still apply)."""
    if all(key in keys for key in level.data):
        return level
    return replace(level, data={key: value for key, value in level.data.items() if key in keys})


def _no_inherit(name: str) -> Tool:
    """The ``find`` of a tool with no metadata: never called (it inherits nothing)."""
    raise ToolNotFoundError(name, [])


def explain(
    manager: Manager, ref: str, args: Any, overrides: Mapping[str, Any] | None, middleware: Any, render: bool
) -> Explanation:
    """Why every key of ``ref`` has its value and how its chain is ordered (see ``Manager.explain``).

    Raises:
        OrchestratorError: the same errors an invocation would raise before running the chain.
    """
    args, options = extract_options(args, ref, None, middleware, overrides, None)
    cycle = None
    try:
        ctx, merged, verdicts, origins = prepare(manager, ref, args, None, None, options, render, prune=False)
    except OrderCycleError as exc:  # explain all the rest, with the chain unsorted and the cycle named
        ctx, merged, verdicts, origins = prepare(
            manager, ref, args, None, None, options, render, sort=False, prune=False
        )
        cycle = exc
    planner, checked = manager.planner, ctx.shared.checked
    plan = planner.plan(ctx.tool, ctx.paths, checked)
    conditions = {e.name: planner.condition(e.name, ctx.paths, checked) for e in ctx.chain if e.fn is None}
    explained = explanation(ctx, plan, merged, verdicts, origins, cycle=cycle, render=render, conditions=conditions)
    return replace(explained, **composed(manager, ctx, merged.values, args))


def composed(manager: Manager, ctx: Context, meta: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """What ``show`` adds of issue 30's composition: partials used, shorthand schemas expanded, instruction files.

    Each is read only where the tool has one: a template with a ``{%`` statement, a shorthand ``params`` or
    ``returns``, an agent whose metadata asks for instructions.
    """
    from .partials import uses
    from .picoschema import is_shorthand

    tool = ctx.tool
    found: dict[str, Any] = {
        "partials": tuple(
            {
                "name": use.name,
                "level": use.level,
                "line": use.line,
                "path": str(use.path) if use.path is not None else None,
                "error": str(use.error) if use.error is not None else None,
                "via": use.via,
            }
            for use in uses(tool, ctx.paths)
        ),
        "schemas": {
            key: json_schema(meta[key], key, tool) for key in ("params", "returns") if is_shorthand(meta.get(key))
        },
    }
    if meta.get("instructions") and meta.get("model") is not None:
        from dataclasses import asdict

        from .instructions import explain_instructions

        found["instructions"] = tuple(
            asdict(verdict)
            for verdict in explain_instructions(
                meta, args, ctx.cwd, tool=tool.name, paths=[sp.root for sp in ctx.paths], limits=manager.limits
            )
        )
    return found
