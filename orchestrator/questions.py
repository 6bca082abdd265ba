"""Questions to the caller: a middleware asks for input and waits for the answer (the C# framework's WaitForResponse).

``await ask_caller(ctx, question, schema)`` sends an input request
(``{kind: "input", tool, agent, run, question, schema}``) to the first
responder of:

1. ``answering(responder)``: the callback a program wraps around its calls
   (``with answering(fn): await manager.invoke(...)``);
2. the approver of the request being served, when it answers questions
   (a ``respond`` method): the terminal of ``toolcascade run`` and ``chat``,
   the MCP client's user through an elicitation form in ``toolcascade serve``;
3. ``manager.approver``, when it has a ``respond`` method;

and returns the answer, checked against ``schema`` when one is given.
Approval (``orchestrator.approval``) is this channel's yes/no question about
a held call: this module holds what the two share (who is asked while a
request is served, ``asking``; requests as plain JSON; the decisions and
answers a resumed run carries, ``Ledger``), and the responders above are the
approvers approval already has.

With nobody to ask (a program with no ``answering``, ``batch``, ``run``
off a terminal, a 2026-era MCP session), the question holds the run as a
call waiting for approval does: ``ask_caller`` raises ``ApprovalRequired``
with the question's request, the run is saved and its caller gets
``Interrupted`` (an MCP client, an ``input_required`` result with the
question's form), and ``manager.resume(token, answer)`` continues it
(``orchestrator.interrupts``). The answer is bound to the question it was
given for (its tool, question and schema, ``called``): the replayed run's
``ask_caller`` takes it, checked against the schema; a question that changed
holds the run again.

A responder is a callable taking the request (plain JSON) and returning the
answer (any JSON value). An ``async def`` one is awaited; a plain one runs in
a worker thread, so a person typing never blocks the event loop. Every
question is an ``input.request`` event and every answer an ``input.answer``.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from .errors import AnswerValidationError, ApprovalRequired, InvocationError, describe
from .schema import check

if TYPE_CHECKING:
    from .context import Context

Responder = Callable[[dict[str, Any]], Any]
MAX_SHOWN = 4000  # characters of a schema a terminal prompt shows
INPUT = "input"  # the kind of a question's request
ANSWER = "answer"  # the one field of a question's form when its schema is not an object of fields

_answering: contextvars.ContextVar[Responder | None] = contextvars.ContextVar("toolcascade_answering", default=None)
# The approver of the request being served (the CLI's terminal, the MCP client), if any.
_asking: contextvars.ContextVar[Responder | None] = contextvars.ContextVar("toolcascade_asking", default=None)


def plain(value: Any) -> Any:
    """``value`` as plain JSON (a request is stored and sent as JSON); what JSON cannot hold becomes text."""
    return json.loads(json.dumps(value, default=repr, ensure_ascii=False))


def canonical(args: Any) -> str:
    """``args`` as canonical text: sorted-keys JSON of its plain values (what binds a decision to a call)."""
    return json.dumps(plain(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def called(request: Mapping[str, Any]) -> dict[str, Any]:
    """What binds a decision to its request: the kind, tool and args; a question's text and schema too."""
    found = {"kind": request.get("kind"), "tool": request.get("tool"), "args": request.get("args")}
    if request.get("kind") == INPUT:
        found["question"], found["schema"] = request.get("question"), request.get("schema")
    return found


def same_call(asked: Mapping[str, Any], held: Mapping[str, Any]) -> bool:
    """True when ``held`` is the call (or question) ``asked`` was about: the same ``called`` binding."""
    return canonical(called(asked)) == canonical(called(held))


def for_question(entry: Any) -> bool:
    """Whether a ledger entry (an ``approval.Decision``) answers a question rather than decides a call."""
    request = entry.request
    return bool(entry.action == ANSWER or (request is not None and request.get("kind") == INPUT))


class Ledger:
    """The decisions and answers a resumed run carries (``approval.Decision``), each for one request, each used once.

    A decision decides calls only, an answer answers questions only, whatever
    they are bound to (``for_question``).
    """

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries
        self.used = [False] * len(entries)

    def take(self, request: Mapping[str, Any] | None, *, question: bool = False) -> Any | None:
        """The first unused entry for ``request`` (an unbound one fits any), once; None when there is none."""
        for index, entry in enumerate(self.entries):
            if self.used[index] or for_question(entry) != question:
                continue
            if request is None or not entry.request or same_call(entry.request, request):
                self.used[index] = True
                return entry
        return None

    def unmatched(self, *, question: bool = False) -> Mapping[str, Any] | None:
        """The request of the last bound entry nothing has taken (the call or question it was for changed)."""
        left = [
            e.request
            for e, used in zip(self.entries, self.used, strict=True)
            if not used and e.request and for_question(e) == question
        ]
        return left[-1] if left else None

    def taken(self) -> list[dict[str, Any]]:
        """The bound entries taken, as JSON: a run replayed from its start meets their requests again."""
        return [
            {"request": called(e.request), "decision": e.to_json()}
            for e, used in zip(self.entries, self.used, strict=True)
            if used and e.request is not None
        ]


# The decisions and answers a resumed run carries (approval.deciding sets it); each taken once.
_decided: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar("toolcascade_decided", default=None)


@contextmanager
def settled(entries: list[Any]) -> Iterator[None]:
    """Run the block with ``entries`` (decisions, answers) waiting for the calls and questions they are for."""
    token = _decided.set(Ledger(entries))
    try:
        yield
    finally:
        _decided.reset(token)


def ledger() -> Ledger | None:
    """The ledger ``settled`` set for this run, or None."""
    return _decided.get()


def name(approver: Any) -> str:
    """How errors and events name an approver or responder: its label, qualified name, or its class's."""
    found = getattr(approver, "__qualname__", None) or type(approver).__qualname__
    return str(getattr(approver, "label", None) or found)


@contextmanager
def asking(approver: Responder | None) -> Iterator[None]:
    """Run the block with ``approver`` deciding held calls before ``manager.approver`` (None: nobody here).

    Its ``respond`` method, if it has one, answers questions too.
    """
    token = _asking.set(approver)
    try:
        yield
    finally:
        _asking.reset(token)


def current_approver() -> Responder | None:
    """The approver of the request being served (``asking``), or None."""
    return _asking.get()


@contextmanager
def answering(responder: Responder) -> Iterator[None]:
    """Run the block with ``responder`` answering every question its calls ask (before any approver)."""
    token = _answering.set(responder)
    try:
        yield
    finally:
        _answering.reset(token)


def responder_for(ctx: Context) -> Responder | None:
    """Who answers the questions of ctx's run: ``answering``'s callback, else an approver's ``respond``, else None."""
    found = _answering.get()
    if found is not None:
        return found
    for approver in (current_approver(), ctx.owner.approver):
        respond = getattr(approver, "respond", None)
        if callable(respond):
            return respond  # type: ignore[no-any-return]
    return None


async def ask_caller(ctx: Context, question: str, schema: Mapping[str, Any] | None = None) -> Any:
    """Ask the caller of ctx's run ``question`` and wait for the answer; ``schema`` (JSON Schema) checks it.

    For a middleware: ``ctx`` is its own context; the request names the tool
    it wraps (``ctx.target``) and the agent that called that tool. A resumed
    run's answer to this very question is used first; with nobody to ask,
    the run holds (see the module docstring).

    Raises:
        ApprovalRequired: nobody can be asked now: the run suspends (its caller gets ``Interrupted``).
        InvocationError: the responder failed or declined, or the resumed run's caller declined.
        AnswerValidationError: the answer does not match ``schema``.
    """
    target = ctx.target
    tool = target.tool.name
    parent = target.parent
    request = {
        "kind": INPUT,
        "tool": tool,
        "agent": parent.tool.name if parent is not None else None,
        "run": ctx.run.id,
        "question": str(question),
        "schema": plain(schema) if schema is not None else None,
    }
    manager = ctx.owner
    carried = _decided.get()
    given = carried.take(request, question=True) if carried is not None else None
    if given is not None:
        if given.action != ANSWER:
            why = f": {given.reason}" if given.reason else ""
            raise InvocationError(f"the caller declined to answer {question!r}{why}", tool=tool, key="input")
        answer, by = given.answer, "resumed run"
    else:
        responder = responder_for(ctx)
        if responder is None:
            raise held(request, carried)
        by = name(getattr(responder, "__self__", responder))
        manager.emit("input.request", target, request=request, by=by)
        answer = await _call(responder, request, by, tool)
    if schema is not None:
        check(schema, answer, AnswerValidationError, tool, key="input")
    manager.emit("input.answer", target, answer=plain(answer), by=by)
    return answer


def held(request: dict[str, Any], carried: Ledger | None) -> ApprovalRequired:
    """What a question nobody can answer now raises: the run suspends until ``resume`` brings the answer.

    A resumed run's answer for another question (it changed) is named in the
    request (``changed``), and the entries the replay took (``decided``) go
    with it, for the next replay.
    """
    was = carried.unmatched(question=True) if carried is not None else None
    if was is not None:
        request["changed"] = {"tool": was.get("tool"), "question": was.get("question"), "schema": was.get("schema")}
    if carried is not None and carried.taken():
        request["decided"] = carried.taken()  # interrupts.suspend keeps these for the replay
    why = " (it changed since the last answer, which was not used)" if was is not None else ""
    tool = request["tool"]
    return ApprovalRequired(
        f"{tool!r} asks its caller {request['question']!r}{why} and nobody can answer now; resume the run with the "
        "answer (or answer in process: wrap the call in orchestrator.questions.answering(callback))",
        request=request,
        tool=tool,
        key="input",
    )


def form(request: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The form that asks a question, and whether its one ``answer`` field wraps the question's schema.

    An object schema with fields is the form itself; any other answer is the
    form's one ``answer`` field (an MCP elicitation, ``toolcascade resume --edit``).
    """
    schema = request.get("schema")
    if isinstance(schema, Mapping) and schema.get("type") == "object" and schema.get("properties"):
        return dict(schema), False
    field = dict(schema) if isinstance(schema, Mapping) else {"type": "string"}
    field.setdefault("title", "Answer")
    return {"type": "object", "properties": {ANSWER: field}, "required": [ANSWER]}, True


def unform(request: Mapping[str, Any], content: Mapping[str, Any]) -> Any:
    """The answer a filled form (``form``) gives: its fields, or its ``answer`` field."""
    return content.get(ANSWER) if form(request)[1] else dict(content)


async def _call(responder: Responder, request: dict[str, Any], by: str, tool: str) -> Any:
    """The responder's answer: awaited when async, from a worker thread when not."""
    try:
        if inspect.iscoroutinefunction(responder) or inspect.iscoroutinefunction(type(responder).__call__):
            return await responder(request)
        answer = await anyio.to_thread.run_sync(responder, request, abandon_on_cancel=True)
        return await answer if inspect.isawaitable(answer) else answer
    except InvocationError:
        raise
    except Exception as exc:
        raise InvocationError(f"{by} failed to answer ({describe(exc)})", tool=tool, key="input") from exc


def answer_on_terminal(request: Mapping[str, Any], read: TextIO, out: TextIO) -> Any:
    """The answer typed to a question: one line; JSON when the question's schema asks for more than text.

    An answer that fails the schema is asked again, saying why.

    Raises:
        InvocationError: end of input (Ctrl-D): there is no answer.
    """
    schema = request.get("schema")
    text_only = schema is None or (isinstance(schema, Mapping) and schema.get("type") == "string")
    agent = f", called by {request['agent']}" if request.get("agent") else ""
    out.write(f"\nquestion ({request.get('tool')}{agent}): {request.get('question')}\n")
    if not text_only:
        out.write(f"  answer as JSON matching: {json.dumps(schema, ensure_ascii=False)[:MAX_SHOWN]}\n")
    while True:
        out.write("> ")
        out.flush()
        line = read.readline()
        if line == "":
            out.write("\n(no answer)\n")
            raise InvocationError("no answer from the terminal", tool=request.get("tool"), key="input")
        answer: Any = line.strip()
        if not text_only:
            try:
                answer = json.loads(answer)
            except json.JSONDecodeError:
                pass  # plain text: the schema says whether it will do
        if schema is None:
            return answer
        try:
            check(schema, answer, AnswerValidationError, request.get("tool"), key="input")
        except AnswerValidationError as exc:
            out.write(f"{exc.detail}\n")
            continue
        return answer
