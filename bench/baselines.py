"""Baselines measured in the same process run: direct await, koa-style compose, MAF, LangChain.

MAF (``agent-framework-core``) and LangChain (``langchain``) are optional:
``pip install -e '.[bench]'``. When one is missing its builders return None
and its rows print "not installed".

- MAF: a ``FunctionTool`` (the ``@tool`` decorator) run through
  ``FunctionMiddlewarePipeline.execute`` with ``FunctionTool.invoke`` as the
  final handler, a fresh ``FunctionInvocationContext`` per call: what MAF's
  function-calling loop does for each tool call, without the model. The
  loop's own wrapper (``_auto_invoke_function``: argument parsing, result
  finalising) is measured as a second row where the private API exists.
- LangChain, through its public API: ``create_agent(model, tools=[tool],
  middleware=[...])`` with pass-through ``awrap_tool_call`` middleware,
  driven by ``agent.ainvoke`` with a fake chat model (``ToolCallingModel``
  below) that answers with one tool call, then, once it sees the tool's
  result, with a final answer. A call is the whole agent loop: two model
  steps and one tool step. The per-middleware figure is the slope over
  middleware counts, so the loop's fixed cost cancels.
- LangChain's tool step alone (older figure, private API): the same agent's
  ``ToolNode._arun_one`` for one tool call, which runs the ``awrap_tool_call``
  chain exactly as ``create_agent`` composed it around the tool, no model.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Call = Callable[[], Awaitable[Any]]
Middleware = Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def bare(ctx: object = None) -> int:
    """The trivial tool body, awaited directly: the floor every other row is a multiple of."""
    return 1


def compose(middleware: Sequence[Middleware], body: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """Koa-style compose: each middleware gets the context and a ``next`` that runs the rest."""

    def run(ctx: Any) -> Awaitable[Any]:
        def dispatch(i: int) -> Awaitable[Any]:
            if i == len(middleware):
                return body(ctx)
            return middleware[i](ctx, lambda: dispatch(i + 1))

        return dispatch(0)

    return run


async def passing(ctx: Any, next_: Callable[[], Awaitable[Any]]) -> Any:
    """A pass-through koa middleware."""
    return await next_()


def version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# -- Microsoft Agent Framework ------------------------------------------------


def maf_tool(body: Callable[..., Awaitable[Any]] | None = None) -> Any:
    """A MAF ``FunctionTool`` around ``body`` (default: the trivial async tool), or None when MAF is missing."""
    try:
        from agent_framework import tool
    except ImportError:
        return None

    async def noop() -> int:
        """Return 1."""
        return 1

    return tool(body or noop, name="noop", description="Return 1.", approval_mode="never_require")


def maf_call(count: int, function: Any = None) -> Call | None:
    """One MAF function-tool invocation through ``count`` pass-through function middleware, or None.

    Raises:
        ImportError: never; a missing MAF returns None.
    """
    try:
        from agent_framework import FunctionInvocationContext, FunctionMiddleware
        from agent_framework._middleware import FunctionMiddlewarePipeline
    except ImportError:
        return None
    function = function or maf_tool()

    class Passing(FunctionMiddleware):
        async def process(self, context: Any, call_next: Callable[[], Awaitable[None]]) -> None:
            await call_next()

    pipeline = FunctionMiddlewarePipeline(*(Passing() for _ in range(count)))

    async def final(context: Any) -> Any:
        return await function.invoke(arguments=context.arguments, context=context)

    async def call() -> Any:
        return await pipeline.execute(FunctionInvocationContext(function=function, arguments={}), final)

    return call


def maf_loop_call(count: int) -> Call | None:
    """MAF's function-calling loop step (``_auto_invoke_function``) for one tool call, or None.

    Private API: absent in other MAF versions, then None.
    """
    try:
        from agent_framework import Content, FunctionMiddleware
        from agent_framework._middleware import FunctionMiddlewarePipeline
        from agent_framework._tools import _auto_invoke_function, normalize_function_invocation_configuration
    except ImportError:
        return None
    function = maf_tool()

    class Passing(FunctionMiddleware):
        async def process(self, context: Any, call_next: Callable[[], Awaitable[None]]) -> None:
            await call_next()

    pipeline = FunctionMiddlewarePipeline(*(Passing() for _ in range(count)))
    config = normalize_function_invocation_configuration(None)
    tools = {"noop": function}

    async def call() -> Any:
        content = Content.from_function_call(call_id="c1", name="noop", arguments="{}")
        return await _auto_invoke_function(content, config=config, tool_map=tools, middleware_pipeline=pipeline)

    return call


# -- LangChain v1 ----------------------------------------------------------------


def passing_middleware(count: int) -> list[Any]:
    """``count`` pass-through ``awrap_tool_call`` middleware for ``create_agent`` (langchain must be installed)."""
    from langchain.agents.middleware import AgentMiddleware

    async def passing_tool_call(self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)

    # create_agent refuses two middleware of one name, and a middleware's name is its class name.
    return [type(f"Passing{i}", (AgentMiddleware,), {"awrap_tool_call": passing_tool_call})() for i in range(count)]


def tool_calling_model() -> Any:
    """A fake chat model: one call of the ``noop`` tool, then, once the tool answered, the final answer ``done``.

    It decides from the messages it is given, so every ``ainvoke`` of the agent
    runs the same three steps whatever ran before. ``_agenerate`` answers on the
    event loop: ``GenericFakeChatModel`` has only ``_generate``, which
    LangChain's async path runs in a worker thread, adding a thread hop and its
    noise to every model step.
    """
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    call = {"name": "noop", "args": {}, "id": "c1", "type": "tool_call"}

    class ToolCallingModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "tool-calling-fake"

        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            done = bool(messages) and isinstance(messages[-1], ToolMessage)
            answer = AIMessage("done") if done else AIMessage("", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=answer)])

        async def _agenerate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return self._generate(messages, stop)

        def bind_tools(self, tools: Sequence[Any], *, tool_choice: str | None = None, **kw: Any) -> Any:
            return self  # the answers are fixed; the tools' schemas are not needed

    return ToolCallingModel()


def noop_agent(count: int) -> Any:
    """A ``create_agent`` agent with one tool (``noop``) and ``count`` pass-through ``awrap_tool_call`` middleware.

    Raises:
        ImportError: langchain is not installed.
    """
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    @tool
    async def noop() -> int:
        """Return 1."""
        return 1

    return create_agent(tool_calling_model(), tools=[noop], middleware=passing_middleware(count))


def langchain_agent_call(count: int) -> Call | None:
    """One ``agent.ainvoke`` of a ``create_agent`` agent with ``count`` ``awrap_tool_call`` middleware, or None.

    Public API only. The agent runs the model (a tool call), the tool through
    the middleware, and the model again (the final answer). The first call's
    messages are checked, so the figure measures what it says.

    Raises:
        RuntimeError: the agent did not run the tool and answer (a changed LangChain).
    """
    try:
        agent = noop_agent(count)
    except ImportError:
        return None
    question: Any = {"messages": [{"role": "user", "content": "run noop"}]}  # the agent's input state

    async def call() -> Any:
        return await agent.ainvoke(question)

    async def check() -> Any:
        result = await call()
        kinds = [(type(m).__name__, m.content) for m in result["messages"]]
        if kinds != [("HumanMessage", "run noop"), ("AIMessage", ""), ("ToolMessage", "1"), ("AIMessage", "done")]:
            raise RuntimeError(f"create_agent ran {kinds}, not: model -> tool -> model")
        return result

    first = True

    async def checked() -> Any:
        nonlocal first
        if first:
            first = False
            return await check()
        return await call()

    return checked


def langchain_toolnode_call(count: int) -> Call | None:
    """One tool call through the ToolNode of a ``create_agent`` agent with ``count`` wrap_tool_call middleware.

    Private API (``ToolNode._arun_one``): the older figure, kept beside the
    public one. Returns None when langchain is not installed or the private
    method is gone.
    """
    try:
        from langchain.tools import ToolRuntime

        agent = noop_agent(count)
    except ImportError:
        return None
    node: Any = agent.nodes["tools"].bound  # the ToolNode create_agent built
    if not hasattr(node, "_arun_one"):  # private: another langgraph version runs tool calls differently
        return None
    runtime: Any = ToolRuntime(
        state={"messages": []}, context=None, config={}, stream_writer=lambda _: None, tool_call_id="c1", store=None
    )
    tool_call = {"name": "noop", "args": {}, "id": "c1", "type": "tool_call"}

    async def call() -> Any:
        return await node._arun_one(tool_call, "dict", runtime)

    return call
