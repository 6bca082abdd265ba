"""The runner: next, execute, finish, inject (R-CHAIN-6..9).

State lives on the Context: ``pos`` (the next entry), ``finished``,
``body_ran`` and ``running``. Each ``next()`` runs exactly one entry; the
entry continues the descent by calling ``next()`` itself, so the call stack
is the onion and returns, exceptions and ``finally`` blocks travel through
real awaits.

A second ``next()`` after the chain finished (or from an entry that already
called it) returns ``locals['result']`` at once.

**One next() at a time.** In-flight ``next()`` calls on one context are
nested: entry k continues the chain from inside the ``next()`` that ran it.
A ``next()`` from a task that is not the innermost one on that context (two
tasks of one entry racing, or a model calling ``next`` twice in one turn)
raises ``InvocationError``. Each task remembers, in a ContextVar, the level
it reached on each context it is running; ``ctx.running`` counts the levels
in flight, so a nested call sees its own level equal to the count. A context
with an empty chain (a leaf, like every built-in middleware) has no entry to
race and a body that runs once: its ``next()`` skips the guard.

**Sync code never blocks the event loop.** A sync body (a python tool's or
registered function's ``main(ctx)``, a sync ``ctx.body``) and a sync ``fn``
entry run in a worker thread; async ones, the built-in middleware among
them, run on the loop. Whether a function is async is read from its code
on every call: no cache keeps a per-call closure alive. A sync function that
returns an awaitable has it awaited on the loop, once. Contextvars are
copied into the thread. Each manager has ``limits.threads`` thread slots per
event loop; a call waits for a free one.

When the caller is cancelled (``$timeout``, ``--max-timeout``, a cancelled
task group) while sync code runs, the caller stops waiting at once and gets
``InvocationTimeout`` / its cancellation on time. Python cannot stop a
thread (CPython's ``PyThreadState_SetAsyncExc`` can raise in one, but taking
back an exception not yet raised leaves 3.11's interpreter re-entering its
pending-work check for good: a hang under a profiler or coverage), so it runs
to its end in the background, its result (or error) is dropped, and it keeps
its thread slot until it really ends. Such **stuck** threads are bounded:
once ``limits.stuck_threads`` of a manager's (at most ``limits.threads``) are
stuck on a loop, a new sync call fails at once with ``InvocationError``
naming the stuck tools, instead of queueing behind them; async code and
markdown prompts run on. CPU-bound code that may not return belongs in a
worker process that can be killed: ``delegate: {engine: process}``
(``orchestrator.processes``).

**Mistakes are named.** A value is awaited at most once: a body or entry
whose value is still awaitable after that (``return target.manager.next()``
without ``await``) fails with ``InvocationError`` naming it, its file and the
call to await, and the coroutine is closed (no "never awaited" warning).
When a chain ends with entries that had work, or the body, not run, the
entry that ended it is reported as a ``chain.stopped`` event, built only when
someone listens.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from types import CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .errors import InvocationError
from .events import Event
from .ordering import Entry, entry_from_spec, sort_entries, strip

if TYPE_CHECKING:
    from .context import Context
    from .manager import Manager

log = logging.getLogger("orchestrator")


def _awaitable(value: Any) -> bool:
    """inspect.isawaitable without its slow ABC check for the common plain values."""
    return type(value) is CoroutineType or (value is not None and hasattr(type(value), "__await__"))


# The values results usually are: never awaitable, told apart with one set lookup (``_awaitable`` on a str
# looks ``__await__`` up on its type, which raises and catches an AttributeError).
_PLAIN = frozenset({str, dict, list, int, float, bool, tuple, bytes})


SKIPPED: Any = type("Skipped", (), {"__repr__": lambda self: "SKIPPED"})()
"""Returned by an entry invocation that was skipped as an invocation cycle."""

# The runner's frames in this task, innermost first, as a linked list ``(ctx, level, outer, stack, inner)``:
# ``ctx``'s next() runs at ``level`` (``ctx`` None: the mark of an independent invocation, Manager._invoke). A task
# sees its own frames and those of the task that started it, never a sibling's.
#
# A frame also counts the nested invocations of the task against ``max_stack`` (R-INV-5), as code at ``ctx``'s
# own level sees them (its body, an ``fn`` entry). Code inside one of ``ctx``'s entries sees one more: of
# ``inner`` when ``ctx`` is itself an entry (the built-ins of a middleware), else of ``stack``. So a chain of N
# default-authority middleware takes N levels of each, not 2N of one, and an entry costs no ContextVar write of
# its own: one frame per next() holds it all.
Frame = tuple["Context | None", int, Any, int, int]
frames: ContextVar[Frame | None] = ContextVar("toolcascade_frames", default=None)


def heights(ctx: Context | None, frame: Frame | None = None) -> tuple[int, int]:
    """(stack, inner): the nested invocations of this task as code running for ``ctx`` sees them.

    ``frame`` is the innermost frame when the caller already read it.
    """
    if frame is None:
        frame = frames.get()
        if frame is None:
            return 0, 0
    owner = frame[0]
    if owner is None or owner is ctx:
        return frame[3], frame[4]
    if owner.entry:
        return frame[3], frame[4] + 1
    return frame[3] + 1, frame[4]


async def advance(ctx: Context) -> Any:
    """Run ctx's next entry, or its body at the bottom; resolve to its result.

    Raises:
        InvocationError: a next() of this chain is in flight in another task.
    """
    if not ctx.chain:  # a leaf (every built-in middleware): only its body, which runs once anyway
        if not ctx.finished and not ctx.body_ran:
            await run_body(ctx)
        return ctx.locals.get("result")
    level = ctx.running
    outer = frames.get()
    if outer is None:
        frame: Frame = (ctx, level + 1, None, 0, 0)
    elif (owner := outer[0]) is None:  # the mark of an independent invocation
        frame = (ctx, level + 1, outer, outer[3], outer[4])
    elif owner.entry:  # called from inside an entry of ``owner`` (ctx's own, for the next level)
        frame = (ctx, level + 1, outer, outer[3], outer[4] + 1)
    else:
        frame = (ctx, level + 1, outer, outer[3] + 1, outer[4])
    if level and (outer is None or owner is not ctx or outer[1] != level):  # not a nested next() from its own entry
        refuse_overlap(ctx, level, outer)
    ctx.running = level + 1
    frames.set(frame)
    try:
        while not ctx.finished:
            chain, pos = ctx.chain, ctx.pos
            if pos >= len(chain):
                if not ctx.body_ran:  # the bottom: the body runs here (R-CHAIN-8)
                    await run_body(ctx)
                break
            entry = chain[pos]
            ctx.pos = pos + 1
            if entry.when is not None and not entry.when(ctx, entry.args):
                continue  # the entry's tool has no work for this target: no invocation (R-CHAIN-12)
            if (fn := entry.fn) is not None:
                value = fn(ctx, entry.args) if _is_async(fn) else await _in_thread(ctx, fn, ctx, entry.args)
                if _awaitable(value):
                    value = await value
            else:  # the entry's pipeline (compiled ahead with this chain, else looked up) binds its context
                ahead, paths = ctx.resolved, ctx.paths
                if ahead is not None and (ahead.paths is paths or ahead.paths == paths):
                    pipeline = ahead.pipelines.get(entry.name) or ctx.owner.catalog.pipeline(
                        entry.name, paths, ctx.shared.checked
                    )
                else:
                    pipeline = ctx.owner.catalog.pipeline(entry.name, paths, ctx.shared.checked)
                child = pipeline.bind(entry.args, None, ctx, ctx, frame[4] if ctx.entry else frame[3])  # see frames
                if child is SKIPPED:
                    continue
                events = child.owner.events  # its lists, not its __bool__: a Python call per entry
                if child.chain or events.listeners or events.streams or child.shared.tracer is not None:
                    value = await child.owner.run(child)  # its chain, observed or traced
                else:  # a leaf: its body is all its pipeline runs, awaited here (one coroutine per entry)
                    if (main := pipeline.main) is not None:  # body(child) of an async main, inlined
                        child.body_ran = True
                        value = await main(child)
                    else:
                        value = body(child)
                        if _awaitable(value):
                            value = await value
                    if value is None:
                        value = child.locals.get("result")
                    else:
                        child.locals["result"] = value
            if value is not None:
                if type(value) not in _PLAIN and _awaitable(value):
                    raise unawaited(value, ctx, entry) if entry.fn is not None else unawaited(value, child, None)
                ctx.locals["result"] = value
                ctx.finished = True
                if level:  # a nested next(): nothing left to tell (the finally below still runs)
                    return value
            break
    finally:
        ctx.running = level
        frames.set(outer)  # not reset(token): no token stays alive per level for the collector to walk
    if not level and (not ctx.body_ran or ctx.pos < len(ctx.chain)) and ctx.pos:
        stopped(ctx)  # the outermost next() of this chain returns: an entry ended it early
    return ctx.locals.get("result")


async def run_body(ctx: Context) -> None:
    """Run ctx's body (once), awaiting what it returns once; a value stays the result.

    Raises:
        InvocationError: the value is still awaitable (an ``await`` was forgotten).
    """
    value = body(ctx)
    if _awaitable(value):
        value = await value
    if value is not None:
        if type(value) not in _PLAIN and _awaitable(value):
            raise unawaited(value, ctx, None)
        ctx.locals["result"] = value


def refuse_overlap(ctx: Context, level: int, outer: Frame | None) -> None:
    """Refuse a ``next()`` of ctx's chain while another is in flight, unless it comes from inside that one.

    Raises:
        InvocationError: the running ``next()`` is in another task.
    """
    frame = outer
    while frame is not None and frame[0] is not ctx:
        frame = frame[2]
    if frame is None or frame[1] != level:
        name = ctx.tool.name
        raise InvocationError(
            f"next() is already running for {name!r}: an entry may continue the chain once at a time", tool=name
        )


async def execute(ctx: Context) -> Any:
    """Run ctx's body at most once; a non-None value becomes the result, the chain stays open.

    The body is ``ctx.body`` when a middleware set one, else the tool's
    ``main(ctx)``, else (markdown) the rendered prompt, which stays on the loop
    bounded by the render limits.
    """
    if not ctx.body_ran:
        await run_body(ctx)
    return ctx.locals.get("result")


def body(ctx: Context) -> Any:
    """Start ctx's body (marking it run): its value, or an awaitable of it the caller awaits once.

    An async body is called on the loop; a sync one runs in a worker thread
    (an awaitable it returns is awaited on the loop, inside that awaitable);
    a markdown prompt renders here. Callers check ``ctx.body_ran`` first.
    """
    ctx.body_ran = True
    fn = ctx.body if ctx.body is not None else ctx.tool.fn
    if fn is None:
        from .prompt import render_prompt  # prompt imports this module

        return render_prompt(ctx)
    return fn(ctx) if _is_async(fn) else _sync_body(ctx, fn)


async def _sync_body(ctx: Context, fn: Callable[..., Any]) -> Any:
    value = await _in_thread(ctx, fn, ctx)
    if _awaitable(value):
        value = await value
    return value


def finish(ctx: Context, value: Any = None) -> None:
    """Set the result (a None value keeps the current one) and finish the chain."""
    if value is not None:
        ctx.locals["result"] = value
    ctx.finished = True


def inject(ctx: Context, entries: Sequence[Entry | Mapping[str, Any]]) -> None:
    """Insert entries right after the current position; they only run downstream.

    Constraints naming entries that already ran are stripped. When an
    injected entry has constraints left, the part of the chain not yet run is
    sorted again with it; otherwise the entries go in as given.

    Raises:
        ConfigurationError: a malformed spec; OrderCycleError on a cycle.
    """
    fresh = [e if isinstance(e, Entry) else entry_from_spec(None, e, "inject") for e in entries]
    position = ctx.pos
    ran: set[str] = set()
    if any(e.before or e.after for e in fresh):
        ran = {e.name for e in ctx.chain[:position]}
        fresh = [strip(e, ran) for e in fresh]
    if any(e.before or e.after for e in fresh):
        waiting = [strip(e, ran) for e in ctx.chain[position:]]
        ctx.chain = [*ctx.chain[:position], *sort_entries([*fresh, *waiting], ctx.phases, ctx.tool.name)]
    else:  # unconstrained (a prompt's directives): in as given; a new list (a leaf's chain is a shared tuple)
        chain = ctx.chain
        ctx.chain = [*chain[:position], *fresh, *chain[position:]]


class Checkpoint:
    """The runner state of a context at one moment, to run the rest of its chain again."""

    __slots__ = ("pos", "chain", "finished", "body_ran", "result", "has_result")

    def __init__(self, ctx: Context) -> None:
        self.pos = ctx.pos
        self.chain = list(ctx.chain)
        self.finished = ctx.finished
        self.body_ran = ctx.body_ran
        self.has_result = "result" in ctx.locals
        self.result = ctx.locals.get("result")


def rewind(ctx: Context, checkpoint: Checkpoint) -> None:
    """Put ctx's runner back where ``checkpoint`` was taken (a retry runs the rest of the chain again)."""
    ctx.pos = checkpoint.pos
    ctx.chain = list(checkpoint.chain)
    ctx.finished = checkpoint.finished
    ctx.body_ran = checkpoint.body_ran
    if checkpoint.has_result:
        ctx.locals["result"] = checkpoint.result
    else:
        ctx.locals.pop("result", None)


# -- sync code in worker threads ---------------------------------------------

# Whether a function is async is read from its code on every call, never cached: a cache keyed by the
# function kept every per-call closure (a middleware setting ``ctx.body``) and all it captured alive, and
# two attribute reads cost less than its lookup. Since 3.12 a sync function may be marked as async.
_CO_COROUTINE = inspect.CO_COROUTINE
_MARKS = hasattr(inspect, "markcoroutinefunction")


def _decide(fn: Callable[..., Any]) -> bool:
    """True when calling ``fn`` only builds a coroutine: a coroutine function or an object with an async __call__."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _is_async(fn: Callable[..., Any]) -> bool:
    """``_decide``, read from the code flags of a function or method (the hot path) without inspect."""
    try:
        flags: int = fn.__code__.co_flags  # type: ignore[attr-defined]
    except AttributeError:  # a partial, an object with __call__: inspect decides
        return _decide(fn)
    return bool(flags & _CO_COROUTINE) or (_MARKS and _decide(fn))


# -- mistakes, named -----------------------------------------------------------


def unawaited(value: Any, ctx: Context, entry: Entry | None) -> InvocationError:
    """The error for an awaitable returned where a value belongs: ``entry`` of ctx's chain, else ctx's body.

    Closes a coroutine, so no "never awaited" warning follows the error.
    """
    if entry is not None:
        fn: Any = entry.fn
        who, name = f"entry {entry.name!r} of {ctx.tool.name!r}", entry.name
    else:
        fn = ctx.body if ctx.body is not None else ctx.tool.fn
        name = ctx.tool.name
        who = f"middleware {name!r} (serving {ctx.target.tool.name!r})" if ctx.entry else f"the body of {name!r}"
    code = getattr(fn, "__code__", None)
    path: Any = None
    line = None
    if code is not None:
        path = ctx.tool.path if fn is ctx.tool.fn and ctx.tool.path is not None else code.co_filename
        line = code.co_firstlineno
    elif ctx.tool.path is not None:
        path = ctx.tool.path
    if isinstance(value, (CoroutineType, GeneratorType)):
        call = _spelling(value, ctx)
        value.close()
        detail = f"{who} returned a coroutine it never awaited: did you forget `await` before `{call}`?"
    else:
        detail = f"{who} returned an awaitable {type(value).__name__} instead of its value: did you forget `await`?"
    return InvocationError(detail, tool=name, path=path, line=line)


def _spelling(coroutine: CoroutineType[Any, Any, Any] | GeneratorType[Any, Any, Any], ctx: Context) -> str:
    """How the code handed ``ctx`` spells the call that made ``coroutine``: ``ctx.target.manager.next()``, ``fetch(...)``."""
    if type(coroutine) is not CoroutineType:
        return f"{coroutine.__name__}(...)"
    runner = {advance.__code__: "next()", execute.__code__: "execute()"}.get(coroutine.cr_code)
    if runner is None:
        if coroutine.__qualname__ == "BoundManager.invoke":
            return "ctx.manager.invoke(...)"
        return f"{coroutine.__name__}(...)"
    frame = coroutine.cr_frame
    on = frame.f_locals.get("ctx") if frame is not None else None
    if on is ctx:
        return f"ctx.manager.{runner}"
    if on is not None and on is ctx.target:
        return f"ctx.target.manager.{runner}"
    return f"manager.{runner}"


def stopped(ctx: Context) -> None:
    """Tell the listeners which entry ended ctx's chain before the rest of it (or the body) ran.

    Called once the outermost ``next()`` of a chain returns with entries not run or the body not run: the
    entry before ``ctx.pos`` is the last one started, and the descent went no further than it. Builds
    nothing when nobody listens.
    """
    events = ctx.manager.events
    if events:
        skipped = _waiting(ctx)
        if skipped or not ctx.body_ran:  # else only entries with no work were left: nothing was cut short
            data = {"entry": ctx.chain[ctx.pos - 1].name, "skipped": skipped, "body_ran": ctx.body_ran}
            events.emit(Event("chain.stopped", ctx.tool.name, ctx.depth, ctx.run.id, None, data))


def _waiting(ctx: Context) -> list[str]:
    """The entries after ``ctx.pos`` that had work to do (R-CHAIN-12), each asked as the runner would ask it."""
    chain, stop = ctx.chain, ctx.pos
    names = []
    try:
        for index in range(stop, len(chain)):
            entry = chain[index]
            ctx.pos = index + 1  # right after taking it, where a ``next`` condition looks on from
            if entry.when is None or entry.when(ctx, entry.args):
                names.append(entry.name)
    finally:
        ctx.pos = stop
    return names


_PENDING, _RUNNING, _ABANDONED, _DONE = range(4)


class _Threads:
    """One manager's worker-thread slots on one event loop (an anyio CapacityLimiter belongs to one loop)."""

    __slots__ = ("slots", "passage", "loop", "stuck", "stuck_limit")

    def __init__(self, count: int, stuck: int, loop: Any) -> None:
        # ``slots`` is the bound: a slot is held until the thread really ends.
        # anyio gives its own limiter back as soon as the caller is cancelled
        # (on asyncio), so it is only ``passage``: as wide as ``slots``, it
        # never blocks and keeps these calls off the loop's shared default one.
        self.slots = anyio.CapacityLimiter(count)
        self.passage = anyio.CapacityLimiter(count)
        self.loop = weakref.ref(loop)  # weak: the loop keys the cache holding this
        self.stuck: set[_Slot] = set()  # abandoned and still running; only the loop changes it
        self.stuck_limit = min(stuck, count)

    def refusal(self, name: str) -> InvocationError:
        """The error for a new sync call of ``name`` while ``stuck_limit`` threads are stuck."""
        tools = ", ".join(repr(tool) for tool in sorted({slot.name for slot in self.stuck}))
        return InvocationError(
            f"every worker thread sync code may keep is stuck: {len(self.stuck)} sync calls of {tools} run on "
            "after their callers stopped waiting; sync calls are refused until one ends (async tools and prompts "
            "still run). Make those tools return, run them in worker processes (delegate: {engine: process}), "
            "or restart the process",
            tool=name,
        )

    def release_soon(self, slot: _Slot) -> None:
        """From a worker thread: give ``slot`` back on the loop (nothing to give once the loop has ended)."""
        loop = self.loop()
        if loop is None:
            return
        # An asyncio loop (call_soon_threadsafe) or a trio token (run_sync_soon), told apart without asyncio.
        soon = getattr(loop, "call_soon_threadsafe", None) or loop.run_sync_soon
        try:
            soon(self.release, slot)
        except RuntimeError:  # the asyncio loop closed, or the trio run finished (RunFinishedError)
            pass

    def release(self, slot: _Slot) -> None:
        """On the loop: ``slot``'s thread has ended."""
        self.stuck.discard(slot)
        self.slots.release_on_behalf_of(slot)


class _Slot:
    """One sync call's claim on a thread slot, from before its thread starts until that thread ends."""

    __slots__ = ("threads", "name", "state", "lock")

    def __init__(self, threads: _Threads, name: str) -> None:
        self.threads = threads
        self.name = name
        self.state = _PENDING
        self.lock = threading.Lock()  # the loop and the worker thread both move ``state``

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any]:
        """In the worker thread: ``(fn(*args),)`` unless the caller already gave up.

        The value travels boxed: trio refuses a thread function that returns a
        coroutine, and a sync entry may return ``ctx.manager.next()``.
        """
        with self.lock:
            if self.state != _PENDING:
                return (None,)
            self.state = _RUNNING
        value: Any = None
        error: BaseException | None = None
        try:
            value = fn(*args)
            return (value,)
        except BaseException as exc:
            error = exc
            raise
        finally:
            with self.lock:
                abandoned = self.state == _ABANDONED
                self.state = _DONE
            if abandoned:  # the caller stopped waiting: nobody sees the outcome, so this thread frees the slot
                if error is not None:
                    log.debug("%s: sync code failed after its caller stopped waiting", self.name, exc_info=error)
                elif type(value) is CoroutineType:
                    value.close()  # nobody will await it
                self.threads.release_soon(self)

    def leave(self) -> None:
        """On the loop, once the caller stops waiting: free the slot, or leave that to a thread still running.

        A thread still running is stuck until it ends, which then frees the slot.
        """
        with self.lock:
            if self.state == _RUNNING:
                self.state = _ABANDONED
                self.threads.stuck.add(self)
                return
            self.state = _DONE  # finished, or never started: run() will not call fn now
        self.threads.slots.release_on_behalf_of(self)


_POOLS: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Manager, _Threads]] = weakref.WeakKeyDictionary()


def _current_loop() -> Any:
    """The running event loop: the asyncio loop, or trio's token for the run."""
    asyncio = sys.modules.get("asyncio")  # never imported: no asyncio loop can be running
    if asyncio is not None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            pass
    import trio  # only reached while trio runs this code

    return trio.lowlevel.current_trio_token()


def _threads(manager: Manager) -> _Threads:
    """``manager``'s thread slots on the running loop, made on first use."""
    loop = _current_loop()
    pools = _POOLS.get(loop)
    if pools is None:
        pools = _POOLS[loop] = weakref.WeakKeyDictionary()
    threads = pools.get(manager)
    if threads is None:
        threads = pools[manager] = _Threads(manager.limits.threads, manager.limits.stuck_threads, loop)
    return threads


async def _in_thread(ctx: Context, fn: Callable[..., Any], *args: Any) -> Any:
    """Call sync ``fn(*args)`` in one of the manager's worker threads, keeping the loop free.

    Raises:
        InvocationError: ``limits.stuck_threads`` of the manager's threads on this loop are stuck.
        BaseException: whatever ``fn`` raises; the caller's cancellation at once (the thread runs on, stuck).
    """
    threads = _threads(ctx.owner)
    if len(threads.stuck) >= threads.stuck_limit:
        raise threads.refusal(ctx.tool.name)
    slot = _Slot(threads, ctx.tool.name)
    await threads.slots.acquire_on_behalf_of(slot)
    try:
        box = await anyio.to_thread.run_sync(slot.run, fn, args, abandon_on_cancel=True, limiter=threads.passage)
    finally:
        slot.leave()
    return box[0]
