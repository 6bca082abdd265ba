"""The MCP servers a Manager's search paths declare, started only when asked: ``list --remote``, ``check --remote``.

Listing or checking never starts a program on its own: ``check`` verifies
that a ``NAME/TOOL`` an agent's ``tools`` names has a server ``NAME``
declared and allowed where the agent runs (``orchestrator.remote.find_server``),
and ``list`` shows files only. With ``--remote`` the servers are started
side by side on the Manager's pool, each with at most ``timeout`` seconds
(or its entry's smaller ``timeout``) to start and list its tools, and
stopped once listed; a server that fails is one error row (``list``) or one
problem per ref that needs it (``check``), never the end of the command.

The servers ``list --remote`` shows are those a ref ``NAME/TOOL`` can reach:
declared at the top of a search path (its ``AUTHORITY.md``, the authorities
it inherits, the managed, user and local levels), in the ``AUTHORITY.md`` of
its folder ``NAME/``, or where one of the listed tools runs (an agent's own
servers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .authorities import FOLDER_FILE
from .errors import OrchestratorError, RemoteToolError
from .interpolate import is_template
from .problems import Problem, Report, where_key
from .remote import KIND, close_pool, declared_servers, find_server, missing_tool, pool_of, probe, remote_description
from .tool import ToolInfo

if TYPE_CHECKING:
    from .manager import Manager
    from .remotes import ServerSpec


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared server: its checked entry, or the error saying why it cannot be used."""

    name: str
    spec: ServerSpec | None
    error: OrchestratorError | None = None


def declared(manager: Manager, refs: Iterable[str] = ()) -> list[Declared]:
    """Every server a ``NAME/TOOL`` can reach (module docstring), nothing started; ``refs``: tools whose own count too.

    Each server once (by its entry), in the order found.
    """
    registry, paths = manager.registry, manager.paths
    found: dict[object, Declared] = {}

    def add(servers: dict[str, ServerSpec | OrchestratorError], only: str | None = None) -> None:
        for name, spec in servers.items():
            if only is not None and name != only:
                continue
            if isinstance(spec, OrchestratorError):
                found.setdefault((name, str(spec)), Declared(name, None, spec))
            else:
                found.setdefault(spec, Declared(name, spec))

    for sp in paths:
        try:
            add(declared_servers(registry, probe(sp), paths))
            folders = (
                sorted(p.name for p in sp.root.iterdir() if (p / FOLDER_FILE).is_file()) if sp.root.is_dir() else []
            )
            for folder in folders:
                if not folder.startswith((".", "_")):
                    add(declared_servers(registry, probe(sp, folder), paths), only=folder)
        except (OrchestratorError, OSError):
            continue  # a malformed mcp-servers or an unreadable folder: check says where
    for ref in refs:
        try:
            add(declared_servers(registry, manager.find_tool(ref), paths))
        except OrchestratorError:
            continue  # listed with its own error
    return list(found.values())


def started(
    manager: Manager, servers: Sequence[ServerSpec], timeout: float, note: Callable[[str], None]
) -> dict[ServerSpec, dict[str, Any] | RemoteToolError]:
    """Each server's tools by name (``mcp.types.Tool``), or why it failed: started side by side, then stopped.

    ``note`` is told which servers start (the CLI's progress note on stderr).
    """
    unique = list(dict.fromkeys(servers))
    if not unique:
        return {}
    names = ", ".join(dict.fromkeys(spec.name for spec in unique))
    note(f"starting MCP server{'s' if len(unique) > 1 else ''} {names} (at most {timeout:g} s each)...")
    capped = [replace(spec, timeout=min(spec.timeout, timeout)) for spec in unique]
    try:
        return dict(zip(unique, pool_of(manager.registry).list_each(capped), strict=True))
    finally:
        close_pool(manager.registry)  # listed: the servers stop now


def remote_rows(
    manager: Manager, infos: Sequence[ToolInfo], timeout: float, note: Callable[[str], None]
) -> list[ToolInfo]:
    """``list --remote``: a row per tool of every server declared where ``infos``' tools run (``NAME/TOOL``).

    A server that fails (or is refused) is one error row, ``NAME/*``.
    """
    servers = declared(manager, [info.ref for info in infos if info.error is None])
    if not servers:
        note("no MCP servers are declared (mcp-servers metadata) where these tools run")
        return []
    listed = started(manager, [d.spec for d in servers if d.spec is not None], timeout, note)
    rows = []
    for server in sorted(servers, key=lambda d: d.name):
        tools = listed[server.spec] if server.spec is not None else server.error
        if not isinstance(tools, dict):
            rows.append(ToolInfo(f"{server.name}/*", f"{server.name}/*", KIND, None, False, None, None, tools))
            continue
        for name in sorted(tools):
            ref = f"{server.name}/{name}"
            about = remote_description(server.name, tools[name])
            rows.append(ToolInfo(ref, ref, KIND, about, False, dict(tools[name].input_schema or {}), None))
    return rows


def declared_rows(manager: Manager) -> list[ToolInfo]:
    """``list --all``: a row ``NAME/*`` per server declared at a search path's top or a folder ``NAME/``, none started.

    Its tools are listed by ``list --remote``, which starts it; a server that
    cannot be used (refused, malformed) is an error row. An agent's own
    servers are found by ``--remote`` only: finding them plans every tool.
    """
    rows = []
    for server in sorted(declared(manager), key=lambda d: d.name):
        ref = f"{server.name}/*"
        about = f"MCP server, not started: list --remote starts it and lists its tools as {server.name}/TOOL"
        rows.append(ToolInfo(ref, ref, KIND, None if server.error else about, False, None, None, server.error))
    return rows


def remote_problems(manager: Manager, timeout: float, note: Callable[[str], None]) -> list[Problem]:
    """``check --remote``: each server an agent's ``tools`` reaches is started; it must list the tools named.

    A problem (at the ``tools`` line) per ref whose server fails or lacks the
    tool. What ``check`` finds without starting anything (an undeclared or
    refused server) is left to it.
    """
    registry, paths = manager.registry, manager.paths
    wanted: list[tuple[tuple[Any, int | None], str, ServerSpec]] = []
    for ref, _path, _sp in registry.discover(paths[:-1]):
        try:
            tool = registry.find(ref, paths)
            plan = manager.planner.plan(tool, paths, None)
        except OrchestratorError:
            continue  # check reports it
        names = plan.raw.values.get("tools")
        for name in names if isinstance(names, list) else ():
            if not isinstance(name, str) or "/" not in name or is_template(name) or registry.exists(name, paths):
                continue
            try:
                spec = find_server(registry, tool, name, paths)
            except OrchestratorError:
                continue  # check reports it
            if spec is not None:
                wanted.append((where_key(tool, plan, "tools"), name, spec))
    listed = started(manager, [spec for _, _, spec in wanted], timeout, note)
    report = Report(manager.cwd)
    for (path, line), name, spec in wanted:
        tools = listed[spec]
        remote = name.partition("/")[2]
        if isinstance(tools, RemoteToolError):
            report.add(path, line, f"tools names {name!r}: {tools.detail}")
        elif remote != "*" and remote not in tools:
            report.add(path, line, missing_tool(name, tools).detail)
    return report.problems()


def merged(problems: Sequence[Problem], more: Sequence[Problem]) -> list[Problem]:
    """Two reports as one: each problem once, sorted by file and line."""
    return sorted(dict.fromkeys([*problems, *more]), key=lambda p: (p.path or "", p.line or 0))
