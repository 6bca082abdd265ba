"""Binding: the context of one call, and of one chain entry (steps 2-8 of R-INV-2).

``prepare`` turns a ref, its args and the call's options into a Context
with its merged metadata and sorted chain; ``enter`` does the same for an
entry of a running chain (the runner's hot path). Everything that does not
depend on args comes from the planner's caches: the common call (no seed,
no overrides, no extra middleware, no templates) builds one context around
its cached chain and does nothing else.

They are the Manager's methods (``Manager._prepare``, ``Manager.enter``,
``Manager.invoke_entry``), written here as functions of the manager so that
``manager.py`` stays the facade.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import chain, tracing
from .cascade import Merged, guard_managed, merge_levels, override_level, rerender
from .conditions import idle_prefix
from .context import Context, Shared, carried, entry_context
from .errors import InvocationError, SecurityError
from .explain import unsorted_chain
from .interpolate import scope
from .locks import guard_locked, keep_locked_order
from .options import NO_OPTIONS, as_list, as_mapping
from .ordering import Entry, build_chain, extra_specs
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
"""What ``prepare`` returns: the context, and for ``explain`` its merged metadata, verdicts and extra origins."""


def run_id() -> str:
    """A new run id: unique in this process, and across processes but for a 1 in 2**32 chance per pair."""
    return f"{_RUN_PREFIX}{next(_run_numbers):08x}"


def too_deep(manager: Manager, name: Any, parent: Context | None, deep: bool, limit: int) -> InvocationError:
    """The typed error for an invocation past ``max_depth`` or past ``limit`` nested levels (R-INV-5)."""
    what = f"invocation depth limit ({manager.max_depth})" if deep else f"nested invocation limit ({limit})"
    who = parent.tool.name if parent is not None else str(name)
    return InvocationError(f"{what} reached invoking {str(name)!r}; does {who!r} recurse?", tool=who)


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
    """Steps 2-8 of R-INV-2 up to a sorted chain; returns the context and what explain needs.

    ``render=False`` (explain only) merges template strings as they are written;
    ``sort=False`` (explain of a chain with an ``$order`` cycle) leaves the chain unsorted;
    ``prune=False`` (explain) keeps the leading entries that have no work (R-CHAIN-12).
    ``guarded`` are override keys sent by ``caller``: they may not name tools it cannot call.
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
        paths, cwd, envelope = _placed(manager, seed, paths, cwd, envelope)
    checked = shared.checked
    pipeline: Pipeline | None = None
    if isinstance(ref, Tool) or not sort:
        tool = ref if isinstance(ref, Tool) else manager.registry.find(ref, paths, checked)
        plan = manager.planner.plan(tool, paths, checked)
    else:
        pipeline = manager.planner.pipeline(ref, paths, checked)
        tool, plan = pipeline.tool, pipeline.plan
    cached: tuple[Merged, tuple[Verdict, ...]] | None = None
    entries: list[Entry] = []
    ahead = None
    if (
        pipeline is not None
        and plan.static is not None
        and not seed
        and not options["overrides"]
        and options["middleware"] is None
    ):
        # The common call: nothing depends on args, so the context is built once around the compiled chain.
        cached = plan.static, pipeline.verdicts
        entries = list(pipeline.runs if prune else pipeline.entries)
        ahead = pipeline.children
    ctx = Context(
        manager,
        tool,
        args,
        shared,
        parent=parent,
        target=target,
        envelope=envelope,
        paths=paths,
        cwd=cwd,
        chain=entries,
        values=cached[0].values if cached else {},
        phases=plan.phases,
        locked=cached[0].locked if cached else NO_KEYS,
        env=plan.env,
        resolved=ahead,
    )
    if cached:
        shared.history.append((tool.name, args, time.time()))
        return ctx, cached[0], cached[1], {}
    return _configure(manager, ctx, plan, pipeline, options, render, (caller, guarded), sort, prune)


def _configure(
    manager: Manager,
    ctx: Context,
    plan: Plan,
    pipeline: Pipeline | None,
    options: Mapping[str, Any],
    render: bool,
    guard: tuple[Caller | None, frozenset[str]],
    sort: bool,
    prune: bool,
) -> Prepared:
    """``prepare`` for a call that seeds, overrides, adds middleware or renders templates: the rest of the steps.

    Raises:
        OrchestratorError: a bad seed, override or extra middleware; a failing template; an ``$order`` cycle.
    """
    seed, over = options["context"], options["overrides"]
    if seed:
        _seed_locals(ctx, seed)
    ctx.shared.history.append((ctx.tool.name, ctx.args, time.time()))
    extra = extra_specs(ctx.locals.get("middleware"), "context locals.middleware") if seed else []
    if options["middleware"] is not None:
        extra += extra_specs(options["middleware"], "middleware")
    origins: dict[str, str] = {}
    if sort and plan.static is not None and not over:
        merged, verdicts = _cached_chain(manager, ctx, plan, pipeline, extra, origins)
    else:
        caller, guarded = guard
        checked = (caller, guarded) if caller is not None and guarded else None
        merged, verdicts = _merged_chain(
            manager, ctx, plan, pipeline, over, extra, origins, checked, render, sort, prune and not seed
        )
    ctx.settle(merged.values, merged.locked)  # copied into ctx.meta when read: the plan's own stays untouched
    if prune and ctx.chain:
        idle = idle_prefix(ctx, ctx.chain)
        if idle:
            ctx.chain = ctx.chain[idle:]
    return ctx, merged, verdicts, origins


def _placed(
    manager: Manager, seed: Mapping[str, Any], paths: tuple[SearchPath, ...], cwd: Path, envelope: Any
) -> tuple[tuple[SearchPath, ...], Path, Any]:
    """The search paths, cwd and envelope of a seeded call: the seed's go first, or replace the inherited ones."""
    if "paths" in seed:
        paths = (*(manager.search_path(p) for p in as_list(seed["paths"], "context paths")), *paths)
    if "cwd" in seed:
        cwd = (cwd / str(seed["cwd"])).resolve()
    return paths, cwd, seed.get("envelope", envelope)


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
    manager: Manager,
    ctx: Context,
    plan: Plan,
    pipeline: Pipeline | None,
    extra: Extra,
    origins: dict[str, str],
) -> tuple[Merged, tuple[Verdict, ...]]:
    """Nothing depends on args: the verdicts and sorted chain are the pipeline's (with extra middleware, sorted)."""
    tool, paths, checked = ctx.tool, ctx.paths, ctx.shared.checked
    merged = plan.static
    assert merged is not None  # the caller checked it
    if pipeline is None:
        pipeline = manager.planner.compiled(tool, plan, paths, checked)
    if not extra:
        ctx.chain = list(pipeline.entries)  # not pruned: seeded locals may wake an entry
    else:
        built = build_chain(tool, merged, pipeline.verdicts, extra, plan.phases, origins)
        ctx.chain = manager.planner.conditioned(built, paths, checked)
    return merged, pipeline.verdicts


def _merged_chain(
    manager: Manager,
    ctx: Context,
    plan: Plan,
    pipeline: Pipeline | None,
    over: Any,
    extra: Extra,
    origins: dict[str, str],
    guard: tuple[Caller, frozenset[str]] | None,
    render: bool,
    sort: bool,
    prune: bool,
) -> tuple[Merged, tuple[Verdict, ...]]:
    """Templates or overrides: the levels merge for this call, then the chain is found (or taken from the plan).

    ``guard`` is the untrusted caller and the override keys it sent, checked once the verdicts are known.

    Raises:
        ConfigurationError, SecurityError, InterpolationError: a bad override, a locked key, a failing template.
    """
    tool, paths, checked = ctx.tool, ctx.paths, ctx.shared.checked
    levels = plan.rest
    level = None
    if over:
        level = override_level(as_mapping(over, "overrides", tool.name))
        guard_locked(level, plan.raw.locked, tool.name)
        if plan.managed:
            guard_managed(level, plan.managed, tool.name)
        levels = (*levels, level)
    merged = _merge(ctx, plan, levels, level is None, render)
    planned = sort and not extra and level is None  # templates fill in values, never keys: the plan's order
    if planned:
        if pipeline is None:
            pipeline = manager.planner.compiled(tool, plan, paths, checked)
        verdicts, ctx.resolved = pipeline.verdicts, pipeline.children
        ctx.chain = manager.planner.bound_chain(pipeline, merged, prune)
    else:
        verdicts = manager.planner.toolkeys(tool, merged, paths, checked)
    if guard is not None:
        _guard(*guard, verdicts, tool.name)
    if not sort:
        ctx.chain = unsorted_chain(merged, verdicts)
    elif not planned:
        built = build_chain(tool, merged, verdicts, extra, plan.phases, origins)
        ctx.chain = manager.planner.conditioned(built, paths, checked)
    if sort and level is not None and level.annotations.get("$order") and merged.locked:
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

    The runner's (``chain.advance``), which then runs it with ``Manager.run``.
    The hot path of every entry: one plan lookup and a context built
    once. An entry's args are a metadata value: data, never options.
    Entries of a middleware's own chain (its built-ins) count against
    ``max_stack`` apart from the others (``inner``), so an entry costs
    one level of one count; ``height`` is that count at ``ctx``'s level,
    one less than inside the entry (``chain.frames``).

    Raises:
        InvocationError: past ``max_depth`` or ``max_stack``.
    """
    shared = ctx.shared
    ahead = ctx.resolved  # the entries' pipelines, compiled with the chain (fresh while it is)
    found = ahead.pipelines.get(entry.name) if ahead is not None and ahead.paths == ctx.paths else None
    pipeline = found or manager.planner.pipeline(entry.name, ctx.paths, shared.checked)
    tool = pipeline.tool
    ancestor: Context | None = ctx
    while ancestor is not None:
        if ancestor.tool.uri == tool.uri:
            log.warning(
                "skipping middleware %r in the chain of %r: it is already running in this pipeline",
                entry.name,
                ctx.tool.name,
            )
            return chain.SKIPPED  # type: ignore[no-any-return]
        if not ancestor.entry:
            break
        ancestor = ancestor.parent
    if ctx.depth >= manager.max_depth or height >= manager.max_stack:
        raise too_deep(manager, entry.name, ctx, ctx.depth >= manager.max_depth, manager.max_stack)
    plan = pipeline.plan
    merged = plan.static
    if merged is None:  # templated metadata: rendered for this call
        return prepare(manager, entry.name, entry.args, ctx, ctx, NO_OPTIONS)[0]
    shared.history.append((tool.name, entry.args, time.time()))
    runs = pipeline.runs  # a leaf (no entry with work) shares the empty tuple: inject() builds a new list
    return entry_context(
        manager,
        tool,
        entry.args,
        ctx,
        list(runs) if runs else (),
        merged.values,
        plan.phases,
        merged.locked,
        plan.env,
        pipeline.children if runs else None,
    )
