"""Human approval of tool calls: decisions, approvers, and the ``approval`` middleware's work.

A ``Decision`` allows a held call, denies it (the model hears ``reason``),
or edits its arguments (only them: ``$`` keys in an edit are refused).
``deciding(decision)`` hands a decision to the ``approval`` middleware of
the calls run inside it: a resumed run uses it instead of asking again,
once, and only for a call with the kind, tool and canonical args of the
request it is bound to (``same_call``); another call is asked about anew.

The ``approval`` middleware (``tools/approval.py``) asks, in order:

1. the decision a resumed run carries (``take_decision``);
2. the approver of the current request (``with asking(approver):``; the
   command line and the MCP server set one while they serve a call);
3. ``manager.approver``;
4. nobody: it raises ``ApprovalRequired``, which the agent loop or
   ``Manager.invoke`` turns into a suspended run (``Interrupted``).

The same approvers answer a middleware's questions to its caller
(``orchestrator.questions``) through their ``respond`` method: approval is
that channel's yes/no question about a held call.

An approver is a callable taking the request (plain JSON: ``kind``, ``tool``,
``args``, ``reason``, ``agent``, ``run``, and ``calls`` for a batch) and
returning anything ``Decision.of`` reads. An ``async def`` approver is
awaited; a plain one runs in a worker thread, so a human typing at a
terminal never blocks the event loop. An approver that fails or answers
garbage is an ``ApproverError``: a call is never approved by accident.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TextIO

import anyio

from .errors import (
    ApprovalDenied,
    ApprovalRequired,
    ApproverError,
    ArgsValidationError,
    ConfigurationError,
    describe,
)
from .questions import ANSWER, answer_on_terminal, current_approver, ledger, name, plain, settled
from .questions import asking as asking  # re-exported: the command line and the MCP server set it here
from .questions import called as called
from .questions import canonical as canonical
from .questions import same_call as same_call
from .schema import check, fill_defaults, json_schema

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger("orchestrator.approval")

ACTIONS = ("approve", "deny", "edit")
MAX_SHOWN = 4000  # characters of arguments a terminal prompt shows
BATCH = "tool-batch"  # the built-in the agent loop invokes once per turn with every parallel call

Approver = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Decision:
    """What an approver decided about one held call (or one batch of calls).

    ``request`` (set by ``resume``) binds it to the call it was asked about
    (``same_call``); None: the first call held. ``earlier``: the run's
    decisions before it, each bound to its call, that a replay meets again.
    ``answer`` (action ``answer``, made by ``answered`` only): a held
    question's answer (``orchestrator.questions``); it never decides a call.
    ``filled``: the form an MCP client's user filled in, which answers a held
    question (``orchestrator.elicitation``).

    Raises:
        ConfigurationError: an edit whose args carry a ``$`` key.
    """

    action: Literal["approve", "deny", "edit", "answer"]
    args: Mapping[str, Any] | None = None  # edit: the arguments the call runs with instead
    reason: str | None = None  # deny: what the model (or the caller) is told
    request: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    earlier: tuple[Decision, ...] = field(default=(), compare=False, repr=False)
    answer: Any = None
    filled: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.args is not None:
            object.__setattr__(self, "args", dict(self.args))  # the approver's mapping may change later
            if self.action == "edit":
                only_arguments(self.args)

    @classmethod
    def of(cls, value: Any) -> Decision:
        """A decision from ``"approve"``, ``"deny"``, ``True``/``False``, a mapping or a Decision.

        Raises:
            ConfigurationError: anything else, or an edit without a mapping of args.
        """
        if isinstance(value, Decision):
            return value
        if value is True or value is False:
            return cls("approve" if value else "deny")
        if isinstance(value, str) and value in ACTIONS and value != "edit":
            return cls(value)  # type: ignore[arg-type]
        if isinstance(value, Mapping) and value.get("action") in ACTIONS:
            args, reason = value.get("args"), value.get("reason")
            if value["action"] == "edit" and not isinstance(args, Mapping):
                raise ConfigurationError("an edit decision needs args: a mapping of the arguments to run with")
            if reason is not None and not isinstance(reason, str):
                raise ConfigurationError("a decision's reason must be a string")
            return cls(value["action"], dict(args) if isinstance(args, Mapping) else None, reason)
        raise ConfigurationError(
            f"a decision is 'approve', 'deny' or {{action: approve|deny|edit, args: {{...}}, reason: '...'}}, "
            f"not {value!r}"[:300]
        )

    @classmethod
    def answered(cls, answer: Any) -> Decision:
        """A held question's answer (``Decision.of`` never reads one: an approver cannot give it)."""
        return cls(ANSWER, answer=plain(answer))  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, value: Any) -> Decision:
        """A decision or answer as ``to_json`` wrote it.

        Raises:
            ConfigurationError: anything ``Decision.of`` refuses that is no answer either.
        """
        if isinstance(value, Mapping) and value.get("action") == ANSWER:
            return cls.answered(value.get("answer"))
        return cls.of(value)

    def to_json(self) -> dict[str, Any]:
        """The decision as plain JSON (what a session store keeps)."""
        if self.action == ANSWER:
            return {"action": ANSWER, "answer": self.answer}
        return {
            "action": self.action,
            "args": dict(self.args) if self.args is not None else None,
            "reason": self.reason,
        }


def only_arguments(args: Mapping[str, Any]) -> None:
    """Refuse an edit's ``$`` keys: invoke options cannot take effect mid-chain, nor pass on as arguments.

    Raises:
        ConfigurationError: the first ``$`` key, named.
    """
    for key in args:
        if isinstance(key, str) and key.startswith("$"):
            raise ConfigurationError(
                f"an edit decision changes the call's arguments only: {key!r} is an invoke option, not an "
                "argument; remove it from the edited args",
                key=key,
            )


@contextmanager
def deciding(decision: Decision) -> Iterator[None]:
    """Run the block with ``decision`` (and its ``earlier`` ones) waiting for the calls they were made for."""
    with settled([*decision.earlier, decision]):
        yield


def take_decision(request: Mapping[str, Any] | None = None) -> Decision | None:
    """The decision ``deciding`` set for the call ``request`` describes, once (later callers get None).

    Without a request, the next decision left, whatever call it was made for:
    middleware that holds calls should pass the request it asks about.
    """
    carried = ledger()
    return carried.take(request) if carried is not None else None  # type: ignore[no-any-return]


# -- configuration -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    """An ``approval`` metadata value read: who needs approval, and what the approver is told why."""

    tools: frozenset[str] | None  # None: every call the entry sits on
    reason: str | None


def settings(value: Any, target: str) -> Settings | None:
    """``approval: true | false | {reason, tools}`` as Settings; None when approval is off.

    Raises:
        ConfigurationError: any other shape, naming the target tool and the key.
    """
    where: dict[str, Any] = {"tool": target, "key": "approval"}
    if value is None or value is False:
        return None
    if value is True:
        return Settings(None, None)
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"approval must be true, false or {{reason, tools}}, not {value!r}"[:300], **where)
    unknown = sorted(str(k) for k in value if k not in ("reason", "tools"))
    if unknown:
        raise ConfigurationError(f"approval: unknown setting {unknown[0]!r}; known: reason, tools", **where)
    tools, reason = value.get("tools"), value.get("reason")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) and t for t in tools)):
        raise ConfigurationError(f"approval.tools must be a list of tool names, not {tools!r}"[:300], **where)
    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(f"approval.reason must be a string, not {reason!r}"[:300], **where)
    return Settings(frozenset(tools) if tools is not None else None, reason)


# -- holding a call ---------------------------------------------------------------------


async def hold(ctx: Context) -> Any:
    """The ``approval`` middleware's body: decide the target's call (or batch), then continue or refuse.

    Raises:
        ConfigurationError: a malformed ``approval`` value.
        ArgsValidationError: the call's args (or an edit's) fail its ``params``.
        ApprovalDenied: the approver denied the call.
        ApproverError: the approver failed or answered garbage.
        ApprovalRequired: nobody can be asked (the run suspends).
    """
    target = ctx.target
    found = settings(ctx.args, target.tool.name)
    if found is None:
        return await target.manager.next()
    if target.tool.name == BATCH:
        return await _hold_batch(target, found)
    if found.tools is not None and target.tool.name not in found.tools:
        return await target.manager.next()
    params = target.meta.get("params")
    if params is not None:  # a call that would fail anyway is not worth a human's time
        check(params, target.args, ArgsValidationError, target.tool.name)
    request = _request(target, "call", target.tool.name, target.args, found.reason)
    request["description"] = target.tool.description  # what the person is shown about the tool
    if params is not None:
        request["params"] = plain(json_schema(params, "params", target.tool))  # JSON Schema, to check an edit
    decision = await decide(target, request)
    if decision.action == "deny":
        raise _denied(target.tool.name, request, decision.reason)
    if decision.action == "edit":
        edited = fill_defaults(params, dict(decision.args or {})) if params is not None else dict(decision.args or {})
        if params is not None:
            check(params, edited, ArgsValidationError, target.tool.name)
        target.args = edited
    return await target.manager.next()


def _request(target: Context, kind: str, tool: str, args: Any, reason: str | None) -> dict[str, Any]:
    parent = target.parent
    return {
        "kind": kind,
        "tool": tool,
        "args": plain(args),
        "reason": reason,
        "agent": parent.tool.name if parent is not None else None,
        "run": target.run.id,
    }


def _denied(tool: str, request: dict[str, Any], reason: str | None) -> ApprovalDenied:
    why = f": {reason}" if reason else ""
    return ApprovalDenied(
        f"the call was denied by the approver{why}; it did not run, do not retry it unchanged",
        request=request,
        reason=reason,
        tool=tool,
        key="approval",
    )


async def _hold_batch(target: Context, found: Settings) -> Any:
    """One question for every held call of a turn; the result is ``tool-batch``'s list with decisions applied.

    A denied call gets ``denied: reason``; an edited one its new ``arguments``
    (the tool's own ``validate-args`` checks them when the loop runs it).
    An edit decision's ``args`` is ``{"decisions": {call id: decision}}``.
    """
    calls = target.args.get("calls") if isinstance(target.args, Mapping) else None
    if not isinstance(calls, list):
        raise ConfigurationError("tool-batch args must hold calls: a list", tool=BATCH, key="approval")
    held = [
        dict(call)
        for call in calls
        if isinstance(call, Mapping) and (found.tools is None or call.get("tool") in found.tools)
    ]
    if not held:
        return await target.manager.next()
    request = _request(target, "batch", BATCH, {"calls": held}, found.reason)
    request["calls"] = request["args"]["calls"]
    decision = await decide(target, request)
    each = per_call(decision, [str(call.get("id")) for call in held])
    result = await target.manager.next()
    if not isinstance(result, list):
        return result
    decided = []
    for call in result:
        one = each.get(str(call.get("id"))) if isinstance(call, Mapping) else None
        if one is None or one.action == "approve":
            decided.append(call)
        elif one.action == "deny":
            error = _denied(str(call.get("tool")), request, one.reason)
            decided.append({**call, "denied": error.detail})
        else:
            decided.append({**call, "arguments": dict(one.args or {})})
    return decided


def per_call(decision: Decision, ids: list[str]) -> dict[str, Decision]:
    """The decision on each held call of a batch: the batch's own, or, for an edit, one per call id.

    A call an edit decision leaves out is denied: a batch is never approved by omission.

    Raises:
        ApproverError: an edit whose args are not ``{decisions: {id: decision}}`` of readable decisions.
    """
    if decision.action != "edit":
        return dict.fromkeys(ids, decision)
    given = (decision.args or {}).get("decisions")
    if not isinstance(given, Mapping):
        raise ApproverError(
            "a batch edit decision's args must be {decisions: {call id: decision}}",
            approver="the batch decision",
            tool=BATCH,
            key="approval",
        )
    each = {}
    for id in ids:
        try:
            each[id] = Decision.of(given[id]) if id in given else Decision("deny", reason="no decision was given")
        except ConfigurationError as exc:
            raise ApproverError(
                f"the batch decision for call {id!r}: {exc.detail}", approver="the batch decision", tool=BATCH
            ) from exc
    return each


async def decide(target: Context, request: dict[str, Any]) -> Decision:
    """The decision on ``request``: a resumed run's, else the request's approver's, else the manager's.

    Every decision is an ``approval.decision`` event (and a span event when traced).

    Raises:
        ApprovalRequired: no approver can be asked.
        ApproverError: the approver failed or answered garbage.
    """
    manager = target.owner
    carried = ledger()
    decision = carried.take(request) if carried is not None else None
    by = "resumed run"
    if decision is None:
        was = carried.unmatched() if carried is not None else None
        if was is not None:  # a resumed run's decision was for another call: this one is asked about anew
            request["changed"] = {"tool": was.get("tool"), "args": was.get("args")}
        approver = current_approver() or manager.approver
        if approver is None:
            what = "this batch of calls" if request["kind"] == "batch" else f"a call of {request['tool']!r}"
            why = " (the call changed since the decision was asked for, which was not used)" if was else ""
            if carried is not None and carried.taken():
                request["decided"] = carried.taken()  # interrupts.suspend keeps these for the replay
            raise ApprovalRequired(
                f"{what} needs approval{why} and no approver is set; resume the run with a decision",
                request=request,
                tool=request["tool"],
                key="approval",
            )
        by = name(approver)
        manager.emit("approval.request", target, request=request, by=by)
        decision = await ask(approver, request, by, request["tool"])
    if decision.action not in ACTIONS:  # an answer to a question never decides a call
        raise ApproverError(
            f"{by} gave an answer, not a decision; the call did not run", approver=by, tool=request["tool"]
        )
    args = decision.args if decision.action == "edit" else request["args"]
    manager.emit(
        "approval.decision",
        target,
        call=request["tool"],
        action=decision.action,
        reason=decision.reason,
        by=by,
        args=plain(args),
    )
    _trace(request, decision, by)
    if decision.action == "deny":
        log.info("%s denied %s: %s", by, request["tool"], decision.reason or "no reason given")
    return decision


async def ask(approver: Approver, request: dict[str, Any], by: str, tool: str) -> Decision:
    """Ask one approver: awaited when async, in a worker thread when not; its answer read as a Decision.

    Raises:
        ApproverError: it raised, or answered something ``Decision.of`` refuses.
    """
    try:
        if _is_async(approver):
            answer = await approver(request)
        else:
            answer = await anyio.to_thread.run_sync(approver, request, abandon_on_cancel=True)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:
        log.warning("approver %s failed: %s", by, describe(exc))
        raise ApproverError(
            f"the approver {by} failed ({describe(exc)}); the call did not run", approver=by, tool=tool, key="approval"
        ) from exc
    try:
        return Decision.of(answer)
    except ConfigurationError as exc:
        raise ApproverError(
            f"the approver {by} answered {answer!r}"[:200] + f", not a decision ({exc.detail}); the call did not run",
            approver=by,
            tool=tool,
            key="approval",
        ) from exc


def _is_async(approver: Any) -> bool:
    call = type(approver).__call__ if not inspect.isroutine(approver) else None  # an object with async __call__
    return inspect.iscoroutinefunction(approver) or (call is not None and inspect.iscoroutinefunction(call))


def _trace(request: dict[str, Any], decision: Decision, by: str) -> None:
    """A span event on the approval middleware's span, when the program traces (never imports OpenTelemetry)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    span = trace.get_current_span()
    attributes = {"toolcascade.approval.tool": str(request["tool"]), "toolcascade.approval.action": decision.action}
    attributes["toolcascade.approval.by"] = by
    if decision.reason:
        attributes["toolcascade.approval.reason"] = decision.reason
    span.add_event(f"approval.{decision.action}", attributes=attributes)


# -- the terminal ------------------------------------------------------------------------


class Terminal:
    """An approver asking on a terminal: ``y`` approves, ``n`` denies (a reason may follow), ``e`` edits.

    Shows the tool, who asks, why, and the arguments as JSON; ``e`` reads new
    arguments as one line of JSON, checked against the request's ``params``
    (bad input asks again); end of input (Ctrl-D) denies. Questions from
    parallel calls are asked one at a time. ``respond`` answers a
    middleware's question (``orchestrator.questions``) on the same terminal.
    """

    label = "the terminal"

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self.input = input
        self.output = output
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Decision:
        with self._lock:
            return self._ask(request, self.input or sys.stdin, self.output or sys.stderr)

    def respond(self, request: dict[str, Any]) -> Any:
        """The answer typed to a middleware's question (``questions.answer_on_terminal``)."""
        with self._lock:
            return answer_on_terminal(request, self.input or sys.stdin, self.output or sys.stderr)

    def _ask(self, request: dict[str, Any], read: TextIO, out: TextIO) -> Decision:
        def say(text: str) -> None:
            out.write(text)
            out.flush()

        def line(prompt: str) -> str | None:
            say(prompt)
            text = read.readline()
            return None if text == "" else text.strip()

        batch = request.get("kind") == "batch"
        who = f" (asked by {request['agent']})" if request.get("agent") else ""
        say(f"\napproval needed: {'a batch of calls' if batch else request['tool']}{who}\n")
        if request.get("description"):
            say(f"  what it does: {request['description']}\n")
        if request.get("reason"):
            say(f"  why: {request['reason']}\n")
        changed = request.get("changed")
        if isinstance(changed, Mapping):
            before = json.dumps(changed.get("args"), ensure_ascii=False, sort_keys=True)[:MAX_SHOWN]
            say(f"  the call changed since the last question, which was about: {changed.get('tool')} {before}\n")
        calls = request.get("calls") if batch else [{"tool": request["tool"], "arguments": request.get("args")}]
        for call in calls or []:
            shown = json.dumps(call.get("arguments"), ensure_ascii=False, sort_keys=True)
            say(f"  {call.get('tool')} {shown[:MAX_SHOWN]}\n")
        while True:
            answer = line("approve? [y]es / [n]o" + ("" if batch else " / [e]dit") + ": ")
            if answer is None:
                say("\n(no answer: denied)\n")
                return Decision("deny", reason="no answer from the terminal")
            word = answer.lower()
            if word in ("y", "yes"):
                return Decision("approve")
            if word in ("n", "no"):
                why = line("reason (optional): ")
                return Decision("deny", reason=why or None)
            if word in ("e", "edit") and not batch:
                edited = self._edit(request, line, say)
                if edited is not None:
                    return edited
                continue
            say("please answer y, n" + ("" if batch else " or e") + "\n")

    def _edit(
        self, request: dict[str, Any], line: Callable[[str], str | None], say: Callable[[str], None]
    ) -> Decision | None:
        """New arguments read as JSON and checked; None to ask again."""
        text = line("new arguments as JSON: ")
        if text is None:
            return Decision("deny", reason="no answer from the terminal")
        try:
            args = json.loads(text)
        except json.JSONDecodeError as exc:
            say(f"not JSON: {exc.msg} at column {exc.colno}\n")
            return None
        if not isinstance(args, dict):
            say("the arguments must be a JSON object\n")
            return None
        schema = request.get("params")
        if schema is not None:
            try:
                check(schema, fill_defaults(schema, args), ArgsValidationError, request["tool"])
            except ArgsValidationError as exc:
                say(f"{exc.detail}\n")
                return None
        try:
            return Decision("edit", args=args)
        except ConfigurationError as exc:  # a `$` key: options cannot be edited
            say(f"{exc.detail}\n")
            return None


def terminal(input: TextIO | None = None, output: TextIO | None = None) -> Terminal:
    """An approver that asks on the terminal (default: reads stdin, writes stderr); see ``Terminal``."""
    return Terminal(input, output)
