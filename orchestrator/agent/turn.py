"""One turn's tool calls: the calls past ``max-tool-calls``, the batch hook, and what ``required`` returns.

A turn's state is a plain dict (what a suspension saves): the model's
``calls``, the ``runs`` after the batch hook, the finished ``outcomes`` and
the ``held`` call. The agent loop runs the calls; these functions shape them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ..approval import Decision, deciding
from ..errors import InvocationError

if TYPE_CHECKING:
    from ..context import Context

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
    calls: list[dict[str, Any]], outcomes: list[tuple[bool, Any, str]], is_next: Callable[[Mapping[str, Any]], bool]
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
