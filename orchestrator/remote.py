"""Remote tools: an MCP server's tools, found by ref and run through the pipeline like any tool.

``mcp-servers: {NAME: {command, args, env, cwd, timeout} | {url, headers,
bearer-token-env, timeout}}`` is metadata, merged by the cascade. A ref
``NAME/TOOL`` that names no file or function is the tool ``TOOL`` of the
server ``NAME`` when that server is declared where the ref is looked up:

1. by a tool running in this task (innermost first: the agent whose model
   calls the tool, the program tool that invokes it), in its own file or
   the authorities it inherits; else
2. by the authorities a tool file in the folder ``NAME/`` of a search path
   would inherit (that folder's ``AUTHORITY.md`` files up to the root, the
   named authorities they inherit, ``default``, and the managed, user and
   local levels).

Declarations are read from files only (the cascade's levels, as written,
never rendered): ``$overrides`` and ``$context`` cannot add or change a
server. A level from a folder the program does not trust (the rule
``orchestrator.agent.routes`` applies to model routes) may not set any part
of an entry: starting a program or sending a header, token or variable is
for trusted configuration only (``SecurityError`` naming the file, line and
key). It may still ``$remove`` one.

The tool (``kind: remote``, uri ``mcp://NAME/TOOL``) has the server's
``inputSchema`` as ``params`` (so ``validate-args`` applies), its
``outputSchema`` as ``returns`` (``validate-returns``), its description,
and a body that calls the server through the Manager's pool
(``orchestrator.remotes``). It stands in the folder ``NAME/`` of the search
path where it was declared, so that folder's authorities (``approval``,
``call-limit``, ``log``...) apply to it as to a file there. Found through an
authority, it is cached like a file (until an authority changes or the
server says its tools changed); found through a running tool, it is built
again on each lookup. Each call looks the server up again where it runs
(the same order), so a tool cached from one place never reaches a server
that is not declared where it is called.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .authorities import Authorities
from .cascade import untrusted_level
from .chain import frames
from .errors import ConfigurationError, OrchestratorError, RemoteToolError, SecurityError, ToolNotFoundError
from .planner import Planner
from .registry import Registry, SearchPath
from .remotes import Pool, ServerSpec, parse_server
from .tool import Tool

if TYPE_CHECKING:
    from .cascade import Level
    from .context import Context

__all__ = [
    "KIND",
    "SERVERS",
    "RemoteToolError",
    "checked_server",
    "close_pool",
    "declared_servers",
    "find_remote",
    "find_server",
    "missing_tool",
    "pool_of",
    "probe",
    "remote_description",
    "remote_refs",
]

SERVERS = "mcp-servers"
"""The metadata key declaring MCP servers."""
KIND = "remote"
"""``Tool.kind`` of an MCP server's tool."""

# Per registry, held weakly: neither a pool nor a planner keeps its registry (and the file watcher thread it
# owns) alive once its Manager is gone.
_planners: weakref.WeakKeyDictionary[Registry, Planner] = weakref.WeakKeyDictionary()
_pools: weakref.WeakKeyDictionary[Registry, Pool] = weakref.WeakKeyDictionary()


def pool_of(registry: Registry) -> Pool:
    """The pool of ``registry``'s remote tools (made on first use; a tool list change drops its remote tools)."""
    pool = _pools.get(registry)
    if pool is None or pool.closed:
        pool = _pools[registry] = Pool(_dropper(weakref.ref(registry)))
        weakref.finalize(registry, pool.close)
    return pool


def _dropper(held: weakref.ref[Registry]) -> Callable[[], None]:
    """A server's tools changed: drop the registry's derived caches, if it is still there."""

    def changed() -> None:
        registry = held()
        if registry is not None:
            registry.changed()

    return changed


def close_pool(registry: Registry) -> None:
    """Stop the servers ``registry``'s remote tools started (``Manager.close``); a later lookup starts them again."""
    pool = _pools.pop(registry, None)
    if pool is not None:
        pool.close()


def _planner(registry: Registry) -> Planner:
    """The planner remote lookups use: the registry's own caches; it lives while the registry does, no longer.

    A planner holds its registry, so it is kept on a weak proxy of it: a value in ``_planners`` that held the
    registry itself would keep the key alive for ever.
    """
    planner = _planners.get(registry)
    if planner is None:
        proxy = weakref.proxy(registry)
        planner = _planners[registry] = Planner(proxy, Authorities(proxy))  # type: ignore[arg-type]
    return planner


def find_remote(
    registry: Registry, ref: str, paths: tuple[SearchPath, ...], deps: set[str]
) -> tuple[Tool, bool] | None:
    """The remote tool ``ref`` names, and whether it may be cached, or None when ``ref`` names no declared server.

    Files the lookup read (authorities) join ``deps``.

    Raises:
        SecurityError: an untrusted level set the server's entry.
        ConfigurationError: a malformed entry.
        RemoteToolError: the server did not start or answer.
        ToolNotFoundError: the server has no such tool (with "did you mean").
    """
    server, slash, remote = ref.partition("/")
    if not slash or not remote or "/" in remote:
        return None
    found = _declared(registry, server, paths, deps)
    if found is None:
        return None
    spec, root, trusted, cacheable = found
    tools = pool_of(registry).list_tools(spec)
    listed = tools.get(remote)
    if listed is None:
        raise missing_tool(ref, tools)
    return _tool(spec, ref, listed, root, trusted), cacheable


def missing_tool(ref: str, tools: Iterable[str]) -> ToolNotFoundError:
    """The error for ``NAME/TOOL`` when the server lists ``tools`` and not ``TOOL`` (with "did you mean")."""
    from difflib import get_close_matches

    server, _, remote = ref.partition("/")
    near = get_close_matches(remote, list(tools), 3)
    return ToolNotFoundError(
        ref,
        [f"mcp://{server}"],
        reason=f"MCP server {server!r} has no tool {remote!r}",
        near=lambda: [f"{server}/{n}" for n in near],
    )


def find_server(registry: Registry, tool: Tool, ref: str, paths: tuple[SearchPath, ...]) -> ServerSpec | None:
    """The MCP server whose tool ``ref`` (``NAME/TOOL``, or ``NAME/*``) names, as ``tool`` would call it; nothing started.

    The server must be declared where ``tool`` runs (its own file and the
    authorities it inherits, else the authorities of the folder ``NAME/``, as
    a lookup at run time finds it), by trusted configuration, and well
    formed. ``check`` asks so; whether the server starts and lists ``TOOL``
    is for ``check --remote`` (``orchestrator.servers``).

    None when ``ref`` is no remote tool at all: no server ``NAME`` is declared
    there, nor one whose name is close to it.

    Raises:
        ToolNotFoundError: ``NAME`` is not declared but a declared server's name is close ("did you mean").
        SecurityError: a level from a folder the program does not trust set the entry.
        ConfigurationError: the entry is malformed.
    """
    server, slash, remote = ref.partition("/")
    if not slash or not server or not remote or "/" in remote:
        return None
    plan = _planner(registry).plan(tool, paths, None)
    entry = _entry(plan.raw.values, server)
    if entry is not None:
        spec = checked_server(server, entry, plan.levels, tool, paths)
    else:
        found = _probed(registry, server, paths, set())
        if found is None:
            from difflib import get_close_matches

            servers = plan.raw.values.get(SERVERS)
            near = get_close_matches(server, [str(n) for n in servers or ()], 3)
            if not near:
                return None
            raise ToolNotFoundError(
                ref,
                reason=f"no MCP server {server!r} is declared where {tool.name!r} runs",
                near=lambda: [f"{n}/{remote}" for n in near],
            )
        spec = found[0]
    return spec


def remote_refs(registry: Registry, server: str, paths: tuple[SearchPath, ...]) -> list[str] | None:
    """The refs of every tool of ``server`` (``NAME/TOOL``) declared where ``paths`` look, or None when undeclared.

    Raises:
        the errors of ``find_remote``.
    """
    found = _declared(registry, server, paths, set())
    if found is None:
        return None
    return sorted(f"{server}/{name}" for name in pool_of(registry).list_tools(found[0]))


def declared_servers(
    registry: Registry, tool: Tool, paths: tuple[SearchPath, ...]
) -> dict[str, ServerSpec | OrchestratorError]:
    """Every MCP server declared where ``tool`` runs (its own file and its authorities), nothing started.

    Each is its checked spec, or the error saying why it cannot be used (``checked_server``).

    Raises:
        ConfigurationError: ``mcp-servers`` is not a mapping.
    """
    plan = _planner(registry).plan(tool, paths, None)
    servers = plan.raw.values.get(SERVERS)
    if servers is None:
        return {}
    if not isinstance(servers, Mapping):
        raise ConfigurationError(f"{SERVERS} must be a mapping of server names to entries", key=SERVERS)
    found: dict[str, ServerSpec | OrchestratorError] = {}
    for name in servers:
        try:
            found[str(name)] = checked_server(str(name), servers[name], plan.levels, tool, paths)
        except OrchestratorError as exc:
            found[str(name)] = exc
    return found


def probe(sp: SearchPath, folder: str | None = None) -> Tool:
    """A stand-in for a tool file in ``folder`` of ``sp`` (None: its top): its plan declares what ``NAME/TOOL`` finds.

    The servers declared for a ref ``NAME/TOOL`` outside any running tool are
    those the probe of the folder ``NAME`` declares (``declared_servers``).
    """
    where = sp.root if folder is None else sp.root / folder
    return Tool(
        name=f"{folder or '.'}/*",
        uri=f"mcp-servers:{where}",
        kind=KIND,
        frontmatter={},
        metadata={},
        path=where / "*",
        root=sp.root,
        trusted=sp.trusted,
    )


def _declared(
    registry: Registry, server: str, paths: tuple[SearchPath, ...], deps: set[str]
) -> tuple[ServerSpec, Path | None, bool, bool] | None:
    """``server``'s spec, the root and trust its tools get, and whether the answer may be cached; None: undeclared."""
    planner = _planner(registry)
    frame = frames.get()
    seen: set[int] = set()
    while frame is not None:  # the tools running in this task, innermost first
        ctx = frame[0]
        for running in (ctx, getattr(ctx, "target", None)) if ctx is not None else ():
            if running is None or id(running) in seen or running.tool.kind == KIND:
                continue
            seen.add(id(running))
            plan = planner.plan(running.tool, running.paths, None)
            entry = _entry(plan.raw.values, server)
            if entry is not None:
                spec = checked_server(server, entry, plan.levels, running.tool, running.paths)
                return spec, running.paths[0].root, running.tool.trusted, False
        frame = frame[2]
    return _probed(registry, server, paths, deps)


def _probed(
    registry: Registry, server: str, paths: tuple[SearchPath, ...], deps: set[str]
) -> tuple[ServerSpec, Path | None, bool, bool] | None:
    """``server`` as the authorities of a tool file in the folder ``NAME/`` of a search path declare it (cacheable)."""
    planner = _planner(registry)
    for sp in paths:
        stand_in = probe(sp, server)
        registry.watch([str(stand_in.path)], deps)  # a plan depends on its tool's file: the probe's has one too
        plan = planner.plan(stand_in, paths, deps)
        entry = _entry(plan.raw.values, server)
        if entry is not None:
            return checked_server(server, entry, plan.levels, stand_in, paths), sp.root, sp.trusted, True
    return None


def _entry(values: Mapping[str, Any], server: str) -> Any:
    servers = values.get(SERVERS)
    if servers is None:
        return None
    if not isinstance(servers, Mapping):
        raise ConfigurationError(f"{SERVERS} must be a mapping of server names to entries", key=SERVERS)
    return servers.get(server)


def checked_server(
    server: str, entry: Any, levels: Sequence[Level], tool: Tool, paths: Sequence[SearchPath]
) -> ServerSpec:
    """The entry parsed, once no level from an untrusted folder set any part of it.

    Raises:
        SecurityError: such a level did (naming its file, line and key).
        ConfigurationError: the entry is malformed.
    """
    roots = [sp.root for sp in paths if not sp.trusted]
    if not tool.trusted and tool.root is not None:
        roots.append(tool.root)
    trusted_siblings = {sp.root.parent / "authorities" for sp in paths if sp.trusted}
    setters: list[Level] = []
    for level in levels:
        removed = level.annotations.get("$remove")
        if removed == SERVERS or isinstance(removed, list) and SERVERS in removed:
            setters = []
        value = level.data.get(SERVERS)
        if value is not None and (not isinstance(value, Mapping) or server in value):
            setters.append(level)
    for level in setters:
        if untrusted_level(level, tool, roots, trusted_siblings):
            who = "this tool" if level.kind == "tool" else f"{level.kind} {level.name!r}"
            raise SecurityError(
                f"{who} declares MCP server {server!r}, but it is a file from a folder the program does not trust: "
                "such a file cannot start a program or choose where a request, a header or a token goes. Declare "
                "the server in trusted configuration (an authority or tool in a trusted folder) or mark the folder "
                "trusted (Manager(trusted_paths=[...]))",
                tool=tool.name,
                path=level.path,
                line=level.lines.get(SERVERS),
                key=f"{SERVERS}.{server}",
            )
    return parse_server(server, entry, tool.name)


def remote_description(server: str, listed: Any) -> str:
    """What a server's tool is (an ``mcp.types.Tool``): its description, else its title, else where it comes from."""
    return listed.description or getattr(listed, "title", None) or f"{listed.name} on MCP server {server}"


def _tool(spec: ServerSpec, ref: str, listed: Any, root: Path | None, trusted: bool) -> Tool:
    """The ``Tool`` for one listed MCP tool."""
    server, remote = spec.name, listed.name
    metadata: dict[str, Any] = {"params": dict(listed.input_schema or {"type": "object"})}
    if listed.output_schema:
        metadata["returns"] = dict(listed.output_schema)
    description = remote_description(server, listed)

    async def body(ctx: Context) -> Any:
        registry = ctx.owner.registry
        found = _declared(registry, server, ctx.paths, set())  # where this call runs: a cached tool may be elsewhere
        if found is None:
            raise ToolNotFoundError(ref, [f"mcp://{server}"], reason=f"no MCP server {server!r} is declared here")
        args = ctx.args if isinstance(ctx.args, Mapping) else {}
        pool = pool_of(registry)
        ctx.owner.resource(("mcp-client-pool", id(pool)), lambda: pool)  # closed by Manager.close()
        return await pool.call(found[0], remote, args, ref, ctx.owner.limits.media_bytes)

    return Tool(
        name=ref,
        uri=f"mcp://{server}/{remote}",
        kind=KIND,
        frontmatter={"name": ref, "description": description, "metadata": metadata},
        metadata=metadata,
        fn=body,
        description=description,
        path=None if root is None else root / server / remote,
        root=root,
        trusted=trusted,
    )
