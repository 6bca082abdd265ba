"""The runner: next, execute, finish, inject (R-CHAIN-6..9).

State lives on the Context: ``pos`` (the next entry), ``finished`` and
``body_ran``. Each ``next()`` runs exactly one entry; the entry continues the
descent by calling ``next()`` itself, so the call stack is the onion and
returns, exceptions and ``finally`` blocks travel through real awaits.

A second ``next()`` after the chain finished (or from an entry that already
called it) returns ``locals['result']`` at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from .ordering import Entry, entry_from_spec, sort_entries, strip

if TYPE_CHECKING:
    from .context import Context


def _awaitable(value: Any) -> bool:
    """inspect.isawaitable without its slow ABC check for the common plain values."""
    return type(value) is CoroutineType or (value is not None and hasattr(type(value), "__await__"))


SKIPPED: Any = type("Skipped", (), {"__repr__": lambda self: "SKIPPED"})()
"""Returned by an entry invocation that was skipped as an invocation cycle."""


async def advance(ctx: Context) -> Any:
    """Run ctx's next entry, or its body at the bottom; resolve to its result."""
    while not ctx.finished:
        if ctx.pos >= len(ctx.chain):
            if not ctx.body_ran:
                await execute(ctx)
            break
        entry = ctx.chain[ctx.pos]
        ctx.pos += 1
        if entry.fn is not None:
            value = entry.fn(ctx, entry.args)
            if _awaitable(value):
                value = await value
        else:
            value = await ctx._manager._invoke_entry(ctx, entry)
            if value is SKIPPED:
                continue
        if value is not None:
            ctx.locals["result"] = value
            ctx.finished = True
        break
    return ctx.locals.get("result")


async def execute(ctx: Context) -> Any:
    """Run ctx's body at most once; a non-None value becomes the result, the chain stays open."""
    if not ctx.body_ran:
        ctx.body_ran = True
        body = ctx.body if ctx.body is not None else ctx._manager._body
        value = body(ctx)
        if _awaitable(value):
            value = await value
        if value is not None:
            ctx.locals["result"] = value
    return ctx.locals.get("result")


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
    ran = {e.name for e in ctx.chain[: ctx.pos]}
    fresh = [strip(e if isinstance(e, Entry) else entry_from_spec(None, e, "inject"), ran) for e in entries]
    waiting = ctx.chain[ctx.pos :]
    if any(e.constrained for e in fresh):
        rest = sort_entries([*fresh, *(strip(e, ran) for e in waiting)], ctx.phases, ctx.tool.name)
    else:
        rest = [*fresh, *waiting]
    ctx.chain = [*ctx.chain[: ctx.pos], *rest]


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
