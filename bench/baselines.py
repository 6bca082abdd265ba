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
- LangChain: ``create_agent(model, tools=[tool], middleware=[...])`` with
  pass-through ``awrap_tool_call`` middleware builds the agent's graph; the
  bench then calls the graph's own ``ToolNode`` for one tool call
  (``ToolNode._arun_one``), which runs the ``awrap_tool_call`` chain exactly as
  ``create_agent`` composed it (``traceable`` wrappers and all) around the
  tool. No model is called: only the tool-call step is timed.
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


def langchain_call(count: int) -> Call | None:
    """One tool call through the ToolNode of a ``create_agent`` agent with ``count`` wrap_tool_call middleware.

    Returns None when langchain is not installed.
    """
    try:
        from langchain.agents import create_agent
        from langchain.agents.middleware import AgentMiddleware
        from langchain.tools import ToolRuntime
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.tools import tool
    except ImportError:
        return None

    @tool
    async def noop() -> int:
        """Return 1."""
        return 1

    async def passing_tool_call(self: Any, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)

    # create_agent refuses two middleware of one name, and a middleware's name is its class name.
    middleware = [
        type(f"Passing{i}", (AgentMiddleware,), {"awrap_tool_call": passing_tool_call})() for i in range(count)
    ]
    agent = create_agent(GenericFakeChatModel(messages=iter(())), tools=[noop], middleware=middleware)
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
