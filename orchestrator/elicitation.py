"""Approval and questions over MCP: the forms that ask a client's user, and what their answers decide.

Handshake-era sessions are asked during the call (``Elicitor``); on the
2026-07-28 protocol a held call returns an ``input_required`` result
(``held``) whose ``request_state`` is the resume token. A middleware's
question (``orchestrator.questions``) is asked with a form (``questions.form``:
its schema's fields, or one ``answer`` field): during the call
(``Elicitor.respond``) in the handshake era; on the 2026-07-28 protocol the
question holds the run and ``held`` sends its form, and the client's retry
carries the filled form (``read_answer`` keeps it as the decision's
``filled``), which ``resume`` reads as the answer. A client that cannot be
asked (``Refusal``) makes the question an error the agent hears.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .approval import Decision
from .errors import InvocationError
from .questions import ANSWER as ANSWER
from .questions import INPUT, form

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext

    Context = ServerRequestContext[dict[str, Any], Any]

ASKS = 3  # elicitations per held call before a still-unreadable answer denies it
APPROVAL = "approval"  # the key of the elicitation in an input_required result (a held call's or question's)


def question(request: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The message and form schema that ask a client's user about a held call (or batch)."""
    tool = request.get("tool")
    who = f" (asked by {request['agent']})" if request.get("agent") else ""
    lines = [f"Approve the call of {tool}{who}?"]
    if request.get("kind") == "batch":
        lines = [f"Approve this batch of calls{who}?"]
        for call in request.get("calls") or []:
            lines.append(f"- {call.get('tool')} {json.dumps(call.get('arguments'), ensure_ascii=False)}")
    elif request.get("args") is not None:
        lines.append(f"Arguments: {json.dumps(request.get('args'), ensure_ascii=False)}")
    if request.get("description"):
        lines.append(f"What it does: {request['description']}")
    if request.get("reason"):
        lines.append(f"Why it asks: {request['reason']}")
    changed = request.get("changed")
    if isinstance(changed, Mapping):
        before = json.dumps(changed.get("args"), ensure_ascii=False)
        lines.append(f"The call changed since you were last asked, which was about: {changed.get('tool')} {before}")
    if request.get("problem"):
        lines.append(f"Your last answer could not be used: {request['problem']}")
    properties: dict[str, Any] = {
        "approve": {"type": "boolean", "title": "Approve", "description": "Run the call"},
        "reason": {"type": "string", "title": "Reason", "description": "Why not (the caller is told)"},
    }
    if request.get("kind") != "batch":
        properties["args"] = {
            "type": "string",
            "title": "Arguments",
            "description": "Edited arguments as a JSON object; leave empty to keep them",
        }
    return "\n".join(lines), {"type": "object", "properties": properties, "required": ["approve"]}


def read_answer(answer: Any, *, batch: bool) -> tuple[Decision, str | None]:
    """The decision an elicitation answer gives, or (deny, problem) when its edited arguments are unusable.

    Decline, cancel or no answer deny; ``approve: false`` denies with the reason given.
    An accepted form's content is the decision's ``filled``: the answer when
    the held request was a question (``resume`` reads it; a call never does).
    """
    if answer is None or getattr(answer, "action", None) != "accept":
        why = getattr(answer, "action", None) or "no answer"
        return Decision("deny", reason=f"the MCP client's user did not approve ({why})"), None
    content = dict(getattr(answer, "content", None) or {})
    if content.get("approve") is not True:
        reason = content.get("reason")
        denied = Decision("deny", reason=str(reason) if reason else "the MCP client's user denied it", filled=content)
        return denied, None
    text = content.get("args")
    if batch or not isinstance(text, str) or not text.strip():
        return Decision("approve", filled=content), None
    try:
        edited = json.loads(text)
    except json.JSONDecodeError as exc:
        return Decision("deny"), f"the arguments are not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(edited, dict):
        return Decision("deny"), "the arguments must be a JSON object"
    return Decision("edit", args=edited), None


class Refusal:
    """The approver of a call whose MCP client cannot be asked: denies each held call, naming it and who called it.

    The reason names the held tool (``weather``) and, for a tool an agent
    called, the agent (``weather_approval``): never the agent in the tool's place.
    """

    label = "the MCP server"

    def __init__(self, why: str) -> None:
        self.why = why

    async def __call__(self, request: dict[str, Any]) -> Decision:
        return Decision("deny", reason=refusal(request, self.why))

    async def respond(self, request: dict[str, Any]) -> Any:
        """A question cannot be answered either: an error the agent (or the caller) hears.

        Raises:
            InvocationError: always, saying why.
        """
        raise InvocationError(
            f"{request.get('tool')!r} asks its caller {request.get('question')!r}"[:300]
            + f", and this MCP client cannot answer: {self.why}",
            tool=request.get("tool"),
            key="input",
        )


def refusal(request: Mapping[str, Any], why: str) -> str:
    """Why a held call (or batch) is denied: what is held, who called it, and ``why`` nobody can approve it."""
    if request.get("kind") == "batch":
        tools = ", ".join(repr(call.get("tool")) for call in request.get("calls") or [])
        what = f"the calls of {tools} need"
    else:
        what = f"tool {request.get('tool')!r} needs"
    agent = request.get("agent")
    by = f" (called by agent {agent!r})" if agent else ""
    return f"{what} approval{by}, and this MCP client cannot give it: {why}"


class Elicitor:
    """The approver of one handshake-era MCP call: asks the client's user with an ``elicitation/create`` form.

    ``respond`` asks a middleware's question the same way (``orchestrator.questions``).
    """

    label = "the MCP client"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def respond(self, request: dict[str, Any]) -> Any:
        """The client's user's answer to a question.

        Raises:
            InvocationError: the user declined or cancelled.
        """
        schema, wrapped = form(request)
        message = str(request.get("question"))
        answer = await self.ctx.session.elicit_form(message, schema, related_request_id=self.ctx.request_id)
        if getattr(answer, "action", None) != "accept":
            why = getattr(answer, "action", None) or "no answer"
            raise InvocationError(
                f"the MCP client's user did not answer ({why}): {message}"[:300], tool=request.get("tool"), key="input"
            )
        content = dict(getattr(answer, "content", None) or {})
        return content.get(ANSWER) if wrapped else content

    async def __call__(self, request: dict[str, Any]) -> Decision:
        asked = dict(request)
        for _ in range(ASKS):
            message, schema = question(asked)
            answer = await self.ctx.session.elicit_form(message, schema, related_request_id=self.ctx.request_id)
            decision, problem = read_answer(answer, batch=request.get("kind") == "batch")
            if problem is None:
                return decision
            asked["problem"] = problem
        return Decision("deny", reason=f"the MCP client's user gave unusable arguments {ASKS} times")


def held(token: str, request: Mapping[str, Any]) -> types.InputRequiredResult:
    """The 2026-era answer to a held call or question: an elicitation to fulfil, and the token to retry with."""
    import mcp.types as types

    message, schema = asked(request) if request.get("kind") == INPUT else question(request)
    ask = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    return types.InputRequiredResult(input_requests={APPROVAL: ask}, request_state=token)


def asked(request: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The message and form that ask a held question (``questions.form``); a changed question says so."""
    lines = [str(request.get("question"))]
    if request.get("problem"):
        lines.append(f"The last answer was not valid ({request['problem']}); please answer again.")
    changed = request.get("changed")
    if isinstance(changed, Mapping):
        lines.append(f"The question changed since it was last answered; it was: {changed.get('question')}")
    return "\n".join(lines), form(request)[0]
