"""The agent loop (R-AGENT-1, R-AGENT-3): a markdown tool's prompt run by a model with tools.

Three layers of middleware fall out of the pipeline: the agent's own
metadata middleware; every model request is an invocation of the built-in
``model-call`` tool (extend it through ``model-pipeline`` metadata, passed as
its overrides: ``{retry: {attempts: 3}}``); every tool call is an independent
``ctx.manager.invoke`` with that tool's own pipeline, extended for this agent
through ``tool-pipeline`` (its overrides on every call). This module asks
the model; ``turn.py`` runs the calls of each turn.

Structured answers (``returns`` asking for an object) follow the agent's
strategy (``returns.py``: ``native``, ``tool`` or ``prompted``, by provider
or ``returns-strategy``). With ``native``, the JSON response format is sent
only on a turn where the model must answer, because a server that enforces
the format never lets the model call a tool. Without tools that is every
turn. With tools, the model works with its tools; when it answers in text
that is not JSON matching ``returns``, one more turn asks for the answer
alone, in the format (its tools listed but ``tool-choice: none``, as some
APIs want the tools of earlier calls described). An answer that already
matches costs no extra turn. Any answer that still fails ``returns`` goes
back to the model with what is wrong, ``returns-retries`` times (1).

``tool-choice`` is enforced by ``model-call``: ``required`` or a tool's name
with no such call is a ``ModelError``. With ``required`` the result is the
calls' values (one value, or a list in call order; the chain a middleware
agent continues is one value, however often the model calls ``next``); a
failed call goes back to the model like any other.

Conversations: with ``ctx.locals["session"]`` (``$context: {session: ID}``)
the run holds the session's lease (a second run on it waits), loads its
messages after the system message and the ``messages`` metadata (prior
messages, rendered like the prompt) and before the new prompt, and saves the
new messages after every turn. The preamble (system and ``messages``) is
never stored. A ``model-pipeline`` middleware may rewrite the conversation
for good through ``ctx.locals["conversation"]`` of ``model-call`` (see
``Conversation``; the built-in ``compact`` does). A scripted model counts
the session's earlier turns too, so its failure on a continued session says
how many messages the session already held.

Ending the loop: a ``tool-pipeline`` middleware that raises
``Termination(value)`` (``turn.py``; MAF's MiddlewareTermination) ends it
after the turn's calls finish, without another model request: the agent
returns ``value``. A ``model-pipeline`` middleware may store other text in
place of an answer with ``Conversation.rewrite_answer`` (Eino's
AfterModelRewriteState): the loop acts on the response, later requests and
the session see the rewrite. The ``model.request`` event carries the
messages as sent (the list ``model-call`` is given).

Batch hook: with ``batch-pipeline`` metadata, a turn's calls first go through
the built-in ``tool-batch`` tool (``{"calls": [{id, tool, arguments}]}``,
``batch-pipeline`` as its overrides); its result says which calls run, with
which arguments, and which are denied (the model gets an error result).

Bounds: a run asks the model at most ``max-iterations`` (40) times; the
error when that is reached says so, how to raise it, and, when its last
turns each made the very same call, that the model loops and
``circuit-breaker`` stops it. There is no default stop for repeated calls:
a tool polled on purpose (a job's status) is called the same way every turn,
and ``circuit-breaker`` (opt-in, per tool) already refuses repeats and tells
the model why. A turn runs at most ``max-tool-calls`` (64) of the model's calls,
the first ones in its order; each call past it gets an error result saying
so and is not run (nor shown to the batch hook), so the model hears why and
the conversation keeps a result for every call. A model answer is read
within the manager's ``Limits.model_answer`` bytes (``answer.bounded``).

Interrupts: a call that raises ``ApprovalRequired`` is held while the turn's
other calls finish; then the top-level agent raises a ``Suspension`` carrying
its state, which ``Manager.invoke`` saves (``orchestrator.interrupts``). A
resumed run finds ``{state, decision}`` in ``ctx.locals["resume"]`` and
continues the held turn without asking the model again.

While listeners are attached, the answer streams to them as ``model.delta``
events (``ctx.locals["stream"]`` of ``model-call`` holds the callback), and
each ``model.response`` carries the call's token usage and the run's totals
(``ctx.run.usage``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..callers import Caller
from ..errors import (
    ApprovalRequired,
    ConfigurationError,
    InvocationError,
    ModelError,
    ReturnsValidationError,
)
from ..interrupts import RESUMING as RESUMING  # re-exported: the key was defined here
from ..interrupts import Suspension
from ..prompt import render_prompt
from .briefing import agent_instructions
from .conversation import Conversation, Saver, preamble
from .media import prompt_content
from .model import ALIASES_KEY, Deltas, label, parse_model
from .returns import FINAL_ANSWER, structured
from .routes import authorize_model, authorize_pipeline, check_tool_pipeline
from .toolset import NEXT, allowed_tools, offered_tools
from .turn import kept_outcomes, run_turn

if TYPE_CHECKING:
    from ..context import Context

log = logging.getLogger("orchestrator.agent")

CHOICES = ("auto", "none", "required")
MAX_TOOL_CALLS = 64
"""Tool calls one turn may run unless the agent's ``max-tool-calls`` says otherwise."""
ANSWER_NOW = "Give your final answer now: only JSON matching the requested schema, no other text and no tool calls."
_AGAIN = object()
"""What a turn that sent a structured answer back returns: ask the model again."""


def model_spec(ctx: Context) -> dict[str, Any] | None:
    """The parsed model of ctx: set by the ``model`` middleware, else parsed from metadata."""
    spec = ctx.locals.get("model")
    if spec is None and ctx.meta.get("model"):
        folder = ctx.tool.path.parent if ctx.tool.path else None
        spec = parse_model(ctx.meta["model"], tool=ctx.tool.name, folder=folder, aliases=ctx.meta.get(ALIASES_KEY))
    return spec


def _pipeline(ctx: Context, key: str) -> dict[str, Any] | None:
    """``model-pipeline`` / ``tool-pipeline``: metadata given as overrides to every model request / tool call."""
    value = ctx.meta.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise ConfigurationError(f"{key} must map middleware names to args", tool=ctx.tool.name, key=key)
    return dict(value) if value else None


def _setting(ctx: Context, key: str, default: Any, kind: type) -> Any:
    value = ctx.meta.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ConfigurationError(f"{key} must be a {kind.__name__}, not {value!r}", tool=ctx.tool.name, key=key)
    return value


class Agent:
    """One run of the loop for one markdown tool's context."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.manager = ctx.owner
        spec = model_spec(ctx)
        if spec is None:
            raise ConfigurationError("agent-execute needs a model", tool=ctx.tool.name, key="model")
        self.spec = authorize_model(spec, ctx, self.manager)  # who chose its endpoint and key (issue 24)
        named, table = ctx.meta.get("model"), ctx.meta.get(ALIASES_KEY)
        if isinstance(named, str) and isinstance(table, Mapping) and named in table:  # the alias chose the route
            authorize_model(spec, ctx, self.manager, key=(ALIASES_KEY, named))
        self.max_iterations = _setting(ctx, "max-iterations", 40, int)
        self.max_errors = _setting(ctx, "max-consecutive-errors", 3, int)
        self.max_calls = _setting(ctx, "max-tool-calls", MAX_TOOL_CALLS, int)
        if self.max_calls < 1:
            raise ConfigurationError(
                f"max-tool-calls must be a whole number above 0, not {self.max_calls}",
                tool=ctx.tool.name,
                key="max-tool-calls",
            )
        choice = _setting(ctx, "tool-choice", "auto", str)
        self.choice = choice
        self.allowed = allowed_tools(ctx)
        self.tools = offered_tools(ctx, self.manager, self.allowed)
        self.wire = {t["name"]: t for t in self.tools}
        if choice not in CHOICES and choice not in self.allowed:
            raise ConfigurationError(
                f"tool-choice must be auto, none, required or an offered tool, not {choice!r}",
                tool=ctx.tool.name,
                key="tool-choice",
            )
        self.structured = structured(ctx, self.spec)  # how an answer matching returns is asked for (returns.py)
        self.retries = self.structured.retries if self.structured is not None else 0
        if self.structured is not None and self.structured.strategy == "tool" and FINAL_ANSWER in self.wire:
            raise ConfigurationError(
                f"a tool offered as {FINAL_ANSWER!r} clashes with the answer tool of returns-strategy: tool; "
                "rename it or choose another returns-strategy",
                tool=ctx.tool.name,
                key="tools",
            )
        self.caller = Caller("a model", self.allowed)
        # the models it names for fallback and compact choose where a key goes too (issue 24)
        self.model_pipeline = authorize_pipeline(_pipeline(ctx, "model-pipeline"), ctx, self.manager)
        self.tool_pipeline = _pipeline(ctx, "tool-pipeline")
        check_tool_pipeline(self.tool_pipeline, ctx, self.manager)  # the called agents trust these overrides
        self.batch_pipeline = _pipeline(ctx, "batch-pipeline")
        self.saver: Saver | None = None
        self.conversation = Conversation([], [])
        self.iteration = 0
        self.errors = 0
        self.history = 0  # messages the session held before this run
        self.choice_now = choice
        self.answering = False

    def run(self) -> Awaitable[Any]:
        """Ask the model until it answers; run its tool calls in between (``await agent.run()``).

        With ``ctx.locals["session"]`` the session's messages are loaded first
        and every turn is saved; the session's lease is held for the run.
        Without one, the loop's own coroutine is returned: no frame in
        between, which every resumption of the run would pass through.

        Raises:
            InvocationError: max-iterations or max-consecutive-errors reached; the session is busy.
            ModelError: the model failed, or answered with nothing or out of what was asked.
            ReturnsValidationError: a structured answer still fails ``returns``
                after ``returns-retries`` retries.
            ApprovalRequired: a tool call waits for a decision (the top-level agent's carries its state).
        """
        session = self.ctx.locals.get("session")
        if session is None:
            return self._loop(None)
        return self._held(str(session))

    async def _held(self, session: str) -> Any:
        """The loop holding ``session``'s lease, saving every turn."""
        from ..sessions import holding  # sqlite only for agents that keep a conversation

        store = self.manager.sessions
        async with holding(store, session) as lease:
            return await self._loop(Saver(store, session, lease, self.ctx.tool.name))

    async def _loop(self, saver: Saver | None) -> Any:
        ctx = self.ctx
        resumed = ctx.locals.get(RESUMING)
        self.saver = saver
        decision = None
        turn: dict[str, Any] | None = None
        if resumed is not None:  # continue a suspended run from its saved state (orchestrator.interrupts)
            state, decision = resumed["state"], resumed["decision"]
            self.conversation = Conversation(state["preamble"], state["messages"], agent_instructions(ctx, self.wire))
            self.conversation.rewritten = bool(state["rewritten"])
            if saver is not None:
                await saver.resume(int(state["saved"]))
            iteration, self.errors = int(state["iteration"]), int(state["errors"])
            self.history = int(state.get("history", 0))
            self.choice_now, self.answering = str(state["choice"]), bool(state["answering"])
            self.retries = int(state.get("retries", self.retries))
            turn = state["turn"]
        else:
            history = await saver.load() if saver is not None else []
            self.history = len(history)
            self.conversation = Conversation.begin(
                preamble(ctx, self.structured.instruction() if self.structured is not None else None),
                [*history, {"role": "user", "content": prompt_content(ctx, str(render_prompt(ctx)))}],
                agent_instructions(ctx, self.wire),  # instruction files beside the code (issue 30)
            )
            iteration, self.errors, self.choice_now, self.answering = 1, 0, self.choice, False
        conversation = self.conversation
        while iteration <= self.max_iterations:
            self.iteration = iteration
            choice = self.choice_now
            if turn is None:
                offered = bool(self.tools) and choice != "none" and not self.answering
                response = await self._ask(conversation, choice, iteration, offered=offered, answering=self.answering)
                calls = response.get("tool_calls") or []
                final = next((c for c in calls if c.get("name") == FINAL_ANSWER), None) if self._tool_strategy else None
                if not offered or not calls or final is not None:
                    if self.structured is not None:
                        answer = await self._structured(response, calls, final, offered)
                        if answer is _AGAIN:
                            iteration += 1
                            continue
                        return answer
                    answer = self._answer(response.get("content"))
                    conversation.add({"role": "assistant", "content": _text(answer)})
                    await self._save()
                    return answer
                conversation.add({"role": "assistant", "content": response.get("content") or "", "tool_calls": calls})
                turn = {"calls": calls, "runs": None, "outcomes": [None] * len(calls), "held": None}
            outcomes = await run_turn(self, turn, iteration, decision)
            ended = turn.get("ended")
            turn, decision = None, None
            calls = list(conversation.messages[-1].get("tool_calls") or [])
            for call, (_ok, _value, text) in zip(calls, outcomes, strict=True):
                conversation.messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": text}
                )
            await self._save()
            if ended is not None:  # a tool-pipeline middleware raised Termination: no further model request
                return ended["value"]
            if choice == "required":
                kept = kept_outcomes(calls, outcomes, self._is_next)
                if all(ok for ok, _value in kept):
                    values = [value for _ok, value in kept]
                    return values[0] if len(values) == 1 else values
            self.errors = self.errors + 1 if not any(ok for ok, _v, _t in outcomes) else 0
            if self.errors >= self.max_errors:
                raise InvocationError(
                    f"the model's tool calls failed {self.errors} times in a row; last: {outcomes[-1][2]}",
                    tool=ctx.tool.name,
                )
            if choice not in CHOICES:
                self.choice_now = "auto"  # a named tool is forced once, then the model may answer
            iteration += 1
        raise InvocationError(self._exhausted(), tool=ctx.tool.name, key="max-iterations")

    def _exhausted(self) -> str:
        """Why the loop stopped without an answer: max-iterations was reached; how to raise it; whether it looped."""
        limit = self.max_iterations
        turns = [m.get("tool_calls") for m in self.conversation.messages if m.get("role") == "assistant"]
        same = 0
        for calls in reversed(turns):
            if not calls or _calls(calls) != _calls(turns[-1] or []):
                break
            same += 1
        looped = ""
        if same >= 2:
            first = (turns[-1] or [{}])[0]
            shown = f"{self.ref(first.get('name'))}({json.dumps(first.get('arguments'), default=str)[:100]})"
            looped = (
                f"; its last {same} turns each made the same call, {shown}: it is looping. Add "
                "tool-pipeline: {circuit-breaker: {repeats: 3}} to tell it to stop and answer"
            )
        return (
            f"the model gave no answer in {limit} model requests: max-iterations ({limit}) was reached{looped}; "
            f"if it needs more turns, raise max-iterations in the tool's metadata (max-iterations: {limit * 2})"
        )

    async def _save(self) -> None:
        if self.saver is not None:
            await self.saver.save(self.conversation)

    def suspension(self, exc: ApprovalRequired, turn: dict[str, Any]) -> ApprovalRequired:
        """What a held call raises out of the loop: with the loop's state when this agent is the top-level call.

        A nested agent (called by a model or a tool) has no state of its own to
        save: its caller's turn holds the call to it, and a resume runs it again.
        """
        if self.ctx.parent is not None:
            return exc
        conversation = self.conversation
        state = {
            "preamble": conversation.preamble,
            "messages": conversation.messages,
            "rewritten": conversation.rewritten,
            "saved": self.saver.saved if self.saver is not None else 0,
            "history": self.history,
            "iteration": self.iteration,
            "errors": self.errors,
            "choice": self.choice_now,
            "answering": self.answering,
            "retries": self.retries,
            "turn": turn,
        }
        return Suspension(exc, json.loads(json.dumps(state, default=str)))

    def _is_next(self, call: Mapping[str, Any]) -> bool:
        return self.ref(call.get("name")) == NEXT

    @property
    def _tool_strategy(self) -> bool:
        return self.structured is not None and self.structured.strategy == "tool"

    async def _structured(
        self, response: Mapping[str, Any], calls: list[dict[str, Any]], final: dict[str, Any] | None, offered: bool
    ) -> Any:
        """The answer when it matches ``returns`` (saved); else ``_AGAIN`` after sending it back (``returns.py``).

        A ``final_answer`` call's arguments are the answer, and the turn's
        other calls do not run. With ``native`` and tools, a text answer
        that does not match first gets one turn asking for the format alone
        (not counted as a retry).

        Raises:
            ReturnsValidationError: it still fails after ``returns-retries`` retries (``answer`` is the last).
            ModelError: the model answered with neither text nor a call.
        """
        assert self.structured is not None
        content = None if final is not None else self._answer(response.get("content"))
        value, failures = self.structured.verdict(content, final, self.ctx.tool.name)
        if not failures:
            self.conversation.add({"role": "assistant", "content": _text(value if final is not None else content)})
            await self._save()
            return value
        if final is None and self.structured.strategy == "native" and offered:  # the format not asked for yet
            self.conversation.add(
                {"role": "assistant", "content": _text(content)}, {"role": "user", "content": ANSWER_NOW}
            )
            self.answering = True
            return _AGAIN
        self.conversation.add(*self.structured.sent_back(failures, response, calls, final))
        if self.retries <= 0:
            raise ReturnsValidationError(failures, answer=value, tool=self.ctx.tool.name)
        self.retries -= 1
        return _AGAIN

    def ref(self, wire: Any) -> str:
        """The tool ref behind a name the model used (the name itself when it is not offered)."""
        offered = self.wire.get(str(wire))
        return offered["ref"] if offered else str(wire)

    async def _ask(
        self, conversation: Conversation, choice: str, iteration: int, *, offered: bool, answering: bool
    ) -> dict[str, Any]:
        """One model request through ``model-call``, streamed to listeners; its answer.

        ``model-call`` gets the conversation in ``ctx.locals["conversation"]``:
        a middleware of ``model-pipeline`` that rewrites it changes what later
        requests and the session see.

        Raises:
            InvocationError: model-call's pipeline returned something that is not a response.
        """
        ctx = self.ctx
        listed = offered or (answering and self.choice != "none")
        tools = [{k: t[k] for k in ("name", "description", "parameters")} for t in self.tools] if listed else []
        if self._tool_strategy:
            tools = [*tools, self.structured.final_tool()]  # type: ignore[union-attr]
            if choice == "none":
                choice = "auto"  # the answer tool stays callable: it is how the model answers
        if answering:
            choice = "none"
        wire_choice = choice if choice in CHOICES else self.tools[[t["ref"] for t in self.tools].index(choice)]["name"]
        native = self.structured is not None and self.structured.strategy == "native"
        structured = self.structured.schema if native and not offered else None  # type: ignore[union-attr]
        messages = conversation.request()
        conversation.answer = None  # a rewrite_answer is for the answer of the request it saw
        request = {
            "model": self.spec,
            "messages": messages,
            "tools": tools,
            "tool-choice": wire_choice,
            "response-format": structured,
        }
        manager = self.manager
        manager.emit(
            "model.request",
            ctx,
            iteration,
            model=label(self.spec),
            messages=messages,  # the very list model-call is given (no copy): the run log records it
            tools=[t["ref"] for t in self.tools] if offered else [],
            response_format=structured is not None,
        )
        deltas = None
        if manager.events:  # nothing streams to nobody: no delta is built
            named = self._named
            deltas = Deltas(
                lambda kind, data: manager.emit(kind, ctx, iteration, **(named(data) if "call" in data else data))
            )
        try:
            response = await ctx.manager.invoke(  # its answer limit and reused clients: model-call's
                "model-call",
                request,
                overrides=self.model_pipeline,
                context={"locals": {"stream": deltas, "conversation": conversation}},
            )
        except BaseException as exc:
            if deltas is not None:
                deltas.discard(f"{type(exc).__name__}: {exc}")
            if isinstance(exc, ModelError) and self.history and self.spec.get("provider") == "scripted":
                raise self._replayed(exc) from exc
            if (renamed := _naming(exc, ctx.tool.name)) is not None:
                raise renamed from exc
            raise
        if not isinstance(response, Mapping):
            raise InvocationError(f"model-call returned {type(response).__name__}, not a response", tool=ctx.tool.name)
        manager.emit(
            "model.response",
            ctx,
            iteration,
            model=response.get("model"),
            content=response.get("content"),
            calls=[self.ref(c.get("name")) for c in response.get("tool_calls") or []],
            finish_reason=response.get("finish_reason"),
            usage=response.get("usage"),
            run_usage=dict(ctx.run.usage),
            streamed=deltas.count if deltas is not None else 0,
        )
        return dict(response)

    def _replayed(self, exc: ModelError) -> ModelError:
        """A scripted model's failure, saying the session's earlier messages count among its turns."""
        session = self.saver.session if self.saver is not None else None
        return ModelError(
            f"{exc.detail}; session {session!r} already held {self.history} messages from earlier runs, and a "
            "scripted model's turns count them: use a new session id, or clear it "
            f"(await manager.sessions.delete({session!r}), or toolcascade sessions delete {session} --store FILE)",
            retryable=exc.retryable,
            status=exc.status,
            retry_after=exc.retry_after,
            tool=exc.tool or self.ctx.tool.name,
            path=exc.path,
            line=exc.line,
            key=exc.key,
        )

    def _named(self, data: dict[str, Any]) -> dict[str, Any]:
        """A delta as listeners see it: a tool call by its ref, as ``tool.start`` names it."""
        if "call" in data:
            return {**data, "call": self.ref(data["call"])}
        return data

    def _answer(self, content: Any) -> Any:
        """The model's text answer.

        Raises:
            ModelError: there is none.
        """
        if content is None:
            raise ModelError("the model answered with neither text nor tool calls", tool=self.ctx.tool.name)
        return content


def _calls(calls: Sequence[Mapping[str, Any]]) -> list[tuple[Any, str]]:
    """A turn's tool calls, by name and arguments (ids differ on every turn), to tell a repeated turn."""
    return [(c.get("name"), json.dumps(c.get("arguments"), sort_keys=True, default=str)) for c in calls]


def _text(content: Any) -> str:
    """An answer as the text a conversation keeps."""
    if content is None or isinstance(content, str):
        return content or ""
    return json.dumps(content, default=str)


async def run_agent(ctx: Context) -> Any:
    """The body ``agent-execute`` gives a markdown tool that has a model."""
    return await Agent(ctx).run()


def _naming(exc: BaseException, agent: str) -> ConfigurationError | None:
    """A model client's ConfigurationError (no API key, no SDK) that names no tool, again naming ``agent``."""
    if type(exc) is not ConfigurationError or exc.tool is not None:
        return None
    return ConfigurationError(exc.detail, tool=agent, path=exc.path, line=exc.line, key=exc.key)
