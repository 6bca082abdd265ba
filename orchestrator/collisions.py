"""Keys that run a tool as middleware, checked statically: args against its params, tools not written as
middleware (a key that is most likely data, issue 25), user tools in a built-in's place.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any

from .errors import OrchestratorError, ValidationError
from .interpolate import has_templates
from .problems import Report, name_line, where_key
from .registry import Snapshot
from .schema import check as check_schema
from .schema import fill_defaults
from .templates import holds_template
from .tool import Tool

if TYPE_CHECKING:
    from .cascade import Plan
    from .manager import Manager


def check_middleware_args(
    manager: Manager,
    tool: Tool,
    plan: Plan,
    verdicts: Iterable[tuple[str, bool, str]],
    report: Report,
    run: Snapshot,
    templated: Iterable[str] | None = None,
) -> None:
    """A middleware key's value is that middleware's args: check it against the middleware's params, statically.

    ``templated``: the tool's own metadata keys holding a template, when known (``templates.templated_keys``).
    """
    values, known = plan.raw.values, run.values
    for key, middleware, _why in verdicts:
        if not middleware:
            continue
        value = values.get(key)
        passed = known.get(("args", key, id(value)))
        if passed is not None and passed[0] is value and passed[1] is None:
            continue  # these very args passed (or hold a template): as _check_args answers, without the call
        try:
            _check_args(manager, key, value, run, tool, templated)
        except ValidationError as exc:
            path, line = where_key(tool, plan, key)
            failures = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in exc.errors)
            found = manager.planner.target(key, manager.paths, run)
            report.add(
                path,
                line,
                f"{key!r} runs the middleware {found[1] if found else key} with args that fail its params: "
                f"{failures}; if {key!r} is meant as data, list it in $static",
            )
        except OrchestratorError:
            continue  # the middleware's own problems are reported on its own file


def check_collisions(
    manager: Manager,
    tool: Tool,
    plan: Plan,
    verdicts: Iterable[tuple[str, bool, str]],
    report: Report,
    run: Snapshot,
) -> None:
    """A key that runs a tool not written as middleware: most likely data that shares a tool's name (issue 25).

    Reported once, where the key is set (an authority's key once for all the
    tools it governs), naming the tool it runs and the fixes. Quiet for a
    tool declared ``role: middleware``, a built-in (a user tool in a
    built-in's place is reported on its own file), a registered function, a
    key listed in ``$dynamic``, and a python tool whose code uses
    ``ctx.target`` (middleware written before ``role`` was declared).
    """
    for key, middleware, _why in verdicts:
        if not middleware or key in plan.raw.dynamic:
            continue
        memo = ("attachable", key)  # the same few keys (the built-ins) in every tool: asked once per check
        attachable = run.values.get(memo)
        if attachable is None:
            attachable = run.values[memo] = manager.planner.attachable(key, manager.paths, run)
        if attachable:
            continue
        try:
            named = manager.registry.find(key, manager.paths, run)
        except OrchestratorError:
            continue  # its own problems are reported on its own file
        if named.path is None or named.kind == "function" or _uses_target(named):
            continue
        if manager.registry.exists(key, manager.paths[-1:], run):
            continue  # a tool in a built-in's place: check_replaced reports it on its own file
        runs = report.shown(named.path)
        if named.kind == "python":
            what = "its code never uses ctx.target: it runs in place of each tool the key is set for"
        elif _model_of(manager, named, run) is None:
            what = "a markdown template: its text replaces the result of each tool the key is set for"
        else:
            what = "a model's answer replaces the result of each tool the key is set for"
        report.warn(
            *where_key(tool, plan, key),
            f"{key!r} runs {runs} as middleware (the value as its args), but {runs} is not declared "
            f"role: middleware ({what}); if {key!r} is data, write $static: [{key}] beside it or rename it; "
            f"if {runs} is middleware, give it role: middleware; to make every such key data, "
            "set $attach: middleware in an AUTHORITY.md above",
        )


def _model_of(manager: Manager, tool: Tool, run: Snapshot) -> Any:
    """The merged ``model`` of ``tool`` (None when it has none, or its cascade fails: reported on its own file)."""
    try:
        return manager.planner.plan(tool, manager.paths, run).raw.values.get("model")
    except OrchestratorError:
        return None


def _uses_target(tool: Tool) -> bool:
    """True when a python tool's module mentions ``target`` (``ctx.target``, ``ctx_target``): written to wrap.

    Code objects of the module's functions are read (names, never run), nested
    functions included. A callable without code (an object) counts as using it:
    ``check`` says nothing it cannot see.
    """
    fn = tool.fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return tool.kind == "python"
    module = getattr(fn, "__globals__", {})
    codes = [code, *(v.__code__ for v in module.values() if isinstance(v, FunctionType) and v.__globals__ is module)]
    while codes:
        current = codes.pop()
        if "target" in current.co_names or "ctx_target" in current.co_names:
            return True
        codes.extend(c for c in current.co_consts if isinstance(c, CodeType))
    return False


def check_replaced(manager: Manager, replacing: Iterable[tuple[str, Path]], report: Report, run: Snapshot) -> None:
    """User tools named like a built-in: they run wherever the built-in would, for every tool (issue 25)."""
    default = manager.authorities.named("default", manager.paths, run)
    pipeline = {k for k in default.metadata if not str(k).startswith("$")} if default is not None else set()
    builtins = manager.registry.names(manager.paths[-1], (), run).refs
    for ref, path in replacing:
        builtin = builtins[ref][0].name
        if ref in pipeline:
            where = f"the default authority runs {ref!r} in every tool's pipeline, so every tool runs this file"
        else:
            where = f"every tool that runs {ref!r} (a metadata key naming it, or the engine) runs this file"
        report.warn(
            path,
            name_line(path),
            f"this tool takes the place of the built-in {ref!r} (built-in {builtin}): {where} in its place; "
            "rename it, unless replacing the built-in is what you mean",
        )


def _check_args(
    manager: Manager, key: str, value: Any, run: Snapshot, tool: Tool, templated: Iterable[str] | None
) -> None:
    """Check ``value`` against the params of the middleware ``key``: once per value object, not once per tool.

    Templated args are only known at run time: nothing is checked.

    An authority's middleware args are one object shared by every tool it
    governs (a catalog's 10,000 tools, 8 built-ins each): the verdict is
    remembered by the value's identity, the value held so the identity stays its own.

    Raises:
        ValidationError: the args fail the params (remembered, raised each time).
        OrchestratorError: the middleware cannot be found, loaded or resolved.
    """
    memo = ("args", key, id(value))
    known = run.values.get(memo)
    if known is not None and known[0] is value:
        if known[1] is not None:
            raise known[1].with_traceback(None)
        return
    if holds_template(tool, templated, key, value):
        run.values[memo] = (value, None)
        return
    params, templated_params = _params_of(manager, key, run)
    failure = None
    if params is not None and not templated_params:
        try:
            check_schema(params, fill_defaults(params, value), ValidationError, key)
        except ValidationError as exc:
            failure = exc
    run.values[memo] = (value, failure)
    if failure is not None:
        raise failure


def _params_of(manager: Manager, key: str, run: Snapshot) -> tuple[Any, bool]:
    """The merged ``params`` of the middleware ``key`` names, and whether they hold a template: described (and
    walked) once per check, not once per tool using it.

    Raises:
        OrchestratorError: the middleware cannot be found, loaded or resolved (remembered, raised each time).
    """
    memo = ("params", key)
    known = run.values.get(memo, _NONE)
    if known is _NONE:
        try:
            params = manager.describe(key, checked=run).params
            known = (params, has_templates(params))
        except OrchestratorError as exc:
            known = exc
        run.values[memo] = known
    if isinstance(known, OrchestratorError):
        raise known.with_traceback(None)
    return known  # type: ignore[no-any-return]


_NONE = object()
