"""The tools an agent offers its model: the names it may call and how they are described on the wire.

``tools`` metadata lists the names; ``allowed-tools`` (set by the
``validate-allowed-tools`` middleware, or given as metadata) narrows them; a
middleware agent also gets ``next``, which continues the chain it wraps.
``NAME/*`` names every tool of the MCP server ``NAME`` when one is declared
where the agent runs (``orchestrator.remote``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, ToolNotFoundError
from ..schema import object_schema
from ..tool import wire_name

if TYPE_CHECKING:
    from ..context import Context
    from ..manager import Manager

NEXT = "next"
"""The tool a middleware agent's model calls to continue the wrapped chain."""


def allowed_tools(ctx: Context) -> frozenset[str]:
    """The tool refs the agent of ctx may call: its ``tools`` within ``allowed-tools``, and ``next`` for middleware.

    Raises:
        ConfigurationError: ``tools`` is not a list of names.
    """
    names = ctx.meta.get("tools") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigurationError("tools must be a list of tool names", tool=ctx.tool.name, key="tools")
    names = listed_tools(ctx, names)
    allowed = ctx.locals.get("allowed-tools")
    if allowed is None and ctx.meta.get("allowed-tools") is not None:
        allowed = frozenset(ctx.meta["allowed-tools"])
    found = [n for n in names if allowed is None or n in allowed]
    if ctx.target is not ctx:
        found.append(NEXT)
    return frozenset(found)


def offered_tools(ctx: Context, manager: Manager, allowed: frozenset[str]) -> list[dict[str, Any]]:
    """The allowed tools as offered to the model: ``{name (on the wire), ref, wrapped, description, parameters}``.

    Raises:
        ConfigurationError: two tools share a wire name, a name is no tool or is middleware,
            or a tool's params make no object schema.
    """
    offered = []
    wires: dict[str, str] = {}
    for name in [*listed_tools(ctx, ctx.meta.get("tools") or []), NEXT]:
        if name not in allowed:
            continue
        wire = wire_name(name)
        if wires.setdefault(wire, name) != name:
            raise ConfigurationError(
                f"tools {wires[wire]!r} and {name!r} would both be offered to the model as {wire!r}; "
                "rename one of them",
                tool=ctx.tool.name,
                key="tools",
            )
        if name == NEXT:
            schema: dict[str, Any] = {"type": "object", "properties": {}}
            wrapped, description = False, "Continue the wrapped tool's pipeline and return its result."
        else:
            try:
                info = manager.describe(name, ctx.paths, ctx.run.checked)
            except ToolNotFoundError as exc:
                raise not_a_tool(ctx, manager, name, exc) from exc
            if info.role == "middleware":
                raise ConfigurationError(
                    f"tool {name!r} is middleware (role: middleware): it wraps other tools and cannot be offered "
                    "to a model",
                    tool=ctx.tool.name,
                    key="tools",
                )
            try:
                schema, wrapped = object_schema(info.params)
            except ValueError as exc:
                raise ConfigurationError(f"tool {name!r}: {exc}", tool=ctx.tool.name, key="tools") from exc
            description = info.description or ""
        offered.append(
            {
                "name": wire,
                "ref": name,
                "wrapped": wrapped,
                "description": description,
                "parameters": schema,
            }
        )
    return offered


def listed_tools(ctx: Context, names: list[str]) -> list[str]:
    """``names`` with each ``NAME/*`` of a declared MCP server replaced by its tools' refs (in their order).

    A ``NAME/*`` that names no declared server stays as written (and is reported as no tool).

    Raises:
        OrchestratorError: the server's declaration is refused or malformed, or it does not start.
    """
    if not any(n.endswith("/*") for n in names):
        return names
    from ..remote import remote_refs  # only agents that name a server's tools pay for the MCP client

    out: list[str] = []
    for name in names:
        server, _, rest = name.partition("/")
        refs = remote_refs(ctx.owner.registry, server, ctx.paths) if rest == "*" else None
        out.extend(refs if refs is not None else [name])
    return list(dict.fromkeys(out))


def not_a_tool(ctx: Context, manager: Manager, name: str, exc: ToolNotFoundError) -> ConfigurationError:
    """The error for a name in ``tools`` that is no tool, at the file and line that listed it.

    The not-found error's own "did you mean" (built only now) comes along in its detail.
    """
    levels = manager.planner.plan(ctx.tool, ctx.paths, ctx.run.checked).levels
    setter = next((lv for lv in reversed(levels) if _lists(lv.data.get("tools"), name)), None)
    path, line = (setter.path, setter.lines.get("tools")) if setter and setter.path else (ctx.tool.path, None)
    return ConfigurationError(
        f"tools lists {name!r}, which agent {ctx.tool.name!r} cannot offer its model: {exc.detail}",
        tool=ctx.tool.name,
        path=path,
        line=line,
        key="tools",
    )


def _lists(value: Any, name: str) -> bool:
    """Whether a level's ``tools`` value lists ``name``."""
    return isinstance(value, list) and name in value
