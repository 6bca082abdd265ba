"""Context: the state of one invocation, and its bound manager facade.

A Context is created for every invocation, chain entries included. It holds
the effective args, the merged metadata, the chain and the runner's three
pieces of state (position, finished, body ran). ``ctx.manager`` is bound to
it: ``await ctx.manager.next()`` continues *this* context's chain.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from . import chain
from .errors import ConfigurationError, InvocationError, SecurityError
from .ordering import Entry
from .registry import SearchPath
from .tool import Tool

if TYPE_CHECKING:
    from .binding import Guard, Place
    from .cascade import Merged
    from .events import Events
    from .limits import Limits
    from .manager import Manager
    from .pipeline import Children, Pipeline

log = logging.getLogger("orchestrator")


# The ``ctx.run.state`` a resumed run starts from (``orchestrator.interrupts.resume``), taken by the first
# top-level invocation that starts under it: a list of one state, emptied when taken.
carried: ContextVar[list[dict[str, Any]] | None] = ContextVar("toolcascade_carried_state", default=None)


class Shared:
    """What every invocation under one top-level ``Manager.invoke`` shares: the run's id, history and stores.

    ``history`` is flat: three items (tool name, args, timestamp) per
    invocation, in order, so that recording one builds no object the cyclic
    collector tracks (a chain 1,000 entries deep keeps fewer objects for it
    to walk); ``ctx.run.history`` shows each record as a mapping.
    ``usage`` and ``state`` are made on first use: most runs never touch them.
    ``tracer`` is the OpenTelemetry tracer of the program's provider when the
    run started, or None: a provider set during a run traces from the next.
    """

    __slots__ = ("id", "history", "checked", "tracer", "_usage", "_state")

    def __init__(
        self,
        id: str,
        history: list[Any] | None = None,
        checked: set[str] | None = None,
        usage: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        tracer: Any = None,
    ) -> None:
        self.id = id
        self.history = history if history is not None else []
        self.checked = checked if checked is not None else set()
        self.tracer = tracer
        self._usage = usage
        self._state = state

    @property
    def usage(self) -> dict[str, Any]:
        usage = self._usage
        if usage is None:
            usage = self._usage = {}
        return usage

    @property
    def state(self) -> dict[str, Any]:
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    @property
    def kept_state(self) -> dict[str, Any] | None:
        """``state`` when someone used it, else None (read without making it: a suspended run saves it)."""
        return self._state


class History(Sequence[dict[str, Any]]):
    """``ctx.run.history``: one ``{tool, args, timestamp}`` frame per invocation of the run, in order.

    A read-only view of ``Shared.history`` (three items per invocation): the
    mapping is built when a frame is read, so a run that never looks pays
    for no dictionaries.
    """

    __slots__ = ("_frames",)

    def __init__(self, frames: list[Any]) -> None:
        self._frames = frames

    def __len__(self) -> int:
        return len(self._frames) // 3

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        count = len(self)
        if not -count <= index < count:
            raise IndexError("history index out of range")
        at = 3 * (index % count)
        flat = self._frames
        return {"tool": flat[at], "args": flat[at + 1], "timestamp": flat[at + 2]}

    def __repr__(self) -> str:
        return f"History({list(self)!r})"


class Run:
    """What an invocation knows of its run: the shared id and history, its own origin and tool.

    ``history``, ``checked`` (files stat-ed in this run) and ``usage`` (model
    token counts summed over the run: ``prompt_tokens``, ``completion_tokens``,
    ...) and ``state`` (run-local storage for middleware: call counts, a
    breaker's memory; key it by your tool's name) are shared by every
    invocation under one top-level ``Manager.invoke``;
    ``origin`` and ``tool`` describe the tool of this invocation (built when read).
    """

    __slots__ = ("_shared", "_tool")

    def __init__(self, shared: Shared, tool: Tool) -> None:
        self._shared = shared
        self._tool = tool

    @property
    def id(self) -> str:
        """The run's id: the same for every invocation under one top-level invoke."""
        return self._shared.id

    @property
    def history(self) -> History:
        """One ``{tool, args, timestamp}`` frame per invocation of the run, in order (read-only)."""
        return History(self._shared.history)

    @property
    def checked(self) -> set[str]:
        """The files whose freshness this run has checked."""
        return self._shared.checked

    @property
    def usage(self) -> dict[str, Any]:
        """Model token counts summed over the run."""
        return self._shared.usage

    @property
    def state(self) -> dict[str, Any]:
        """Run-local storage for middleware (key it by your tool's name)."""
        return self._shared.state

    @property
    def origin(self) -> dict[str, Any]:
        """``{uri, frontmatter}`` of the tool this invocation runs."""
        return {"uri": self._tool.uri, "frontmatter": self._tool.frontmatter}

    @property
    def tool(self) -> dict[str, Any]:
        """``{name, uri, kind, description}`` of the tool this invocation runs."""
        tool = self._tool
        return {"name": tool.name, "uri": tool.uri, "kind": tool.kind, "description": tool.description}


class Context:
    """One invocation's state (R-INV-3). ``target`` is the context a chain entry serves.

    Built once, with its final values, by the manager. It holds no reference
    to itself (``target`` of a tool's own context, ``manager``, ``run``, and
    ``meta`` and ``trust`` until someone reads them, are made when read), so
    a finished invocation is freed by reference counting, not by the cyclic
    garbage collector.

    Middleware uses ``ctx.manager``: the operations bound to this context.
    Three attributes are the engine's, public so that features (agents,
    approval, formats, executors) need no private name; read them, never
    assign them:

    - ``owner``: the ``Manager`` running this invocation (its ``limits``,
      ``approver``, ``sessions``, ``registry``, ``planner``, ``emit``, ...);
    - ``shared``: the record every invocation of the run shares (``Shared``;
      ``ctx.run`` is its view for middleware);
    - ``resolved``: what the entries of a template-free chain resolve to,
      compiled with the chain (``pipeline.Children``), or None.
    """

    __slots__ = (
        "args",
        "locals",
        "nonlocals",
        "parent",
        "envelope",
        "paths",
        "cwd",
        "depth",
        "tool",
        "chain",
        "pos",
        "finished",
        "body_ran",
        "body",
        "entry",
        "phases",
        "locked",
        "running",
        "owner",
        "shared",
        "resolved",
        "_target",
        "_run",
        "_values",
        "_meta",
        "_env",
        "_trust",
    )

    def __init__(
        self,
        manager: Manager,
        tool: Tool,
        args: Any,
        shared: Shared,
        *,
        parent: Context | None,
        target: Context | None,
        envelope: Mapping[str, Any] | None,
        paths: tuple[SearchPath, ...],
        cwd: Path,
        chain: Sequence[Entry],
        values: Mapping[str, Any],
        phases: tuple[str, ...] = (),
        locked: frozenset[str] = frozenset(),
        env: bool = False,
        nonlocals: dict[str, Any] | None = None,
        resolved: Children | None = None,
    ) -> None:
        self.owner = manager
        self.tool = tool
        self.args = args
        self.shared = shared
        self._run: Run | None = None
        self.parent = parent
        self._target = target  # None: itself (kept out of the slot so a context never refers to itself)
        self.entry = target is not None
        self.envelope = envelope if envelope is not None else {}
        self.paths = paths
        self.cwd = cwd
        self.depth: int = parent.depth + 1 if parent is not None else 0
        self.locals: dict[str, Any] = {"prompt": tool.prompt}
        if nonlocals is None:
            nonlocals = parent.nonlocals if parent is not None else {}
        self.nonlocals: dict[str, Any] = nonlocals
        self._values = values  # the merged metadata, shared with the plan: copied into ``meta`` when read
        self._meta: dict[str, Any] | None = None
        self.chain: Sequence[Entry] = chain  # a list, or () for a leaf: inject() makes a new one either way
        self.pos = 0
        self.finished = False
        self.body_ran = False
        self.body: Callable[[Context], Awaitable[Any] | Any] | None = None
        self.phases = phases
        self.locked = locked
        self._env = env
        self._trust: dict[str, bool] | None = None
        self.running = 0  # next() calls of this chain in flight (the runner's concurrency guard)
        self.resolved = resolved  # the pipelines of the chain's entries, compiled with it (pipeline.Children)

    def settle(self, values: Mapping[str, Any], locked: frozenset[str]) -> None:
        """Give the context its merged metadata once its templates rendered (the engine's, before the chain runs).

        ``values`` stays shared with the plan: ``ctx.meta`` copies it when first read.
        """
        self._values = values
        self.locked = locked

    @property
    def target(self) -> Context:
        """The context this chain entry serves; the context itself when it is not an entry."""
        target = self._target
        return self if target is None else target

    @target.setter
    def target(self, value: Context) -> None:
        self._target = None if value is self else value

    @property
    def manager(self) -> BoundManager:
        """The manager's operations bound to this context (``await ctx.manager.next()``)."""
        bound: BoundManager = _new(BoundManager)  # BoundManager(self) without a Python __init__ frame
        bound._ctx = self
        return bound

    @property
    def run(self) -> Run:
        """The run this invocation belongs to (id, history, usage, state) and its own origin and tool."""
        run = self._run
        if run is None:
            run = self._run = Run(self.shared, self.tool)
        return run

    @property
    def meta(self) -> dict[str, Any]:
        """The merged metadata of this invocation: its own copy, which middleware may change."""
        meta = self._meta
        if meta is None:
            meta = self._meta = dict(self._values)
        return meta

    @meta.setter
    def meta(self, value: dict[str, Any]) -> None:
        self._meta = value

    @property
    def trust(self) -> dict[str, bool]:
        """What the tool may do: ``env`` (environment variables in templates), ``files`` (folders outside its own)."""
        trust = self._trust
        if trust is None:
            trust = self._trust = {"env": self._env, "files": self.tool.trusted}
        return trust

    @trust.setter
    def trust(self, value: dict[str, bool]) -> None:
        self._trust = value

    def __repr__(self) -> str:
        return f"<Context {self.tool.name} depth={self.depth} pos={self.pos}/{len(self.chain)}>"


class EntryContext(Context):
    """A chain entry's context (``Pipeline.bind`` makes it): ``target``, never the context itself, is a plain slot.

    A slot is read without the Python call a property costs, once per
    middleware that reads ``ctx.target``; a tool's own context keeps the
    property (it would refer to itself).
    """

    __slots__ = ("target",)


def too_deep(manager: Manager, name: Any, parent: Context | None, deep: bool, limit: int) -> InvocationError:
    """The typed error for an invocation past ``max_depth`` or past ``limit`` nested levels (R-INV-5)."""
    what = f"invocation depth limit ({manager.max_depth})" if deep else f"nested invocation limit ({limit})"
    who = parent.tool.name if parent is not None else str(name)
    return InvocationError(f"{what} reached invoking {str(name)!r}; does {who!r} recurse?", tool=who)


def bind(
    pipeline: Pipeline,
    args: Any,
    options: Mapping[str, Any] | None = None,
    parent: Context | None = None,
    target: Context | None = None,
    height: int = 0,
    where: Place | None = None,
    guard: Guard | None = None,
) -> Context:
    """``Pipeline.bind``: the context of one call of ``pipeline``, the only way a call's Context is made.

    ``options`` are the call's (``options.extract_options``; None: none).
    An independent call runs ``where`` a ``binding.Place`` says (default:
    under ``parent``). With ``target`` it is an entry of ``target``'s chain
    (``parent`` is ``target``): an entry whose tool already runs in this
    pipeline binds to ``chain.SKIPPED`` (a cycle); ``height`` is its count
    against ``max_stack`` (``chain.frames``). ``guard``: the untrusted
    caller and the override keys it sent. A template-free entry (the hot
    path) is built here, every slot set directly; the rest is
    ``Pipeline.bind_call`` (``orchestrator.binding``).

    Raises:
        InvocationError: an entry past ``max_depth`` or ``max_stack``; an independent call with no parent or place.
        OrchestratorError: a bad seed, override or extra middleware; a failing template; an ``$order`` cycle.
    """
    if target is None:
        merged = pipeline.plan.static
        if where is None or merged is None or (options and (options["context"] or options["overrides"])):
            return pipeline.bind_call(args, options, parent, None, where, guard)
        if options and options["middleware"] is not None:
            return pipeline.bind_call(args, options, parent, None, where, guard)
        return _fresh(pipeline, args, where, merged)  # the common call: nothing depends on args
    tool = pipeline.tool
    ancestor: Context | None = target
    while ancestor is not None:
        if ancestor.tool.uri == tool.uri:
            return _skipped(tool.name, target.tool.name)
        if not ancestor.entry:
            break
        ancestor = ancestor.parent
    manager = target.owner
    if target.depth >= manager.max_depth or height >= manager.max_stack:
        raise too_deep(manager, tool.name, target, target.depth >= manager.max_depth, manager.max_stack)
    plan = pipeline.plan
    merged = plan.static
    if merged is None:  # templated metadata: rendered for this call
        return pipeline.bind_call(args, None, target, target, None, None)
    target.shared.history.extend((tool.name, args, _now()))  # a record: three items (Shared)
    runs = pipeline.runs  # a leaf (no entry with work) shares the empty tuple: inject() builds a new list
    ctx: Context = _new(EntryContext)
    ctx.owner = manager
    ctx.tool = tool
    ctx.args = args
    ctx.shared = target.shared
    ctx._run = None
    ctx.parent = target
    ctx._target = target
    ctx.target = target
    ctx.entry = True
    ctx.envelope = target.envelope
    ctx.paths = target.paths
    ctx.cwd = target.cwd
    ctx.depth = target.depth + 1
    ctx.locals = {"prompt": tool.prompt}
    ctx.nonlocals = target.nonlocals
    ctx._values = merged.values
    ctx._meta = None
    ctx.chain = list(runs) if runs else ()
    ctx.pos = 0
    ctx.finished = False
    ctx.body_ran = False
    ctx.body = None
    ctx.phases = plan.phases
    ctx.locked = merged.locked
    ctx._env = plan.env
    ctx._trust = None
    ctx.running = 0
    ctx.resolved = pipeline.children if runs else None
    return ctx


def _skipped(name: str, running: str) -> Context:
    """``chain.SKIPPED``, logged: the entry ``name`` of ``running``'s chain already runs in this pipeline."""
    log.warning("skipping middleware %r in the chain of %r: it is already running in this pipeline", name, running)
    return chain.SKIPPED  # type: ignore[no-any-return]


def _fresh(pipeline: Pipeline, args: Any, where: Place, merged: Merged) -> Context:
    """An independent call's context around its compiled chain (no seed, overrides, extra middleware or templates).

    The context ``Context(...)`` builds, with every slot set directly (as ``bind`` does for an entry).
    """
    tool, plan, parent = pipeline.tool, pipeline.plan, where.parent
    where.shared.history.extend((tool.name, args, _now()))
    ctx: Context = _new(Context)
    ctx.owner = where.owner
    ctx.tool = tool
    ctx.args = args
    ctx.shared = where.shared
    ctx._run = None
    ctx.parent = parent
    ctx._target = where.target
    ctx.entry = where.target is not None
    envelope = where.envelope
    ctx.envelope = envelope if envelope is not None else {}
    ctx.paths = where.paths
    ctx.cwd = where.cwd
    ctx.depth = parent.depth + 1 if parent is not None else 0
    ctx.locals = {"prompt": tool.prompt}
    ctx.nonlocals = parent.nonlocals if parent is not None else {}
    ctx._values = merged.values
    ctx._meta = None
    ctx.chain = list(pipeline.runs)
    ctx.pos = 0
    ctx.finished = False
    ctx.body_ran = False
    ctx.body = None
    ctx.phases = plan.phases
    ctx.locked = merged.locked
    ctx._env = plan.env
    ctx._trust = None
    ctx.running = 0
    ctx.resolved = pipeline.children
    return ctx


_new = object.__new__
_now = time.time


class BoundManager:
    """``ctx.manager``: the manager's operations bound to one context."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def invoke(self, ref: str, args: Any = None, **options: Any) -> Any:
        """Invoke ``ref`` as an independent pipeline with this context as parent (never a cycle skip).

        ``options`` are those of ``Manager.invoke``: ``context``, ``middleware``,
        ``overrides``, ``timeout``, ``caller``.
        """
        ctx = self._ctx
        return await ctx.owner.invoke(ref, args, parent=ctx, **options)

    async def invoke_entry(self, ref: str, args: Any = None) -> Any:
        """Invoke ``ref`` as an entry of this context's chain would run: parent and target this context.

        Unlike ``invoke``, a tool already running in this pipeline is skipped
        as an invocation cycle (R-CHAIN-10): the call then returns
        ``chain.SKIPPED`` and logs a warning. ``args`` are data, never
        options. The ``directives`` middleware runs a directive's tool so.

        Raises:
            InvocationError: past ``max_depth`` or ``max_stack``.
        """
        ctx = self._ctx
        return await ctx.owner.invoke_entry(ctx, Entry(ref, args))

    def next(self) -> Awaitable[Any]:
        """Run the next entry of this context's chain; resolves to ``locals['result']`` (R-CHAIN-6/7)."""
        return chain.advance(self._ctx)

    def execute(self) -> Awaitable[Any]:
        """Run this context's body once, storing its value as the result without finishing (R-CHAIN-8)."""
        return chain.execute(self._ctx)

    def finish(self, value: Any = None) -> None:
        """Set the result (unless ``value`` is None) and finish the chain."""
        chain.finish(self._ctx, value)

    def inject(self, entries: Sequence[Entry | Mapping[str, Any]]) -> None:
        """Insert entries right after the current position (R-CHAIN-9)."""
        chain.inject(self._ctx, entries)

    def folder(self, path: str | Path, key: str) -> Path:
        """Resolve ``path`` against the tool's folder, as ``cwd`` and ``paths`` do.

        Raises:
            ConfigurationError: not a folder.
            SecurityError: outside the tool's search path while ``trust.files`` is off.
        """
        ctx = self._ctx
        tool = ctx.tool
        base = tool.path.parent if tool.path else ctx.cwd
        try:
            folder = (base / path).resolve()
            found = folder.is_dir()
        except (OSError, ValueError, TypeError):  # too long, NUL, not encodable, not a path at all
            found = False
        if not found:
            raise ConfigurationError(f"{key}: {str(path)[:200]!r} is not a folder", tool=tool.name, key=key)
        if not ctx.trust.get("files") and tool.root is not None and not folder.is_relative_to(tool.root):
            raise SecurityError(
                f"{key}: {str(folder)!r} is outside the tool's search path and trust.files is off",
                tool=tool.name,
                key=key,
            )
        return folder

    def checkpoint(self) -> chain.Checkpoint:
        """Remember where this context's chain is, for ``rewind`` (retry and fallback middleware)."""
        return chain.Checkpoint(self._ctx)

    def rewind(self, checkpoint: chain.Checkpoint) -> None:
        """Go back to ``checkpoint``: the next ``next()`` runs the rest of the chain (and the body) again."""
        chain.rewind(self._ctx, checkpoint)

    @property
    def events(self) -> Events:
        """The manager's listeners: true when someone listens (build an event only then); ``emit(event)``."""
        return self._ctx.owner.events

    @property
    def limits(self) -> Limits:
        """The manager's ``Limits``: what templates, files and sync code may cost."""
        return self._ctx.owner.limits

    @property
    def executor(self) -> Any:
        """The program's default executor (``Manager(executor=...)``), or None: ``delegate: {}`` runs units there."""
        return self._ctx.owner.executor

    def search_path(self, folder: str | Path) -> SearchPath:
        """A search path for ``folder``, trusted only when the program marked it so."""
        return self._ctx.owner.search_path(folder)

    def find_tool(self, ref: str) -> Tool:
        """Resolve ``ref`` against this context's search paths."""
        ctx = self._ctx
        return ctx.owner.registry.find(ref, ctx.paths, ctx.shared.checked)


def ctx_target(ctx: Context) -> Context:
    """The context a middleware serves: ``ctx.target`` (itself when not a chain entry)."""
    return ctx.target
