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
request is served, ``asking``; requests as plain JSON), and the responders
above are the approvers approval already has.

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

from .errors import AnswerValidationError, InvocationError, describe
from .schema import check

if TYPE_CHECKING:
    from .context import Context

Responder = Callable[[dict[str, Any]], Any]
MAX_SHOWN = 4000  # characters of a schema a terminal prompt shows

_answering: contextvars.ContextVar[Responder | None] = contextvars.ContextVar("toolcascade_answering", default=None)
# The approver of the request being served (the CLI's terminal, the MCP client), if any.
_asking: contextvars.ContextVar[Responder | None] = contextvars.ContextVar("toolcascade_asking", default=None)


def plain(value: Any) -> Any:
    """``value`` as plain JSON (a request is stored and sent as JSON); what JSON cannot hold becomes text."""
    return json.loads(json.dumps(value, default=repr, ensure_ascii=False))


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
    it wraps (``ctx.target``) and the agent that called that tool.

    Raises:
        InvocationError: nobody can be asked, or the responder failed or declined.
        AnswerValidationError: the answer does not match ``schema``.
    """
    target = ctx.target
    tool = target.tool.name
    parent = target.parent
    request = {
        "kind": "input",
        "tool": tool,
        "agent": parent.tool.name if parent is not None else None,
        "run": ctx.run.id,
        "question": str(question),
        "schema": plain(schema) if schema is not None else None,
    }
    responder = responder_for(ctx)
    if responder is None:
        raise InvocationError(
            f"{tool!r} asks its caller {question!r} and nobody can answer: run it on a terminal, serve it to an MCP "
            "client that supports elicitation, or wrap the call in orchestrator.questions.answering(callback)",
            tool=tool,
            key="input",
        )
    by = name(getattr(responder, "__self__", responder))
    manager = ctx.owner
    manager.emit("input.request", target, request=request, by=by)
    answer = await _call(responder, request, by, tool)
    if schema is not None:
        check(schema, answer, AnswerValidationError, tool, key="input")
    manager.emit("input.answer", target, answer=plain(answer), by=by)
    return answer


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
