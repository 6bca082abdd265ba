"""The agent loop (R-AGENT-1, R-AGENT-3): a markdown tool's prompt run by a model with tools.

Three layers of middleware fall out of the pipeline: the agent's own
metadata middleware; every model request is an invocation of the built-in
``model-call`` tool (extend it through ``model-pipeline`` metadata, passed as
its overrides: ``{retry: {attempts: 3}}``); every tool call is an independent
``ctx.manager.invoke`` with that tool's own pipeline, extended for this agent
through ``tool-pipeline`` (its overrides on every call).

Structured answers: when ``returns`` asks for an object, the JSON response
format is sent only on a turn where the model must answer, because a server
that enforces the format never lets the model call a tool. Without tools
that is every turn. With tools, the model works with its tools; when it
answers in text that is not JSON matching ``returns``, one more turn asks for
the answer alone, in the format (its tools listed but ``tool-choice: none``,
as some APIs want the tools of earlier calls described). An answer that
already matches costs no extra turn.

``tool-choice`` is enforced by ``model-call``: ``required`` or a tool's name
with no such call is a ``ModelError``. With ``required`` the result is the
calls' values (one value, or a list in call order; the chain a middleware
agent continues is one value, however often the model calls ``next``); a
failed call goes back to the model like any other.

While listeners are attached, the answer streams to them as ``model.delta``
events (``ctx.locals["stream"]`` of ``model-call`` holds the callback), and
each ``model.response`` carries the call's token usage and the run's totals
(``ctx.run.usage``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ..callers import Caller
from ..errors import ConfigurationError, InvocationError, ModelError, OrchestratorError, ReturnsValidationError
from ..options import extract_options
from ..prompt import render_prompt
from ..schema import object_schema, validator_for
from ..tool import wire_name
from .model import Deltas, label, parse_model

if TYPE_CHECKING:
    from ..context import Context

log = logging.getLogger("orchestrator.agent")

NEXT = "next"
_FENCE = re.compile(r"^```[A-Za-z]*\n|\n?```$")
CHOICES = ("auto", "none", "required")
ANSWER_NOW = "Give your final answer now: only JSON matching the requested schema, no other text and no tool calls."


def model_spec(ctx: Context) -> dict[str, Any] | None:
    """The parsed model of ctx: set by the ``model`` middleware, else parsed from metadata."""
    spec = ctx.locals.get("model")
    if spec is None and ctx.meta.get("model"):
        folder = ctx.tool.path.parent if ctx.tool.path else None
        spec = parse_model(ctx.meta["model"], tool=ctx.tool.name, folder=folder)
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
        self.manager = ctx._manager
        spec = model_spec(ctx)
        if spec is None:
            raise ConfigurationError("agent-execute needs a model", tool=ctx.tool.name, key="model")
        self.spec = spec
        self.max_iterations = _setting(ctx, "max-iterations", 40, int)
        self.max_errors = _setting(ctx, "max-consecutive-errors", 3, int)
        choice = _setting(ctx, "tool-choice", "auto", str)
        self.choice = choice
        self.allowed = self._allowed()
        self.tools = self._offered()
        self.wire = {t["name"]: t for t in self.tools}
        if choice not in CHOICES and choice not in self.allowed:
            raise ConfigurationError(
                f"tool-choice must be auto, none, required or an offered tool, not {choice!r}",
                tool=ctx.tool.name,
                key="tool-choice",
            )
        returns = ctx.meta.get("returns")
        self.wants_json = isinstance(returns, Mapping) and (returns.get("type") == "object" or "properties" in returns)
        self.returns = returns if self.wants_json else None
        self.caller = Caller("a model", self.allowed)
        self.model_pipeline = _pipeline(ctx, "model-pipeline")
        self.tool_pipeline = _pipeline(ctx, "tool-pipeline")

    def _allowed(self) -> frozenset[str]:
        ctx = self.ctx
        names = ctx.meta.get("tools") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigurationError("tools must be a list of tool names", tool=ctx.tool.name, key="tools")
        allowed = ctx.locals.get("allowed-tools")
        if allowed is None and ctx.meta.get("allowed-tools") is not None:
            allowed = frozenset(ctx.meta["allowed-tools"])
        found = [n for n in names if allowed is None or n in allowed]
        if ctx.target is not ctx:
            found.append(NEXT)
        return frozenset(found)

    def _offered(self) -> list[dict[str, Any]]:
        ctx = self.ctx
        offered = []
        wires: dict[str, str] = {}
        for name in [*(ctx.meta.get("tools") or []), NEXT]:
            if name not in self.allowed:
                continue
            wire = wire_name(name)
            if wires.setdefault(wire, name) != name:
                raise ConfigurationError(
                    f"tools {wires[wire]!r} and {name!r} would both be offered to the model as {wire!r}; "
                    "rename one of them",
                    tool=ctx.tool.name,
                    key="tools",
                )
            if name == NEXT:
                schema: dict[str, Any] = {"type": "object", "properties": {}}
                wrapped, description = False, "Continue the wrapped tool's pipeline and return its result."
            else:
                info = self.manager.describe(name, ctx.paths, ctx.run.checked)
                if info.role == "middleware":
                    raise ConfigurationError(
                        f"tool {name!r} is middleware (role: middleware): it wraps other tools and cannot be offered "
                        "to a model",
                        tool=ctx.tool.name,
                        key="tools",
                    )
                try:
                    schema, wrapped = object_schema(info.params)
                except ValueError as exc:
                    raise ConfigurationError(f"tool {name!r}: {exc}", tool=ctx.tool.name, key="tools") from exc
                description = info.description or ""
            offered.append(
                {
                    "name": wire,
                    "ref": name,
                    "wrapped": wrapped,
                    "description": description,
                    "parameters": schema,
                }
            )
        return offered

    async def run(self) -> Any:
        """Ask the model until it answers; run its tool calls in between.

        Raises:
            InvocationError: max-iterations or max-consecutive-errors reached.
            ModelError: the model failed, or answered with nothing or out of what was asked.
            ReturnsValidationError: a structured answer that is not JSON.
        """
        ctx = self.ctx
        messages: list[dict[str, Any]] = []
        if ctx.meta.get("system"):
            messages.append({"role": "system", "content": str(ctx.meta["system"])})
        messages.append({"role": "user", "content": str(render_prompt(ctx))})
        errors = 0
        choice = self.choice
        answering = False  # the turn that asks for the structured answer alone
        for iteration in range(1, self.max_iterations + 1):
            offered = bool(self.tools) and choice != "none" and not answering
            response = await self._ask(messages, choice, iteration, offered=offered, answering=answering)
            calls = response.get("tool_calls") or []
            if not offered or not calls:
                content = response.get("content")
                if offered and self.returns is not None and not self._matches(content):
                    messages.append({"role": "assistant", "content": content or ""})
                    messages.append({"role": "user", "content": ANSWER_NOW})
                    answering = True
                    continue
                return self._answer(content)
            messages.append({"role": "assistant", "content": response.get("content") or "", "tool_calls": calls})
            outcomes = await self._call_all(calls, iteration)
            for call, (_ok, _value, text) in zip(calls, outcomes, strict=True):
                messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": text})
            if choice == "required":
                kept = self._kept(calls, outcomes)
                if all(ok for ok, _value in kept):
                    values = [value for _ok, value in kept]
                    return values[0] if len(values) == 1 else values
            errors = errors + 1 if not any(ok for ok, _v, _t in outcomes) else 0
            if errors >= self.max_errors:
                raise InvocationError(
                    f"the model's tool calls failed {errors} times in a row; last: {outcomes[-1][2]}",
                    tool=ctx.tool.name,
                )
            if choice not in CHOICES:
                choice = "auto"  # a named tool is forced once, then the model may answer
        raise InvocationError(f"no answer after max-iterations ({self.max_iterations})", tool=ctx.tool.name)

    def _kept(self, calls: list[dict[str, Any]], outcomes: list[tuple[bool, Any, str]]) -> list[tuple[bool, Any]]:
        """The outcomes ``tool-choice: required`` returns: the wrapped chain's result once, however often it ran.

        Calls of ``next`` in one turn run at once; one continues the chain and
        the others fail (``next()`` is already running) or repeat its result.
        """
        kept: list[tuple[bool, Any]] = []
        continued = [(ok, value) for call, (ok, value, _t) in zip(calls, outcomes, strict=True) if self._is_next(call)]
        done = next((pair for pair in continued if pair[0]), continued[0] if continued else None)
        for call, (ok, value, _text) in zip(calls, outcomes, strict=True):
            if not self._is_next(call):
                kept.append((ok, value))
            elif done is not None:
                kept.append(done)
                done = None
        return kept

    def _is_next(self, call: Mapping[str, Any]) -> bool:
        return self._ref(call.get("name")) == NEXT

    def _matches(self, content: Any) -> bool:
        """Whether a text answer already is JSON matching ``returns`` (then no extra turn is needed)."""
        try:
            value = self._answer(content)
        except (ModelError, ReturnsValidationError):
            return False
        return bool(validator_for(self.returns, self.ctx.tool.name).is_valid(value))

    def _ref(self, wire: Any) -> str:
        """The tool ref behind a name the model used (the name itself when it is not offered)."""
        offered = self.wire.get(str(wire))
        return offered["ref"] if offered else str(wire)

    async def _ask(
        self, messages: list[dict[str, Any]], choice: str, iteration: int, *, offered: bool, answering: bool
    ) -> dict[str, Any]:
        """One model request through ``model-call``, streamed to listeners; its answer.

        Raises:
            InvocationError: model-call's pipeline returned something that is not a response.
        """
        ctx = self.ctx
        listed = offered or (answering and self.choice != "none")
        tools = [{k: t[k] for k in ("name", "description", "parameters")} for t in self.tools] if listed else []
        if answering:
            choice = "none"
        wire_choice = choice if choice in CHOICES else self.tools[[t["ref"] for t in self.tools].index(choice)]["name"]
        structured = self.returns if not offered else None
        request = {
            "model": self.spec,
            "messages": list(messages),
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
            messages=len(messages),
            tools=[t["ref"] for t in self.tools] if offered else [],
            response_format=structured is not None,
        )
        deltas = None
        if manager.events:  # nothing streams to nobody: no delta is built
            deltas = Deltas(lambda kind, data: manager.emit(kind, ctx, iteration, **self._named(data)))
        try:
            response = await ctx.manager.invoke(
                "model-call",
                request,
                overrides=self.model_pipeline,
                context={"locals": {"stream": deltas}} if deltas is not None else None,
            )
        except BaseException as exc:
            if deltas is not None:
                deltas.discard(f"{type(exc).__name__}: {exc}")
            raise
        if not isinstance(response, Mapping):
            raise InvocationError(f"model-call returned {type(response).__name__}, not a response", tool=ctx.tool.name)
        manager.emit(
            "model.response",
            ctx,
            iteration,
            model=response.get("model"),
            content=response.get("content"),
            calls=[self._ref(c.get("name")) for c in response.get("tool_calls") or []],
            finish_reason=response.get("finish_reason"),
            usage=response.get("usage"),
            run_usage=dict(ctx.run.usage),
            streamed=deltas.count if deltas is not None else 0,
        )
        return dict(response)

    def _named(self, data: dict[str, Any]) -> dict[str, Any]:
        """A delta as listeners see it: a tool call by its ref, as ``tool.start`` names it."""
        if "call" in data:
            return {**data, "call": self._ref(data["call"])}
        return data

    def _answer(self, content: Any) -> Any:
        if content is None:
            raise ModelError("the model answered with neither text nor tool calls", tool=self.ctx.tool.name)
        if not self.wants_json:
            return content
        if isinstance(content, str):
            content = _FENCE.sub("", content.strip())  # models often wrap JSON in ```json fences
        try:
            return json.loads(content) if isinstance(content, str) else content
        except json.JSONDecodeError as exc:
            raise ReturnsValidationError(
                [("", f"the model's answer is not JSON: {exc}")], tool=self.ctx.tool.name
            ) from exc

    async def _call_all(self, calls: list[dict[str, Any]], iteration: int) -> list[tuple[bool, Any, str]]:
        outcomes: list[tuple[bool, Any, str]] = [(False, None, "")] * len(calls)

        async def one(index: int, call: dict[str, Any]) -> None:
            outcomes[index] = await self._call(call, iteration)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(calls):
                group.start_soon(one, index, call)
        return outcomes

    async def _call(self, call: Mapping[str, Any], iteration: int) -> tuple[bool, Any, str]:
        """Run one tool call; every failure becomes an error result for the model, never a crash."""
        ctx = self.ctx
        offered = self.wire.get(call.get("name", ""))
        name = offered["ref"] if offered else str(call.get("name"))
        self.manager.emit("tool.start", ctx, iteration, call=name, arguments=call.get("arguments"))
        try:
            if offered is None:
                log.warning("%s: the model called %r, which is not among its allowed tools", ctx.tool.name, name)
                raise PermissionError(f"tool {name!r} is not available to this agent")
            args = call.get("arguments")
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
                value = await ctx.manager.invoke(name, args, overrides=self.tool_pipeline, caller=self.caller)
        except Exception as exc:  # the model hears about any failure; cancellation still propagates
            if not isinstance(exc, (OrchestratorError, PermissionError)):
                log.debug("%s: tool call %r failed", ctx.tool.name, name, exc_info=True)
            text = f"error: {type(exc).__name__}: {exc}"
            self.manager.emit("tool.end", ctx, iteration, call=name, error=text)
            return False, None, text
        self.manager.emit("tool.end", ctx, iteration, call=name, error=None)
        return True, value, value if isinstance(value, str) else json.dumps(value, default=str)


async def run_agent(ctx: Context) -> Any:
    """The body ``agent-execute`` gives a markdown tool that has a model."""
    return await Agent(ctx).run()
