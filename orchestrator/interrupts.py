"""Interrupt and resume: a run that waits for a decision is saved, and continues later, anywhere.

When a call raises ``ApprovalRequired`` (the ``approval`` middleware with no
approver to ask), the run suspends instead of failing:

- in the top-level agent's loop, the turn's other calls finish first; then
  the agent's state (the conversation, the turn's calls and finished
  results, the held call, the iteration) travels up as a ``Suspension``;
- ``Manager.invoke`` (the top-level call) hands it to ``suspend``, which
  saves ``{kind, ref, args, options, request, agent state, run state}`` in the session
  store under a new unguessable token and returns the ``Interrupted`` to
  raise. A held call that is not in an agent's turn (a top-level tool, a
  tool called by a python tool) saves ``kind: invoke``: the call itself.

``resume(manager, token, decision)`` takes the state (read and deleted in
one transaction: a token resumes once, even when two processes race) and
invokes the same ref with the same args and options again, its
``ctx.run.state`` (call counts, a breaker's memory) starting from the saved
one, so holding a call never resets a limit:

- ``invoke``: the whole call runs again inside ``approval.deciding(decision)``,
  so the approval middleware uses the decision for the call it was made for;
- ``agent``: the loop continues from the saved messages (the model is not
  asked again for the held turn): finished results are reused, and only the
  held call runs inside ``deciding``; the turn's other held calls ask again
  (and may suspend the run again, with a new token).

A decision is bound to the request the person saw (``request`` in the
state: kind, tool, args, reason, description): it applies only to a held
call with the same kind, tool and canonical args (``approval.same_call``).
When the replayed run holds a different call (its input changed: a file, a
clock, a model's answer), that call is held again: a new token, and an
``Interrupted`` saying the call changed; the dangerous call never runs on a
decision made about another. A run replayed from its start meets the calls
decided before again: the state keeps those decisions (``decided``), each
bound to its call and used once per replay, so a run that holds several
calls moves forward one decision at a time.

A nested agent (one a model or a python tool called) does not save a state
of its own: the turn of the agent above it holds the call, and the resumed
run calls the nested agent again from its start.

A question a middleware asks its caller (``orchestrator.questions``) with
nobody to answer holds the run the same way (its request's kind is
``input``); ``resume`` then takes the answer (``answer_for``): the answer
itself, or a filled form (an MCP client's, ``toolcascade resume --edit``),
checked against the question's schema before the token is used. It is bound
to the question as a decision is to its call.

Only plain JSON can be saved: a run invoked with a ``Tool`` object,
callables or contexts in its options cannot suspend (an ``InvocationError``
says which option).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .approval import Decision, called, deciding, per_call
from .context import carried
from .errors import (
    AnswerValidationError,
    ApprovalRequired,
    ConfigurationError,
    Interrupted,
    InvocationError,
)
from .questions import INPUT, form, unform
from .schema import check
from .tool import Tool

log = logging.getLogger("orchestrator")

if TYPE_CHECKING:
    from .manager import Manager

VERSION = 1
KINDS = ("invoke", "agent")
RESUMING = "resume"
"""``ctx.locals`` key of a resumed run: ``{state, decision}`` (set here only; the agent loop reads it)."""


class Suspension(ApprovalRequired):
    """Raised by a top-level agent's loop when a call is held: the ``ApprovalRequired`` plus the loop's state.

    It never leaves the engine: ``Manager.invoke`` passes it to ``suspend``.
    """

    def __init__(self, cause: ApprovalRequired, state: dict[str, Any]) -> None:
        self.state = state
        super().__init__(cause.detail, request=cause.request, tool=cause.tool, key=cause.key)


async def suspend(
    manager: Manager,
    ref: str | Tool,
    args: Any,
    options: Mapping[str, Any],
    exc: ApprovalRequired,
    run_state: Mapping[str, Any] | None = None,
) -> Interrupted:
    """Save the run ``exc`` held and return the ``Interrupted`` that hands out its token.

    ``run_state`` is the run's ``ctx.run.state`` (call counts, a breaker's
    memory): the resumed run starts from it, so a limit cannot be reset by
    being held. Entries that are not plain JSON are not kept (a warning says
    which).

    Raises:
        InvocationError: the ref, args or options are not plain JSON (a Tool
            object, a callable, a context), or the request is not JSON.
    """
    name = ref.name if isinstance(ref, Tool) else ref
    if isinstance(ref, Tool):
        raise _unsaved(name, "it was invoked with a Tool object; invoke it by its ref") from exc
    saved: dict[str, Any] = {}
    for option, value in options.items():
        if value is None:
            continue
        if option == "context" and isinstance(value, Mapping):
            if {"parent", "target"} & set(value):
                raise _unsaved(name, "its context carries a parent or target context") from exc
            value = _unresumed(value)
        _check_json(name, f"option {option!r}", value, exc)
        saved[option] = value
    _check_json(name, "args", args, exc)
    request = dict(exc.request) if isinstance(exc.request, dict) else {}
    decided = request.pop("decided", [])  # the decisions the replay meets again (approval.decide)
    _check_json(name, "approval request", request, exc)
    _check_json(name, "decisions", decided, exc)
    state: dict[str, Any] = {
        "version": VERSION,
        "kind": "agent" if isinstance(exc, Suspension) else "invoke",
        "ref": ref,
        "args": args,
        "options": saved,
        "request": request,
        "decided": decided,
        "created": time.time(),
    }
    kept: dict[str, Any] = {}
    for key, value in (run_state or {}).items():
        if isinstance(key, str) and _plain(value):
            kept[key] = value
        else:
            log.warning("%s: ctx.run.state[%r] is not plain JSON: the resumed run starts without it", name, key)
    state["run-state"] = kept
    if isinstance(exc, Suspension):
        state["agent"] = exc.state
    from .sessions import new_token

    token = new_token()
    await manager.sessions.suspend(token, state)
    held = request.get("tool") or exc.tool or name
    if request.get("kind") == INPUT:
        example = '{"answer": ...}' if form(request)[1] else "{...its fields}"
        return Interrupted(
            f"{name!r} is waiting for an answer to {request.get('question')!r} (asked by {held!r})"
            f"{_changed(request)}; continue with manager.resume({token!r}, answer) or: toolcascade resume {token} "
            f"--edit '{example}' (or --deny)",
            token=token,
            request=request,
            tool=name,
        )
    return Interrupted(
        f"{name!r} is waiting for a decision on {held!r}{_changed(request)}; continue with "
        f"manager.resume({token!r}, 'approve') or: toolcascade resume {token} --approve (or --deny)",
        token=token,
        request=request,
        tool=name,
    )


def _changed(request: Mapping[str, Any]) -> str:
    """What an ``Interrupted`` says when the held call is not the one the last decision was about."""
    was = request.get("changed")
    if not isinstance(was, Mapping):
        return ""
    if request.get("kind") == INPUT:
        return f": the question changed since it was answered (it was {was.get('question')!r}), so that answer was not used"

    def shown(args: Any) -> str:
        text = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return text if len(text) <= 300 else text[:300] + "..."

    return (
        f": the call changed since the decision was asked for (it was {was.get('tool')} {shown(was.get('args'))}, "
        f"it is now {request.get('tool')} {shown(request.get('args'))}), so that decision was not used"
    )


async def resume(manager: Manager, token: str, decision: Any = "approve", *, ref: str | None = None) -> Any:
    """Continue the run saved under ``token`` with ``decision`` (a held question's: the answer); its result.

    The decision is checked before the token is used, so a bad decision (a
    batch's per-call ones too) does not spend it; nor does a ``ref`` other
    than the one the run was invoked as. The decision is bound to the saved
    request: it applies to that call only (see the module's docstring).

    Raises:
        ConfigurationError: a decision that is not approve, deny or edit, or an edit with ``$`` keys; approve
            for a held question.
        ApproverError: a batch edit whose per-call decisions cannot be read.
        AnswerValidationError: a held question's answer fails its schema (the token is not spent).
        InvocationError: an unknown token, one already used, or a saved state this version cannot read.
        Interrupted: the continued run waits for another decision (a new token).
        OrchestratorError: any error of the continued run.
    """
    try:
        chosen, problem = Decision.of(decision), None
    except ConfigurationError as exc:
        chosen, problem = None, exc  # it may be a question's answer: the saved request says
    if not isinstance(token, str) or not token or len(token) > 200:
        raise InvocationError(f"a resume token is the string Interrupted.token gave, not {str(token)[:40]!r}")
    state = await manager.sessions.take(token)
    if state is None:  # whatever ``decision`` is: an answer to a question may be any value
        raise InvocationError(
            f"no suspended run has the token {token[:12]!r}: it was resumed already, or it comes from another "
            f"session store (this one: {manager.sessions!r})",
            key="token",
        )
    try:
        chosen = _chosen(token, state, decision, chosen, problem, ref)
    except Exception:
        await manager.sessions.suspend(token, state)  # put back: a refused decision or answer does not spend it
        raise
    options = dict(state.get("options") or {})
    run_state = state.get("run-state")
    carrying = carried.set([dict(run_state)] if isinstance(run_state, dict) and run_state else None)
    try:
        if state["kind"] == "invoke":
            with deciding(chosen):
                return await manager.invoke(state["ref"], state.get("args"), **options)
        context = dict(options.pop("context", None) or {})
        resuming = {"state": state["agent"], "decision": chosen}
        context["locals"] = {**(context.get("locals") or {}), RESUMING: resuming}
        return await manager.invoke(state["ref"], state.get("args"), context=context, **options)
    finally:
        carried.reset(carrying)


def _chosen(
    token: str,
    state: dict[str, Any],
    given: Any,
    chosen: Decision | None,
    problem: ConfigurationError | None,
    ref: str | None,
) -> Decision:
    """The decision (or answer) ``given`` for the saved run, bound to its request (on error the state goes back).

    Raises:
        InvocationError: a state this version cannot read, or a run of another tool than ``ref``.
        ConfigurationError: no decision (or, for a question, no answer).
        ApproverError: a batch edit whose per-call decisions cannot be read.
        AnswerValidationError: the answer fails the question's schema.
    """
    if state.get("version") != VERSION or state.get("kind") not in KINDS or not isinstance(state.get("ref"), str):
        raise InvocationError(f"the suspended run {token[:12]!r} was saved by another version of toolcascade")
    if ref is not None and state["ref"] != ref:
        raise InvocationError(
            f"the suspended run {token[:12]!r} is a call of {state['ref']!r}, not of {ref!r}: retry that tool",
            tool=ref,
            key="token",
        )
    request = state.get("request")
    try:
        before = _earlier(state.get("decided") or [])
    except ConfigurationError:
        before = None
    if not isinstance(request, dict) or before is None:
        raise InvocationError(f"the suspended run {token[:12]!r} was saved by another version of toolcascade")
    if request.get("kind") == INPUT:
        chosen = answer_for(request, given)
    elif chosen is None or chosen.action == "answer":
        raise problem or ConfigurationError(
            f"the suspended run {token[:12]!r} waits for a decision on a call (approve, deny or edit), not an answer"
        )
    elif request.get("kind") == "batch":  # a batch edit's per-call decisions are read now, before the token is used
        per_call(chosen, [str(call.get("id")) for call in request.get("calls") or [] if isinstance(call, Mapping)])
    return replace(chosen, request=request, earlier=before)  # it applies to the call the person saw only


def answer_for(request: Mapping[str, Any], given: Any) -> Decision:
    """The answer ``given`` to a held question, checked against its schema.

    ``given`` is the answer itself, or a ``Decision``: a filled form (an MCP
    client's ``filled``, an edit's args: ``--edit``) gives the answer
    (``questions.unform``); deny declines to answer; an answer is one.

    Raises:
        ConfigurationError: approve, which answers nothing.
        AnswerValidationError: the answer fails the question's schema (the run stays held).
    """
    if isinstance(given, Decision):
        if given.action == "answer":
            answer = given.answer
        elif given.filled is not None:
            answer = unform(request, given.filled)
        elif given.action == "edit":
            answer = unform(request, given.args or {})
        elif given.action == "deny":
            return Decision("deny", reason=given.reason)
        else:
            example = '{"answer": ...}' if form(request)[1] else "{...the schema's fields}"
            raise ConfigurationError(
                f"the run waits for an answer to {request.get('question')!r}, which approve does not give: "
                f"resume it with the answer (manager.resume(token, answer), or toolcascade resume TOKEN --answer "
                f"ANSWER, or --edit '{example}')"
            )
    else:
        answer = given
    schema = request.get("schema")
    if schema is not None:
        try:
            check(schema, answer, AnswerValidationError, request.get("tool"), key="input")
        except AnswerValidationError as exc:
            exc.request = dict(request)  # still held: the resumer may ask the same question again
            raise
    return Decision.answered(answer)


def _earlier(decided: Any) -> tuple[Decision, ...]:
    """The decisions a suspended run saved as ``decided`` (``[{request, decision}]``), each bound to its call.

    Raises:
        ConfigurationError: anything else.
    """
    if not isinstance(decided, list):
        raise ConfigurationError(f"decided must be a list, not {type(decided).__name__}")
    found = []
    for entry in decided:
        if not (isinstance(entry, Mapping) and isinstance(entry.get("request"), Mapping)):
            raise ConfigurationError("each decided entry must be {request: {...}, decision: {...}}")
        read = Decision.from_json(entry.get("decision"))
        found.append(replace(read, request=called(entry["request"])))
    return tuple(found)


def _unresumed(context: Mapping[str, Any]) -> dict[str, Any]:
    """A resumed run's context without the state it resumed from (a new suspension saves its own)."""
    seeded = context.get("locals")
    if not isinstance(seeded, Mapping) or RESUMING not in seeded:
        return dict(context)
    rest = {k: v for k, v in seeded.items() if k != RESUMING}
    return {**{k: v for k, v in context.items() if k != "locals"}, **({"locals": rest} if rest else {})}


def _check_json(name: str, what: str, value: Any, exc: ApprovalRequired) -> None:
    """Raise when ``value`` would not come back from the store as it is.

    Raises:
        InvocationError: not plain JSON.
    """
    if not _plain(value):
        raise _unsaved(name, f"its {what} is not plain JSON ({type(value).__name__})") from exc


def _plain(value: Any) -> bool:
    """True when ``value`` comes back from the store as it is (plain JSON)."""
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError):
        return False


def _unsaved(name: str, why: str) -> InvocationError:
    return InvocationError(
        f"{name!r} waits for a decision but cannot be suspended: {why}; pass Manager(approver=...) to decide "
        "in process",
        tool=name,
    )
