"""One turn's tool calls: the calls past ``max-tool-calls``, the batch hook, running them, what ``required`` returns.

A turn's state is a plain dict (what a suspension saves): the model's
``calls``, the ``runs`` after the batch hook, the finished ``outcomes`` and
the ``held`` call. The agent loop asks the model; ``run_turn`` runs the
calls the model made, each through ``run_call``, concurrently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio

from ..approval import Decision, deciding
from ..errors import ApprovalRequired, InvocationError, OrchestratorError, Termination
from ..options import extract_options
from ..tracing import CALL_ID
from .media import result_content
from .toolset import NEXT

Content = str | list[dict[str, Any]]
"""A tool result as the model reads it: text, or text and media parts."""

if TYPE_CHECKING:
    from ..context import Context
    from .loop import Agent

log = logging.getLogger("orchestrator.agent")


def refuse_extra(turn: dict[str, Any], max_calls: int, agent: str) -> None:
    """Give the calls past ``max-tool-calls`` an error result: they are not run (nor shown to the batch hook)."""
    calls = turn["calls"]
    if len(calls) <= max_calls:
        return
    log.warning("%s: the model asked for %d tool calls in one turn", agent, len(calls))
    text = (
        f"error: not run: this turn asked for {len(calls)} tool calls and max-tool-calls is {max_calls}; "
        f"only the first {max_calls} ran: call the others in a later turn"
    )
    for index in range(max_calls, len(calls)):
        turn["outcomes"][index] = [False, None, text]


def runs_of(calls: list[dict[str, Any]], ref: Callable[[Any], str]) -> list[dict[str, Any]]:
    """The turn's calls as the batch hook sees them: ``{id, tool (our ref), arguments}``.

    ``ref`` gives the tool ref behind a name the model used.
    """
    runs = []
    seen: set[str] = set()
    for index, call in enumerate(calls):
        ident = str(call.get("id") or f"call-{index + 1}")
        if ident in seen:
            ident = f"{ident}-{index + 1}"  # ids must tell calls apart for the hook's answer
        seen.add(ident)
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                pass  # the call reports it
        runs.append({"id": ident, "tool": ref(call.get("name")), "arguments": arguments})
    return runs


async def batch(ctx: Context, runs: list[dict[str, Any]], overrides: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The turn's calls through ``tool-batch`` with ``batch-pipeline``: each to run (maybe edited) or denied.

    A call the pipeline leaves out is denied; ``tool`` cannot be changed.

    Raises:
        InvocationError: the pipeline returned something other than a list of calls with the turn's ids.
    """
    result = await ctx.manager.invoke("tool-batch", {"calls": [dict(r) for r in runs]}, overrides=overrides)
    ids = {r["id"] for r in runs}
    if not isinstance(result, list) or not all(isinstance(r, Mapping) and r.get("id") in ids for r in result):
        raise InvocationError(
            "batch-pipeline must return the list of calls it was given ({id, tool, arguments} or "
            f"{{id, denied: reason}}), not {json.dumps(result, default=str)[:200]}",
            tool=ctx.tool.name,
            key="batch-pipeline",
        )
    decided = {r["id"]: r for r in result}
    kept = []
    for run in runs:
        got = decided.get(run["id"])
        if got is None:
            kept.append({**run, "denied": "the batch pipeline dropped this call"})
        elif got.get("denied") is not None and got.get("denied") is not False:
            kept.append({**run, "denied": str(got["denied"])})
        else:
            kept.append({**run, "arguments": got.get("arguments", run["arguments"])})
    return kept


def kept_outcomes(
    calls: list[dict[str, Any]], outcomes: list[tuple[bool, Any, Content]], is_next: Callable[[Mapping[str, Any]], bool]
) -> list[tuple[bool, Any]]:
    """The outcomes ``tool-choice: required`` returns: the wrapped chain's result once, however often it ran.

    Calls of ``next`` in one turn run at once; one continues the chain and
    the others fail (``next()`` is already running) or repeat its result.
    """
    found: list[tuple[bool, Any]] = []
    continued = [(ok, value) for call, (ok, value, _t) in zip(calls, outcomes, strict=True) if is_next(call)]
    done = next((pair for pair in continued if pair[0]), continued[0] if continued else None)
    for call, (ok, value, _text) in zip(calls, outcomes, strict=True):
        if not is_next(call):
            found.append((ok, value))
        elif done is not None:
            found.append(done)
            done = None
    return found


def deciding_on(decision: Decision | None) -> AbstractContextManager[None]:
    """``approval.deciding(decision)``, or nothing when there is no decision to hand on."""
    return deciding(decision) if decision is not None else nullcontext()


async def run_turn(
    agent: Agent, turn: dict[str, Any], iteration: int, decision: Decision | None
) -> list[tuple[bool, Any, Content]]:
    """Run one turn's tool calls: the batch hook, then every call not finished yet; their outcomes in order.

    ``turn`` is the turn's state (what a suspension saves): the model's
    calls, the calls to run after the batch hook (``runs``), the finished
    ``outcomes`` and the ``held`` call. ``decision`` (a resumed run's)
    goes to the held batch or call, once. A call a middleware ended with
    ``Termination`` sets ``ended: {value, by}``: the loop returns ``value``.

    Raises:
        ApprovalRequired: a call (or the batch) waits for a decision; the turn's other calls finished first.
    """
    calls = turn["calls"]
    if turn["runs"] is None:
        refuse_extra(turn, agent.max_calls, agent.ctx.tool.name)
        runs = runs_of(calls[: agent.max_calls], agent.ref)
        if agent.batch_pipeline:
            try:
                with deciding_on(decision if turn["held"] == "batch" else None):
                    runs = await batch(agent.ctx, runs, agent.batch_pipeline)
            except ApprovalRequired as exc:
                turn["held"] = "batch"
                raise agent.suspension(exc, turn) from exc
            if turn["held"] == "batch":
                decision = None  # the batch used it
        turn["runs"] = runs
    runs = turn["runs"]
    outcomes: list[Any] = turn["outcomes"]
    held = turn["held"] if isinstance(turn["held"], int) else None
    todo = [i for i, outcome in enumerate(outcomes) if outcome is None]
    results: dict[int, tuple[bool, Any, Content] | ApprovalRequired | Termination] = {}

    async def one(index: int) -> None:
        with deciding_on(decision if index == held else None):
            results[index] = await run_call(agent, calls[index], runs[index], iteration)

    async with anyio.create_task_group() as group:
        for index in todo:
            group.start_soon(one, index)
    waiting = []
    for index in todo:
        result = results[index]
        if isinstance(result, ApprovalRequired):
            waiting.append((index, result))
        elif isinstance(result, Termination):  # the loop ends after this turn; a resumed turn remembers it
            turn["ended"] = {"value": result.value, "by": index}
            outcomes[index] = [True, result.value, _text(result.value)]
        else:
            outcomes[index] = list(result)
    if waiting:
        turn["held"] = waiting[0][0]
        raise agent.suspension(waiting[0][1], turn) from waiting[0][1]
    return [(bool(o[0]), o[1], o[2]) for o in outcomes]


async def run_call(
    agent: Agent, call: Mapping[str, Any], run: Mapping[str, Any], iteration: int
) -> tuple[bool, Any, Content] | ApprovalRequired | Termination:
    """Run one tool call; every failure becomes an error result for the model, never a crash.

    ``run`` is the call after the batch hook: its ``arguments`` (maybe
    edited) or ``denied``. A call held for a decision returns its
    ``ApprovalRequired``, for the turn to suspend once the others finished;
    a call a middleware ended the loop with returns its ``Termination``.
    """
    ctx = agent.ctx
    manager = agent.manager
    offered = agent.wire.get(call.get("name", ""))
    name = offered["ref"] if offered else str(call.get("name"))
    manager.emit("tool.start", ctx, iteration, call=name, arguments=run.get("arguments"))
    try:
        if run.get("denied") is not None:
            raise PermissionError(f"denied: {run['denied']}")
        if offered is None:
            log.warning("%s: the model called %r, which is not among its allowed tools", ctx.tool.name, name)
            raise PermissionError(f"tool {name!r} is not available to this agent")
        args = run.get("arguments")
        if isinstance(args, str):
            args = json.loads(args or "{}")
        if not isinstance(args, dict):
            raise TypeError("tool arguments must be a JSON object")
        if name == NEXT:
            extract_options(args, name, None, None, None, None)  # refuses unknown $ options
            value = await ctx.target.manager.next()
        else:
            if offered["wrapped"]:
                args = args.get("value")  # params that are not an object schema travel as {value: ...}
            ident = call.get("id")  # the model's id for the call: its execute_tool span names it (tracing)
            seed = {"locals": {CALL_ID: str(ident)}} if ident else None
            value = await ctx.manager.invoke(
                name, args, overrides=agent.tool_pipeline, caller=agent.caller, context=seed
            )
    except ApprovalRequired as exc:
        manager.emit("tool.end", ctx, iteration, call=name, error=None, held=True)
        return exc
    except Termination as exc:
        manager.emit("tool.end", ctx, iteration, call=name, error=None, terminated=True)
        return exc
    except Exception as exc:  # the model hears about any failure; cancellation still propagates
        if not isinstance(exc, (OrchestratorError, PermissionError)):
            log.debug("%s: tool call %r failed", ctx.tool.name, name, exc_info=True)
        text = f"error: {type(exc).__name__}: {exc}"
        manager.emit("tool.end", ctx, iteration, call=name, error=text)
        return False, None, text
    manager.emit("tool.end", ctx, iteration, call=name, error=None)
    return True, value, _text(value)


def _text(value: Any) -> str | list[dict[str, Any]]:
    """A call's value as the tool result the model reads: text, or text and media parts (``media.result_content``)."""
    return result_content(value)
