"""Binding: the context of one call, made from its compiled pipeline (steps 2-8 of R-INV-2).

``Pipeline.bind`` is the one way a call's Context is made: a template-free
entry's context is built in ``context.bind``, every other call's here
(``bind_call``): it renders templated values, applies the call's seed,
overrides and extra middleware (sorting the chain again only when they
change it), and seeds locals. Everything that does not depend on args is the pipeline's: the
common call (no seed, no overrides, no extra middleware, no templates)
builds one context around the compiled chain and does nothing else.

An independent call is first placed (``place``: its run, parent, search
paths, cwd) and its ref compiled there (``compiled``); ``bound`` does the
three steps. The runner binds each entry's pipeline itself; ``enter`` and
``invoke_entry`` (``Manager.enter``, ``ctx.manager.invoke_entry``) do the
same for an entry named outside the chain. ``prepare`` is explain's: it
binds the compiled pipeline through the same door, in explain's modes
(``Explaining``: templates as written, an unsorted chain, the idle entries).
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from . import chain, tracing
from .cascade import Merged, guard_managed, merge_levels, override_level, rerender
from .conditions import idle_prefix
from .context import Context, Shared, carried
from .errors import InvocationError, SecurityError
from .interpolate import scope
from .locks import guard_locked, keep_locked_order
from .options import NO_OPTIONS, as_list, as_mapping
from .ordering import Entry, build_chain, extra_specs, unsorted_chain
from .schema import fill_defaults
from .tool import Tool

if TYPE_CHECKING:
    from .callers import Caller
    from .cascade import Plan
    from .manager import Manager
    from .pipeline import Pipeline, Verdict
    from .registry import SearchPath

log = logging.getLogger("orchestrator")

NO_KEYS: frozenset[str] = frozenset()  # made once: an empty frozenset() is a new object on every call
# Run ids: a random prefix per process and a counter (the id names a run in events, traces and sessions).
_RUN_PREFIX = os.urandom(4).hex()
_run_numbers = itertools.count(1)

Extra = list[tuple[str, Mapping[str, Any], str]]
"""Extra middleware of a call (``ordering.extra_specs``): name, spec, where it came from."""
Prepared = tuple[Context, Merged, "tuple[Verdict, ...]", dict[str, str]]
"""What ``prepare`` returns: the context, its merged metadata, verdicts and extra middleware's origins."""
Guard = tuple["Caller | None", frozenset[str]]
"""The untrusted caller of a call, if any, and the override keys it sent (``_guard`` checks them)."""
NO_GUARD: Guard = (None, NO_KEYS)


def run_id() -> str:
    """A new run id: unique in this process, and across processes but for a 1 in 2**32 chance per pair."""
    return f"{_RUN_PREFIX}{next(_run_numbers):08x}"


class Place(NamedTuple):
    """Where an independent call runs: its manager, its run's record, parent and target, search paths, cwd, envelope."""

    owner: Manager
    shared: Shared
    parent: Context | None
    target: Context | None
    paths: tuple[SearchPath, ...]
    cwd: Path
    envelope: Any


@dataclass(slots=True)
class Explaining:
    """A bind for explain (``prepare``): its modes in, and what the bind found besides the context out.

    ``render=False`` merges templates as written; ``sort=False`` (a chain
    with an ``$order`` cycle) leaves the chain unsorted; ``prune=False``
    keeps the leading entries that have no work (R-CHAIN-12). The bind
    fills in the merged metadata, the verdicts, and where each extra
    middleware entry came from.
    """

    render: bool = True
    sort: bool = True
    prune: bool = True
    merged: Merged | None = None
    verdicts: tuple[Verdict, ...] = ()
    origins: dict[str, str] = field(default_factory=dict)


_tuple = tuple.__new__


def place(manager: Manager, parent: Context | None, target: Context | None, options: Mapping[str, Any]) -> Place:
    """Where a call with ``options`` runs: under ``parent`` (or the seed's), else in a new run of ``manager``.

    A seed's ``paths`` go before the inherited ones, its ``cwd`` is read
    from the inherited one, its ``envelope`` replaces it.
    """
    seed = options["context"]  # its keys and their types were checked by extract_options
    if seed:
        parent = parent or seed.get("parent")
        target = target or seed.get("target")
    if parent is not None:
        shared = parent.shared
        paths, cwd, envelope = parent.paths, parent.cwd, parent.envelope
    else:
        box = carried.get()  # a resumed run continues the state its suspended run kept
        shared = Shared(run_id(), tracer=tracing.tracer(), state=box.pop() if box else None)
        paths, cwd, envelope = manager.paths, manager.cwd, None
    if seed:
        if "paths" in seed:
            paths = (*(manager.search_path(p) for p in as_list(seed["paths"], "context paths")), *paths)
        if "cwd" in seed:
            cwd = (cwd / str(seed["cwd"])).resolve()
        envelope = seed.get("envelope", envelope)
    return _tuple(Place, (manager, shared, parent, target, paths, cwd, envelope))  # Place(...) without a Python call


def compiled(where: Place, ref: str | Tool) -> Pipeline:
    """What ``ref`` (a name, or a tool itself) compiles to where a call runs (``Catalog.pipeline``).

    Raises:
        OrchestratorError: the ref finds no tool, or its file or cascade is malformed.
    """
    planner, checked = where.owner.planner, where.shared.checked
    if isinstance(ref, Tool):
        return planner.compiled(ref, planner.plan(ref, where.paths, checked), where.paths, checked)
    return where.owner.catalog.pipeline(ref, where.paths, checked)


def bound(
    manager: Manager,
    ref: str | Tool,
    args: Any,
    parent: Context | None,
    options: Mapping[str, Any],
    guard: Guard | None = None,
) -> Context:
    """The context of an independent call of ``ref`` (``Manager.invoke``, ``Manager.prepare``): placed, compiled, bound.

    Raises:
        OrchestratorError: the errors an invocation raises before its chain runs.
    """
    where = place(manager, parent, None, options)
    if isinstance(ref, Tool):
        return compiled(where, ref).bind(args, options, where.parent, None, 0, where, guard)
    pipeline = manager.catalog.pipeline(ref, where.paths, where.shared.checked)
    return pipeline.bind(args, options, where.parent, None, 0, where, guard)


def unit(manager: Manager, ref: str | Tool, args: Any, options: Mapping[str, Any] = NO_OPTIONS) -> Context:
    """``Manager.prepare``: a top-level context for ``ref``, ready for ``run``: steps 2-8 of R-INV-2, without running it.

    ``args`` and ``options`` are what ``options.extract_options`` returns
    (``context``, ``middleware``, ``overrides``; ``timeout`` is the
    caller's to apply). An executor uses it to run a unit: it may set the
    context's ``depth`` (counted from the caller's) and its ``chain``
    before ``run``.

    Raises:
        OrchestratorError: the errors an invocation raises before its chain runs.
    """
    return bound(manager, ref, args, None, options)


def bind_call(
    pipeline: Pipeline,
    args: Any,
    options: Mapping[str, Any] | None,
    parent: Context | None,
    target: Context | None,
    where: Place | None,
    guard: Guard | None,
    explaining: Explaining | None = None,
) -> Context:
    """``Pipeline.bind_call``: ``Pipeline.bind`` (``context.bind``) for all but a template-free entry.

    An independent call (``target`` None) runs ``where`` a ``Place`` says,
    by default under ``parent``; an entry whose metadata holds templates
    (``target``, checked by ``bind``) runs under its target. ``explaining``
    is explain's (``prepare``): its modes, and what the bind found.

    Raises:
        InvocationError: neither a parent nor a place.
        OrchestratorError: a bad seed, override or extra middleware; a failing template; an ``$order`` cycle.
    """
    options = options or NO_OPTIONS
    if where is None:
        if parent is None:
            raise InvocationError(f"binding {pipeline.tool.name!r}: a call needs a parent context or a Place")
        where = place(parent.owner, parent, target, options)
    return _call(pipeline, args, options, where, guard, explaining)


def _call(
    pipeline: Pipeline,
    args: Any,
    options: Mapping[str, Any],
    where: Place,
    guard: Guard | None,
    explaining: Explaining | None,
) -> Context:
    """``bind`` for an independent call, an entry whose metadata holds templates, or explain: the one Context made."""
    plan = pipeline.plan
    static = (
        plan.static is not None
        and not options["context"]
        and not options["overrides"]
        and options["middleware"] is None
        and explaining is None
    )
    ctx = Context(
        where.owner,
        pipeline.tool,
        args,
        where.shared,
        parent=where.parent,
        target=where.target,
        envelope=where.envelope,
        paths=where.paths,
        cwd=where.cwd,
        chain=list(pipeline.runs) if static else [],
        values=plan.static.values if static else {},  # type: ignore[union-attr]  # static: checked above
        phases=plan.phases,
        locked=plan.static.locked if static else NO_KEYS,  # type: ignore[union-attr]
        env=plan.env,
        resolved=pipeline.children if static else None,
    )
    if static:  # nothing depends on args: the context is built once around the compiled chain
        where.shared.history.extend((pipeline.tool.name, args, time.time()))  # a record: three items (Shared)
        return ctx
    return _configure(ctx, pipeline, options, guard or NO_GUARD, explaining)


def prepare(
    manager: Manager,
    ref: str | Tool,
    args: Any,
    parent: Context | None,
    target: Context | None,
    options: Mapping[str, Any],
    render: bool = True,
    *,
    caller: Caller | None = None,
    guarded: frozenset[str] = NO_KEYS,
    sort: bool = True,
    prune: bool = True,
) -> Prepared:
    """What explain shows of a call: its context, merged metadata, verdicts and the extra middleware's origins.

    The ref's compiled pipeline binds the call as any call's does
    (``Pipeline.bind_call``), in explain's modes (``Explaining``); with
    ``sort=False`` the pipeline is the unsorted one of a tool whose
    ``$order`` has a cycle (``Catalog.unsorted``). ``guarded`` are
    override keys sent by ``caller``: they may not name tools it cannot call.

    Raises:
        OrchestratorError: the errors an invocation raises before its chain runs.
    """
    where = place(manager, parent, target, options)
    pipeline = compiled(where, ref) if sort else manager.catalog.unsorted(ref, where.paths, where.shared.checked)
    explaining = Explaining(render, sort, prune)
    ctx = pipeline.bind_call(args, options, where.parent, where.target, where, (caller, guarded), explaining)
    assert explaining.merged is not None  # the bind filled it in
    return ctx, explaining.merged, explaining.verdicts, explaining.origins


def _configure(
    ctx: Context, pipeline: Pipeline, options: Mapping[str, Any], guard: Guard, explaining: Explaining | None
) -> Context:
    """``bind`` for a call that seeds, overrides, adds middleware or renders templates (or explain): the rest.

    Raises:
        OrchestratorError: a bad seed, override or extra middleware; a failing template; an ``$order`` cycle.
    """
    if explaining is None:
        render = sort = prune = True
    else:
        render, sort, prune = explaining.render, explaining.sort, explaining.prune
    plan = pipeline.plan
    seed, over = options["context"], options["overrides"]
    if seed:
        _seed_locals(ctx, seed)
    ctx.shared.history.extend((ctx.tool.name, ctx.args, time.time()))
    extra = extra_specs(ctx.locals.get("middleware"), "context locals.middleware") if seed else []
    if options["middleware"] is not None:
        extra += extra_specs(options["middleware"], "middleware")
    origins: dict[str, str] = {}
    if sort and plan.static is not None and not over:
        merged, verdicts = _cached_chain(ctx, plan.static, pipeline, extra, origins)
    else:
        caller, guarded = guard
        checked = (caller, guarded) if caller is not None and guarded else None
        merged, verdicts = _merged_chain(
            ctx, plan, pipeline, over, extra, origins, checked, render, sort, prune and not seed
        )
    ctx.settle(merged.values, merged.locked)  # copied into ctx.meta when read: the plan's own stays untouched
    if prune and ctx.chain:
        idle = idle_prefix(ctx, ctx.chain)
        if idle:
            ctx.chain = ctx.chain[idle:]
    if explaining is not None:
        explaining.merged, explaining.verdicts, explaining.origins = merged, verdicts, origins
    return ctx


def _seed_locals(ctx: Context, seed: Mapping[str, Any]) -> None:
    """The seed's locals, nonlocals (by reference: the seeder shares them) and session go into ``ctx``.

    Raises:
        InvocationError: nonlocals that are not a mapping.
    """
    tool = ctx.tool
    if "locals" in seed:
        ctx.locals.update(as_mapping(seed["locals"], "context locals", tool.name))
    if "nonlocals" in seed:
        if not isinstance(seed["nonlocals"], dict):
            raise InvocationError("context nonlocals must be a mapping", tool=tool.name)
        ctx.nonlocals = seed["nonlocals"]
    if "session" in seed:  # the conversation an agent continues (orchestrator.sessions)
        ctx.locals["session"] = seed["session"]
    ctx.locals["prompt"] = tool.prompt


def _cached_chain(
    ctx: Context, merged: Merged, pipeline: Pipeline, extra: Extra, origins: dict[str, str]
) -> tuple[Merged, tuple[Verdict, ...]]:
    """Nothing depends on args: the verdicts and sorted chain are the pipeline's (with extra middleware, sorted)."""
    if not extra:
        ctx.chain = list(pipeline.entries)  # not pruned: seeded locals may wake an entry
    else:
        built = build_chain(ctx.tool, merged, pipeline.verdicts, extra, pipeline.plan.phases, origins)
        ctx.chain = ctx.owner.planner.conditioned(built, ctx.paths, ctx.shared.checked)
    return merged, pipeline.verdicts


def _merged_chain(
    ctx: Context,
    plan: Plan,
    pipeline: Pipeline,
    over: Any,
    extra: Extra,
    origins: dict[str, str],
    guard: tuple[Caller, frozenset[str]] | None,
    render: bool,
    sort: bool,
    prune: bool,
) -> tuple[Merged, tuple[Verdict, ...]]:
    """Templates or overrides: the levels merge for this call, then the chain is the pipeline's or found again.

    Templates fill in values, never keys: with no overrides and no extra
    middleware the chain is the pipeline's (unsorted for explain's cycle),
    each entry with its value for this call. ``guard`` is the untrusted
    caller and the override keys it sent, checked once the verdicts are known.

    Raises:
        ConfigurationError, SecurityError, InterpolationError: a bad override, a locked key, a failing template.
    """
    tool, paths, checked, planner = ctx.tool, ctx.paths, ctx.shared.checked, ctx.owner.planner
    levels = plan.rest
    level = None
    if over:
        level = override_level(as_mapping(over, "overrides", tool.name))
        guard_locked(level, plan.raw.locked, tool.name)
        if plan.managed:
            guard_managed(level, plan.managed, tool.name)
        levels = (*levels, level)
    merged = _merge(ctx, plan, levels, level is None, render)
    planned = not extra and level is None
    if planned:
        verdicts, ctx.resolved = pipeline.verdicts, pipeline.children
        ctx.chain = planner.bound_chain(pipeline, merged, prune)
    else:
        verdicts = planner.toolkeys(tool, merged, paths, checked)
    if guard is not None:
        _guard(*guard, verdicts, tool.name)
    if planned:
        return merged, verdicts
    if not sort:
        ctx.chain = unsorted_chain(merged, verdicts)
        return merged, verdicts
    built = build_chain(tool, merged, verdicts, extra, plan.phases, origins)
    ctx.chain = planner.conditioned(built, paths, checked)
    if level is not None and level.annotations.get("$order") and merged.locked:
        unmoved = build_chain(tool, replace(merged, order=plan.raw.order), verdicts, extra, plan.phases, {})
        keep_locked_order(unmoved, ctx.chain, merged.locked, tool.name)
    return merged, verdicts


def _merge(ctx: Context, plan: Plan, levels: tuple[Any, ...], plain: bool, render: bool) -> Merged:
    """The levels merged for this call, their templates rendered unless ``render`` is off (explain)."""
    tool, args = ctx.tool, ctx.args
    shown = args
    params = plan.raw.values.get("params")
    if render and isinstance(params, Mapping) and not any("params" in lv.templates for lv in plan.rest):
        # Metadata templates render before any middleware runs: they see the defaults `params` fills in.
        shown = fill_defaults(params, args)
    if render and plain and len(levels) == 1 and "$remove" not in levels[0].annotations:
        # One templated level (the tool's own, as a rule): only its templated keys render and merge.
        return rerender(plan.raw, plan.base, levels[0], partial(scope, ctx, args=shown), tool.name)
    return merge_levels(levels, partial(scope, ctx, args=shown) if render else None, tool.name, plan.base)


def _guard(caller: Caller, guarded: frozenset[str], verdicts: tuple[Verdict, ...], name: str) -> None:
    """Override keys a caller sent may not name middleware it cannot call itself.

    Raises:
        SecurityError: one does.
    """
    for key, middleware, _why in verdicts:
        if middleware and key in guarded and key not in caller.tools:
            raise SecurityError(
                f"$overrides from {caller.name} may not add middleware {key!r}: it can only use tools it can call",
                tool=name,
                key=key,
            )


async def invoke_entry(manager: Manager, ctx: Context, entry: Entry) -> Any:
    """Invoke ``entry`` as an entry of ``ctx``'s chain: the full pipeline, or ``chain.SKIPPED`` for a cycle.

    For entries the runner does not take itself (a directive's tool);
    middleware calls it as ``ctx.manager.invoke_entry(ref, args)``
    (R-CHAIN-10).

    Raises:
        InvocationError: past ``max_depth`` or ``max_stack``.
    """
    stacked, inner = chain.heights(ctx)  # an entry's level is counted inside it (chain.frames)
    child = enter(manager, ctx, entry, inner if ctx.entry else stacked)
    if child is chain.SKIPPED:
        return child
    return await manager.run(child)


def enter(manager: Manager, ctx: Context, entry: Entry, height: int) -> Context:
    """The context of chain entry ``entry`` of ``ctx``, or ``chain.SKIPPED`` for an invocation cycle.

    The entry's pipeline (compiled ahead with ``ctx``'s chain, else looked
    up) binds it. An entry's args are a metadata value: data, never options.
    Entries of a middleware's own chain (its built-ins) count against
    ``max_stack`` apart from the others (``inner``), so an entry costs one
    level of one count; ``height`` is that count at ``ctx``'s level, one
    less than inside the entry (``chain.frames``).

    Raises:
        InvocationError: past ``max_depth`` or ``max_stack``.
    """
    ahead = ctx.resolved  # the entries' pipelines, compiled with the chain (fresh while it is)
    found = ahead.pipelines.get(entry.name) if ahead is not None and ahead.paths == ctx.paths else None
    pipeline = found or manager.catalog.pipeline(entry.name, ctx.paths, ctx.shared.checked)
    return pipeline.bind(entry.args, None, ctx, ctx, height)
