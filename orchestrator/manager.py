"""Manager: the facade of the engine (SPEC section 5): it wires the parts and hands each call to its owner.

``catalog`` finds tools and authorities and compiles each ref once into a
``Pipeline`` (plans, toolKeys, SCCs, the sorted chain), cached with the files
it came from; ``binding`` makes a call's context from its pipeline;
``invocation`` runs a call (options, limits, timeout, the run log, the sync
wrappers, ``resume``); ``lifecycle`` keeps and ends what the manager started;
``descriptions`` lists, describes and explains tools. The methods here say
what they promise and pass the call on; those bound from a module
(``close = lifecycle.close``) carry their docstrings there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from . import binding, descriptions, invocation, lifecycle
from .authorities import Authority
from .catalog import Catalog
from .events import Event, Events, Listener
from .lifecycle import Lifetime
from .limits import DEFAULT_LIMITS, Limits
from .registry import SearchPath
from .tool import Tool, ToolInfo

if TYPE_CHECKING:
    from .context import Context
    from .explain import Explanation
    from .recorder import Recorder
    from .runlog import RunLog


class Manager:
    """Runs tools through the pipeline.

    ``paths`` are searched in order, the built-in ``tools/`` last; they are
    trusted (may hold python tools). ``trusted_paths`` marks folders that
    ``paths`` metadata may add with python tools allowed. ``limits`` bounds
    what files, templates and sync code may cost (see ``Limits``).

    Edits to tool and authority files are seen by the next invocation that
    starts after they are noticed (file notifications, else a stat every
    ``Limits.stat_interval``); ``refresh()`` looks at once.
    The built-in folders are watched only in a source checkout: in an
    installed package they change only on reinstall (``watch_builtins``
    overrides; ``clear_cache()`` forgets everything).

    ``sessions`` is where conversations and suspended runs are kept: a
    store object or the path of its SQLite file (default: the
    ``TOOLCASCADE_SESSIONS`` environment variable, else a file under the
    user's state folder); it is opened on first use. ``approver`` decides
    the calls the ``approval`` middleware holds (see ``orchestrator.approval``).
    ``formats`` selects the file formats read per search path (see
    ``orchestrator.formats``); ``executor`` runs delegated units (see
    ``orchestrator.executor``; in process by default). ``runlog`` records
    every top-level call in a run log (see ``orchestrator.runlog``): a path,
    a ``RunLog``, or True for the CLI's file; None (the default) records
    nothing.

    A Manager is a context manager, sync and async (``with Manager(...) as
    manager:`` / ``async with``): leaving the block calls ``close()``, which
    ends what the manager started (see ``close``). A closed manager still
    finds, lists and explains tools; it invokes none.
    """

    def __init__(
        self,
        paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (),
        *,
        trusted_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (),
        max_depth: int = 64,
        max_stack: int = 2000,
        cwd: str | os.PathLike[str] | None = None,
        on_event: Listener | None = None,
        watch_builtins: bool | None = None,
        limits: Limits = DEFAULT_LIMITS,
        sessions: Any = None,
        approver: Callable[..., Any] | None = None,
        formats: Any = None,
        executor: Any = None,
        runlog: Any = None,
    ) -> None:
        catalog = self.catalog = Catalog(paths, trusted_paths, watch_builtins, limits, formats)
        self.paths, self.trusted = catalog.paths, catalog.trusted
        self.registry, self.authorities, self.planner = catalog.registry, catalog.authorities, catalog.planner
        self.events = Events()
        if on_event is not None:
            self.events.listeners.append(on_event)
        self.max_depth, self.max_stack, self.limits = max_depth, max_stack, limits
        self.cwd = Path(cwd).resolve() if cwd is not None else Path.cwd()
        self.approver, self.executor = approver, executor
        self.recorder: Recorder | None = lifecycle.recorder(self, runlog)  # None: nothing is recorded
        self.runlog: RunLog | None = self.recorder.runlog if self.recorder is not None else None
        self.lifetime = Lifetime(sessions)  # what resource() keeps, the session store, whether the manager is closed
        invocation.fit_recursion(max_stack)

    closed = property(lifecycle.is_closed)  # True once close() ran: the manager invokes nothing more
    sessions = property(lifecycle.sessions)  # the session store, opened on first use

    # -- tools and authorities -----------------------------------------------

    def search_path(self, folder: str | os.PathLike[str]) -> SearchPath:
        """A search path for ``folder``: trusted when the program marked it (or it is a base path)."""
        return self.catalog.search_path(folder)

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        metadata: Mapping[str, Any] | None = None,
        prompt: str | None = None,
        description: str | None = None,
        authority: str | None = None,
    ) -> Tool:
        """Register a function tool; ``fn(ctx)`` is its body. Registered tools shadow files.

        Raises:
            ToolDefinitionError: a bad name, a non-callable, or metadata that is not a mapping.
        """
        return self.registry.register(name, fn, metadata, prompt, description, authority)

    def find_tool(self, ref: str, paths: Iterable[str | os.PathLike[str]] | None = None) -> Tool:
        """Resolve ``ref`` against ``paths`` (default: the manager's), first match wins (R-FIND-1).

        Raises:
            ToolNotFoundError: no match, or a ref that would leave its search path.
            ToolDefinitionError: the matching file is malformed.
        """
        return self.catalog.find_tool(ref, paths)

    def find_authority(self, tool: Tool | str) -> Authority:
        """The nearest authority of ``tool`` (R-AUTH-2).

        Raises:
            ConfigurationError: an unknown explicit authority.
        """
        return self.catalog.find_authority(tool)

    def authority_chain(self, tool: Tool | str) -> tuple[Authority, ...]:
        """Every authority that contributes to ``tool``, root-most first (R-AUTH-3)."""
        return self.catalog.authority_chain(tool)

    def clear_cache(self) -> None:
        """Forget every parsed file and every derived cache, and remove the on-disk index of these search paths."""
        self.registry.clear()

    def refresh(self) -> None:
        """Look at the tool files now: edits made before this call are seen by the next invocation.

        Otherwise an edit is seen through file notifications (usually within
        0.1 s) or a stat at most every ``Limits.stat_interval``. Costs one stat
        per file and folder the caches depend on.
        """
        self.registry.watch()

    # -- lifecycle (orchestrator.lifecycle: bodies and docstrings) -----------------

    resource = lifecycle.resource  # resource(key, make): kept under key, made by make() on first use, closed by close()
    close = lifecycle.close  # close(): end what the manager started (watcher, kept resources, executors); idempotent
    aclose = lifecycle.aclose  # await aclose(): close() on a worker thread
    __enter__ = lifecycle.enter  # with Manager(...) as manager: ... closes it on leaving
    __exit__ = lifecycle.leave
    __aenter__ = lifecycle.aenter  # async with Manager(...) as manager: ... acloses it on leaving
    __aexit__ = lifecycle.aleave

    # -- invocation ------------------------------------------------------------

    # The invocation steps (orchestrator.invocation: bodies and docstrings) as methods.
    invoke = invocation.call  # invoke(ref, args=None, *, context, middleware, overrides, timeout, caller, parent)
    run = invocation.run  # await run(ctx, caller=None): run a bound context's chain (prepare, then run)
    resume = invocation.resume  # await resume(token, decision="approve", *, ref=None): continue an Interrupted run
    invoke_sync = invocation.invoke_sync  # invoke_sync(ref, args=None, *, backend="asyncio", **options): own loop
    resume_sync = invocation.resume_sync  # resume_sync(token, decision="approve", *, ref=None, backend="asyncio")

    def emit(self, kind: str, ctx: Context, iteration: int | None = None, **data: Any) -> None:
        """Send an event about ctx to every listener (nothing is built when nobody listens)."""
        if self.events:
            self.events.emit(Event(kind, ctx.tool.name, ctx.depth, ctx.run.id, iteration, data))

    def list_tools(self, *, hidden: bool = False) -> list[ToolInfo]:
        """Every tool reachable through the search paths, first match wins, for ``list`` and MCP.

        A tool that fails to load or resolve is listed with its ``error`` (and
        shown, since whether it is hidden is unknown): one bad file never hides
        the rest. ``hidden=True`` includes tools with ``visibility: hidden``.

        Blocking: it reads (and imports) every tool file it has not seen. From
        async code, ``await alist_tools()`` does the same on a worker thread.
        """
        return descriptions.list_tools(self, hidden)

    async def alist_tools(self, *, hidden: bool = False) -> list[ToolInfo]:
        """``list_tools()`` on a worker thread: the event loop keeps running while files are read and imported.

        Cancelling it waits for the listing in flight to end (it is not abandoned mid-read).
        """
        return await anyio.to_thread.run_sync(partial(self.list_tools, hidden=hidden))

    def describe(
        self, ref: str, paths: tuple[SearchPath, ...] | None = None, checked: set[str] | None = None
    ) -> ToolInfo:
        """What ``ref`` is, without running it: kind, description, merged ``params`` (unrendered), hidden.

        Raises:
            OrchestratorError: the tool cannot be found, loaded or its cascade resolved.
        """
        return descriptions.describe(self, ref, paths or self.paths, checked)

    # The binding steps (orchestrator.binding: bodies and docstrings) as methods: a unit's context for an executor,
    # and an entry named outside the chain (the runner binds its own entries' pipelines).
    prepare = binding.unit  # prepare(ref, args, options=NO_OPTIONS): a top-level context, ready for run
    enter = binding.enter  # enter(ctx, entry, height): the context of ctx's chain entry, or chain.SKIPPED (a cycle)
    invoke_entry = binding.invoke_entry  # await invoke_entry(ctx, entry): run it as an entry (ctx.manager.invoke_entry)

    # -- explain ---------------------------------------------------------------

    def explain(
        self,
        ref: str,
        args: Any = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        middleware: Any = None,
        render: bool = True,
    ) -> Explanation:
        """Why every key of ``ref`` has its value and how its chain is ordered (R-CAS-9).

        With ``render=False`` metadata templates are shown as written, so a
        tool whose templates need args can be explained without them.

        An ``$order`` cycle does not stop it: the explanation then carries the
        cycle (``Explanation.cycle``) and the chain's entries unsorted.

        Raises:
            OrchestratorError: the same errors an invocation would raise before running the chain.
        """
        return descriptions.explain(self, ref, args, overrides, middleware, render)
