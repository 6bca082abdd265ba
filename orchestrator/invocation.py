"""Invocation: an independent call (top-level, or ``ctx.manager.invoke``) from its options to its result.

``call`` (``Manager.invoke``) starts one: ``invoke`` extracts the ``$`` options, checks the depth and stack limits,
binds the context (``orchestrator.binding``) and runs it under the call's
timeout; at the top level a call held for a decision is suspended for
``resume``, and a finished call goes to the manager's run log when it has
one (``orchestrator.runlog``). ``run`` runs a bound context's chain, observed (``invoke.start``
/ ``invoke.end`` events) when someone listens and traced when a tracer is
set. ``run_sync`` is the event loop of the sync wrappers (``invoke_sync``,
``resume_sync``); ``resume`` continues a suspended run. The Manager's
methods of the same names are these functions.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from . import chain, tracing
from .binding import NO_KEYS, bound
from .callers import Caller, check_untrusted
from .context import too_deep
from .errors import ApprovalRequired, InvocationError, InvocationTimeout, name_tool
from .lifecycle import closed, refused
from .options import extract_options
from .tool import Tool

if TYPE_CHECKING:
    from .context import Context
    from .manager import Manager

T = TypeVar("T")
_frames = chain.frames
# Frames of Python stack one nested invocation takes (about 6 measured, with margin); the recursion limit is
# raised to fit ``max_stack`` of them (R-INV-5).
FRAMES_PER_INVOCATION = 8
_TIMED_OUT: Any = object()  # the result of a call its timeout cancelled
_UNTIMED = (0.0, 0.0)  # when a call not recorded began


def fit_recursion(max_stack: int) -> None:
    """Raise the interpreter's recursion limit to fit ``max_stack`` nested invocations of each count (R-INV-5)."""
    limit = 2 * max_stack * FRAMES_PER_INVOCATION + 1000  # the stack and inner counts (chain.frames)
    if sys.getrecursionlimit() < limit:
        sys.setrecursionlimit(limit)


def run_sync(what: str, call: Callable[[], Coroutine[Any, Any, T]], backend: str) -> T:
    """Run ``call()`` in a new event loop: plain asyncio, or anyio's ``backend``.

    Raises:
        InvocationError: called from inside a running event loop.
    """
    try:
        anyio.get_current_task()
    except RuntimeError:
        pass  # no loop running: the normal case
    else:
        raise InvocationError(f"{what}_sync() cannot run inside an event loop; use 'await manager.{what}(...)'")
    if backend == "asyncio":
        import asyncio

        # A plain asyncio loop: anyio works inside it, and its own asyncio backend (with its socket and TLS
        # imports, ~15 ms) loads only when something in the run asks anyio for it (a sync body's thread...).
        return asyncio.run(call())
    return anyio.run(call, backend=backend)


def invoke_sync(
    manager: Manager, ref: str | Tool, args: Any = None, *, backend: str = "asyncio", **options: Any
) -> Any:
    """``invoke`` for plain scripts: runs its own event loop (plain asyncio, or anyio's ``backend``).

    Raises:
        InvocationError: called from inside a running event loop, or the manager is closed.
    """
    return run_sync("invoke", partial(manager.invoke, ref, args, **options), backend)


async def resume(manager: Manager, token: str, decision: Any = "approve", *, ref: str | None = None) -> Any:
    """Continue a run that raised ``Interrupted`` with the decision it waited for.

    ``decision`` is ``"approve"``, ``"deny"`` or an ``orchestrator.approval``
    decision (deny with a reason, edit the arguments). Works in a new
    process on the same session store; the held call runs exactly once.
    ``ref``, when given, is the tool the run must have been invoked as
    (the MCP server passes the tool a retry names); another tool's token
    is refused and stays usable.

    Raises:
        OrchestratorError: unknown or already used token, a token of another tool, or any error of the run.
        InvocationError: the manager is closed (the token is not spent).
    """
    if manager.lifetime.closed:
        raise refused("resume", ref)
    from .interrupts import resume as resumed  # sessions and the approval flow only for programs that resume

    return await resumed(manager, token, decision, ref=ref)


def resume_sync(
    manager: Manager, token: str, decision: Any = "approve", *, ref: str | None = None, backend: str = "asyncio"
) -> Any:
    """``resume`` for plain scripts: runs its own event loop, as ``invoke_sync`` does.

    Raises:
        InvocationError: called from inside a running event loop, or the manager is closed.
        OrchestratorError: the errors of ``resume``.
    """
    return run_sync("resume", partial(manager.resume, token, decision, ref=ref), backend)


def call(
    manager: Manager,
    ref: str | Tool,
    args: Any = None,
    *,
    context: Mapping[str, Any] | None = None,
    middleware: Any = None,
    overrides: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    caller: Caller | None = None,
    parent: Context | None = None,
) -> Coroutine[Any, Any, Any]:
    """``Manager.invoke``: invoke ``ref`` with ``args`` through the full pipeline; await it for the result.

    ``caller`` marks a call made for someone untrusted (an MCP client, a
    model): the ``$`` options in ``args`` then follow ``orchestrator.callers``;
    the explicit options are the program's own. ``parent`` is the context
    the call is made from (``ctx.manager.invoke`` passes its own): the
    call joins that run, its depth and its search paths.

    A plain function returning the coroutine (``await manager.invoke(...)``),
    so an invocation in flight holds one coroutine frame less.

    Raises:
        OrchestratorError: any of the typed errors of SPEC section 7.
        Interrupted: a call needed a decision no approver could give; ``resume`` continues.
        InvocationError: the manager is closed (also the errors of SPEC section 7).
    """
    # A closed manager starts no run (the coroutine raises when awaited); a run going keeps its nested calls.
    if manager.lifetime.closed and parent is None:  # the record, not the property: one call less per invoke
        return closed("invoke", str(ref.name if isinstance(ref, Tool) else ref))
    return invoke(manager, ref, args, parent, context, middleware, overrides, timeout, caller)


async def invoke(
    manager: Manager,
    ref: str | Tool,
    args: Any,
    parent: Context | None,
    context: Mapping[str, Any] | None,
    middleware: Any,
    overrides: Mapping[str, Any] | None,
    timeout: float | None,
    caller: Caller | None,
) -> Any:
    """``call``'s coroutine, the options given in its order: an independent invocation (top-level, or
    ``ctx.manager.invoke``): options, limits, the pipeline.

    Raises:
        OrchestratorError: any typed error; at the top level ``Interrupted`` for a held call.
    """
    depth = parent.depth + 1 if parent is not None else 0
    frame = _frames.get()
    stacked, inner = chain.heights(parent, frame) if frame is not None else (0, 0)
    height = stacked + 1
    if depth > manager.max_depth or height > manager.max_stack:
        name = ref.name if isinstance(ref, Tool) else ref
        raise too_deep(manager, name, parent, depth > manager.max_depth, manager.max_stack)
    token = _frames.set((None, 0, frame, height, inner))  # this invocation's mark (chain.frames)
    recorder = manager.recorder if parent is None else None  # the run log's: it records top-level calls only
    begun = recorder.begin() if recorder is not None else _UNTIMED
    given = args
    ctx: Context | None = None
    try:
        guarded = NO_KEYS
        if caller is not None:
            asked = extract_options(args, ref, None, None, None, None)[1]
            check_untrusted(str(ref.name if isinstance(ref, Tool) else ref), asked, caller)
            sent = asked["overrides"]
            guarded = frozenset(k for k in sent if isinstance(k, str)) if isinstance(sent, Mapping) else guarded
        args, options = extract_options(args, ref, context, middleware, overrides, timeout)
        seconds = options["timeout"]
        if seconds is None:
            ctx = bound(manager, ref, args, parent, options, (caller, guarded))
            if recorder is not None:
                recorder.open(ctx)
            result = await manager.run(ctx, caller)
        else:
            result = _TIMED_OUT
            with anyio.move_on_after(seconds):  # extract_options checked it is a positive number
                ctx = bound(manager, ref, args, parent, options, (caller, guarded))
                if recorder is not None:
                    recorder.open(ctx)
                result = await manager.run(ctx, caller)
            if result is _TIMED_OUT:
                name = str(ref.name if isinstance(ref, Tool) else ref)
                raise InvocationTimeout(f"timed out after {seconds} s", tool=name)
        if recorder is not None:
            recorder.finish(begun, ctx, ref, args, caller, result)
        return result
    except Exception as exc:
        if parent is None:  # once, where the error leaves the engine: which tool's code raised it
            name_tool(exc)
            if isinstance(exc, ApprovalRequired):  # a top-level call held for a decision: save it, hand out a token
                from .interrupts import suspend

                options = {"context": context, "middleware": middleware, "overrides": overrides, "timeout": timeout}
                state = ctx.shared.kept_state if ctx is not None else None
                paused = await suspend(manager, ref, given, options, exc, state)
                if recorder is not None:
                    recorder.finish(begun, ctx, ref, args, caller, error=paused)
                raise paused from exc
            if recorder is not None:
                recorder.finish(begun, ctx, ref, args, caller, error=exc)
        raise
    finally:
        _frames.reset(token)


def run(manager: Manager, ctx: Context, caller: Caller | None = None) -> Awaitable[Any]:
    """Run the chain of ``ctx`` (made by ``Pipeline.bind``); await it for the result.

    Traced when the program set a tracer provider, observed (``invoke.start``
    / ``invoke.end`` events) when someone listens for them (``Events.observed``:
    not a quiet listener, such as the run log's). ``caller`` is the
    untrusted caller the call is made for, if any (a model's calls are
    marked so in traces).
    """
    tracer = ctx.shared.tracer
    if tracer is not None:
        return _traced(manager, ctx, tracer, caller is not None and caller.name == "a model")
    return _observed(manager, ctx) if manager.events.observed else chain.advance(ctx)


async def _traced(manager: Manager, ctx: Context, tracer: Any, model_caller: bool) -> Any:
    with tracing.start(tracer, ctx, model_caller) as span:
        result = await (_observed(manager, ctx) if manager.events.observed else chain.advance(ctx))
        tracing.finish(span, ctx, result)
        return result


async def _observed(manager: Manager, ctx: Context) -> Any:
    """Run ctx's chain between invoke.start and invoke.end events."""
    manager.emit("invoke.start", ctx)
    started = time.perf_counter()
    try:
        result = await chain.advance(ctx)
    except BaseException as exc:
        manager.emit("invoke.end", ctx, error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - started)
        raise
    manager.emit("invoke.end", ctx, error=None, seconds=time.perf_counter() - started)
    return result
