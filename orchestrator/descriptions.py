"""Descriptions: what a tool is and why, without running it (``Manager.describe``, ``list_tools``, ``explain``).

The Manager's read-only side, written as functions of the manager so that
``manager.py`` stays the facade. A description is cached with the files it
came from; an explanation is built per call from the same steps an
invocation takes (``orchestrator.binding``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .binding import prepare
from .collector import paused
from .errors import OrchestratorError, OrderCycleError
from .explain import Explanation, explanation
from .options import extract_options
from .registry import SearchPath, check_ref
from .schema import json_schema
from .tool import ToolInfo

if TYPE_CHECKING:
    from .context import Context
    from .manager import Manager


def list_tools(manager: Manager, hidden: bool) -> list[ToolInfo]:
    """Every tool reachable through ``manager``'s search paths (see ``Manager.list_tools``)."""
    found = []
    checked: set[str] = set()  # one listing, one look at each file and folder
    with paused():  # what a listing builds is kept in the caches: collections would find nothing to free
        for ref, path, _sp in manager.registry.discover(manager.paths, parse=True):
            try:
                info = describe(manager, ref, manager.paths, checked)
            except OrchestratorError as exc:
                found.append(ToolInfo(ref, ref, "unknown", None, False, None, path, exc))
                continue
            if hidden or not info.hidden:
                found.append(info)
    return found


def describe(manager: Manager, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None) -> ToolInfo:
    """What ``ref`` is (see ``Manager.describe``); its ``params`` are JSON Schema, a Picoschema shorthand expanded.

    Raises:
        OrchestratorError: the tool cannot be found, loaded or its cascade resolved.
    """
    if type(ref) is not str:
        check_ref(ref)  # refused before it is hashed into a cache key

    def compute(deps: set[str]) -> ToolInfo:
        tool = manager.registry.find(ref, paths, deps)
        plan = manager.planner.plan(tool, paths, deps)
        role = tool.frontmatter.get("role")
        return ToolInfo(
            ref,
            tool.name,
            tool.kind,
            tool.description,
            tool.hidden or role == "middleware",  # the tool's own: never inherited (R-TOOL-6)
            json_schema(plan.raw.values.get("params"), "params", tool),  # a shorthand as JSON Schema
            tool.path,
            role=role if isinstance(role, str) else None,
            format=tool.format,
        )

    # Cached with the files it came from: a warm listing makes no new objects (a full GC over 10,000
    # tools' worth of them took longer than the listing itself).
    return manager.registry.memo("described", (ref, paths), compute, checked)


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
