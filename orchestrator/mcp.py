"""The MCP server: the manager's non-hidden tools as MCP tools, each call a ``manager.invoke``.

**Names.** MCP tool names allow ``[A-Za-z0-9_.-]`` only (SEP-986) and model
APIs drop the dot, so a ref's ``/`` becomes ``__`` and any other character
outside ``[A-Za-z0-9_-]`` becomes ``_``: ``team/summarize`` is served as
``team__summarize``. A call is resolved through the current listing, never by
reversing the name, so only listed tools can be called; a ref whose name is
already taken by an earlier one (search-path order) is left out and logged.

**Schemas.** ``params`` that is an object schema (``type: object``, or
``properties`` without a ``type``) is the ``inputSchema``; any other schema is
wrapped as the one required property ``value`` and unwrapped on call; no
``params`` is ``{"type": "object"}`` with the arguments passed as they are.

**Callers are untrusted.** Every call passes ``Caller("MCP callers", served
tools)`` to the engine (a served tool is one listed, or called, and still
servable now), which applies the rules of ``orchestrator.callers`` to
the ``$`` options in the arguments (``$overrides`` only with
``--allow-overrides``); ``$timeout`` is capped by ``max_timeout``, which also
applies when the caller gives none; ``ctx.envelope`` is always the server's
(see ``envelope``): a caller's ``$context.envelope`` is refused.

**The list follows the files.** Every ``tools/list`` lists afresh, unless
the last listing is younger than ``LISTING_SHARE`` times what it took (so
clients listing in a loop cannot keep the server listing). While a
client listens (a handshake session, from ``notifications/initialized`` until
it closes; or a 2026-era ``subscriptions/listen`` stream) the tool set is
polled every ``poll_interval`` seconds and ``notifications/tools/list_changed``
is sent when names, descriptions or schemas change.

**Calls under load.** Listing stats and describes every tool, which costs far
more than a call (tens of seconds for 100,000 files), so a call never waits
for one when it can do without: a name the latest listing has (however old)
re-checks only its own tool (a tool hidden or broken since is not served, one
edited since is served as it is now, and the listing is updated to match); a
name the listing lacks is looked up as the ref it reads as (``__`` as ``/``)
and served when that tool is servable. Only a name neither finds lists the
tools again. Watchers and such calls share a listing while it is younger
than half a poll interval, or than ``LISTING_SHARE`` times what it took, so
listings take at most about a fifth of the server's time however large the
catalogue. A listing runs on a worker thread (the registry lets one list
while calls look tools up on the event loop), one at a time: whoever needs
a listing while one is running awaits that one's result.

**A folder too large to list.** When a listing fails as a whole (a search
path holding more than ``Limits.folder_files`` files and folders: a
``FolderLimitError``), ``tools/list`` answers with a JSON-RPC error whose
message names the folder and the limit (an empty list would tell the
client's user there are no tools, not why); a call to a name the server
cannot otherwise find gets an ``isError`` result carrying that message; calls
to tools found without a listing still run. The server's log says it once,
and again only after a listing has succeeded since; watchers keep polling.

**Errors name no server paths.** An error result names a file in a served
folder by its path relative to that folder (``team/broken.md:3``), a
built-in's as ``built-in tools/...``, and any other absolute path of the
server (the session store, the cache folder, a file a tool read) as
``<server path>``; the server's log keeps the full text.

**Approval.** A call whose pipeline holds for approval (the ``approval``
middleware) asks the MCP client's user through form elicitation: approve
(a boolean), a reason, and edited arguments as JSON text. Handshake-era
sessions get an ``elicitation/create`` request during the call; on the
2026-07-28 protocol, where a server may not send requests, the call
suspends (``Interrupted``) and returns an ``input_required`` result whose
``request_state`` is the resume token: the client's retry carries the
answer and the run resumes (``manager.resume``), the held call running
once. Decline or cancel denies. A client without the elicitation
capability is never asked: the call is denied with a message saying so.

**The rest of the protocol**, each in a module of its own: typed results
(``orchestrator.results``), titles, hints and what is served as a tool or a
prompt (``orchestrator.annotations``), prompts (``orchestrator.prompts``),
completion (``orchestrator.completion``), coalesced progress
(``orchestrator.progress``) and bearer tokens over HTTP
(``orchestrator.authorization``).

The SDK (toolcascade's ``mcp`` extra) is imported by ``build_server``
and ``serve`` only: importing this module stays cheap.
"""

from __future__ import annotations

import functools
import heapq
import json
import logging
import time
from collections.abc import Awaitable, Container, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from . import approval, prompts, resources
from .callers import Caller, check_untrusted
from .completion import complete_with
from .elicitation import APPROVAL, Elicitor, Refusal, held, read_answer
from .errors import (
    AnswerValidationError,
    ArgsValidationError,
    ConfigurationError,
    Interrupted,
    InvocationError,
    OrchestratorError,
    ToolNotFoundError,
    describe,
)
from .listings import LISTING_SHARE as LISTING_SHARE
from .listings import MAX_NAME as MAX_NAME
from .listings import POLL_INTERVAL, Listing, Listings
from .manager import Manager
from .options import extract_options
from .progress import Reporters, wants_reports
from .registry import close_refs
from .results import SERVER_PATH as SERVER_PATH
from .results import ServedPaths, failure, success, typed
from .tool import wire_name
from .transports import lifespan, parse_address, run_http, serve_stdio, server_class
from .version import __version__

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    State = dict[str, Any]
    Context = ServerRequestContext[State, Any]

log = logging.getLogger("orchestrator.mcp")

SHOWN_NAMES = 20  # served names an unknown-tool error lists


def envelope(ctx: Context, stateless: bool = False) -> dict[str, Any]:
    """The caller identity and transport data a call's ``ctx.envelope`` carries.

    ``client`` is the ``clientInfo`` the client sent (at ``initialize``, or in a
    2026-era request's ``_meta``): a claim, not an identity. ``session`` is
    the identity: the HTTP ``Mcp-Session-Id``, or an id per stdio (or
    in-process) connection; ``None`` over stateless HTTP, where nothing tells
    one caller from another (the ``cache`` tool keeps nothing for such a
    caller unless told ``shared: true``). ``request_id`` names the request,
    not the caller: every client's first call has the same one. Over
    ``stateless`` HTTP the server hands out no session ids, so an
    ``Mcp-Session-Id`` a client sends is its own invention and is ignored.
    """
    client = None
    params = ctx.session.client_params
    if params is not None:
        client = {"name": params.client_info.name, "version": params.client_info.version}
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        session = None if stateless else headers.get("mcp-session-id")
    else:  # stdio and in-process: the lifespan is per connection
        session = ctx.lifespan_context.get("session")
    return {
        "transport": "mcp",
        "client": client,
        "session": session,
        "request_id": ctx.request_id,
        "protocol_version": ctx.protocol_version,
    }


class Service(Listings):
    """What the MCP server serves: the listing and list watcher (``Listings``), the call policy, the handlers."""

    def __init__(
        self,
        manager: Manager,
        *,
        allow_overrides: bool = False,
        allow_sessions: bool = False,
        max_timeout: float | None = None,
        poll_interval: float = POLL_INTERVAL,
        stateless_http: bool = False,
    ) -> None:
        if max_timeout is not None and not (isinstance(max_timeout, (int, float)) and max_timeout > 0):
            raise ConfigurationError(f"max_timeout must be a positive number of seconds, not {max_timeout!r}")
        super().__init__(manager, poll_interval)
        self.allow_overrides = allow_overrides
        self.allow_sessions = allow_sessions
        self.max_timeout = max_timeout
        self.stateless_http = stateless_http
        self.paths = ServedPaths(manager)
        self.reporters = Reporters(manager)

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """The served tools; a JSON-RPC error naming the cause when they cannot be listed (module docstring)."""
        import mcp.types as types

        served = await self.listed()
        return types.ListToolsResult(tools=[t.tool() for t in served.values() if t.offer.as_tool])

    async def listed(self) -> dict[str, Listing]:
        """The listing ``tools/list`` and ``prompts/list`` answer from: the latest while fresh, else a new one.

        Raises:
            MCPError: the tools cannot be listed (the message names the cause).
        """
        import mcp.types as types
        from mcp.shared.exceptions import MCPError

        latest = self._latest
        try:
            if latest is not None and time.monotonic() - latest[0] < LISTING_SHARE * self._cost:
                return latest[1]
            return await self.relist()
        except OrchestratorError as exc:
            raise MCPError(types.INTERNAL_ERROR, self.paths.shown(describe(exc))) from None

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        """``completion/complete``: a served prompt's argument values from its ``params`` (``orchestrator.completion``)."""
        import mcp.types as types

        listing = None
        if isinstance(params.ref, types.PromptReference):
            try:
                listing = (await self.resolve(params.ref.name))[0]
            except OrchestratorError:
                listing = None  # nothing to offer; tools/list says why
        given = params.context.arguments if params.context is not None else None
        found = await complete_with(self.manager, listing, params.argument.name, params.argument.value, given)
        return types.CompleteResult(completion=found)

    # -- calls -----------------------------------------------------------------

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            listing, served = await self.resolve(params.name)
        except OrchestratorError as exc:  # no listing to find the name in: say why
            why = f"the served tools cannot be listed: {describe(exc)}"
            return self.failure(ToolNotFoundError(params.name, reason=why))
        if listing is None or not listing.offer.as_tool:  # an isError result, so the model can read it
            why = f"this server serves {served_names(served)}"
            near = functools.partial(close_refs, params.name, served)  # worked out only if the message is read
            return self.failure(ToolNotFoundError(params.name, reason=why, near=near))
        try:
            if params.request_state is not None:  # a 2026-era retry answering an approval
                return await self.resumed(ctx, listing, params)
            caller = self.caller(served, listing.ref)
            args, options = self.options(listing, params.arguments or {}, self.envelope(ctx), caller)
            with approval.asking(self.approver(ctx)):
                called = self.manager.invoke(listing.ref, args, caller=caller, **options)
                result = await self.reporting(ctx, called, listing.agent)
        except Interrupted as exc:  # held with nobody to ask now: a 2026-era client answers on its retry
            if ctx.session.can_send_request:  # a handshake-era client cannot retry with an answer
                return self.failure(exc, listing.ref)
            return held(exc.token, exc.request)
        except OrchestratorError as exc:
            return self.failure(exc, listing.ref)
        except Exception as exc:  # a tool's own bug: report it in one line, keep serving
            log.warning("tool %r failed: %s", listing.ref, describe(exc))
            log.debug("traceback of the failure", exc_info=exc)
            return self.failure(exc)
        return reply(listing, result)

    def caller(self, served: Mapping[str, Listing], ref: str) -> Caller:
        """Who an MCP client is to the engine: untrusted, calling ``ref`` and what ``served`` lists."""
        return Caller(
            "MCP callers",
            Served(self, served, ref),
            self.allow_overrides,
            sessions=self.allow_sessions,
            switch="--allow-",  # named in a refusal of $overrides or a session
        )

    def envelope(self, ctx: Context) -> dict[str, Any]:
        """The ``ctx.envelope`` of a call this server serves (see ``envelope``)."""
        return envelope(ctx, self.stateless_http)

    def failure(self, exc: Exception, ref: str | None = None) -> types.CallToolResult:
        """The error result for ``exc``, its paths named as the client may see them; the log keeps them in full.

        ``ref``: log the full text when paths were hidden (a tool's own bug is logged already, without it).
        """
        full = describe(exc)
        shown = self.paths.shown(full)
        if ref is not None and shown != full:
            log.warning("call of %r failed: %s", ref, full)
        return failure(shown)

    def approver(self, ctx: Context) -> approval.Approver | None:
        """Who decides the calls this request holds: the client's user, or a denial saying why not.

        None on a 2026-era session whose client can answer elicitations: the
        call suspends and the client is asked through ``input_required``.
        """
        capabilities = ctx.session.client_capabilities
        asked = capabilities.elicitation if capabilities is not None else None
        if asked is None or (asked.form is None and asked.url is not None):
            return Refusal("it did not declare the elicitation capability")
        if not ctx.session.can_send_request:
            return None
        return Elicitor(ctx)

    async def resumed(
        self, ctx: Context, listing: Listing, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Continue a held call with the answer a 2026-era client sent on its retry.

        Raises:
            OrchestratorError: an unknown token, or any error of the continued run.
        """
        token = str(params.request_state)
        answer = (params.input_responses or {}).get(APPROVAL)
        decision, problem = read_answer(answer, batch=False)
        if problem is not None:  # unreadable edit: ask again, same token
            return held(token, {"tool": listing.ref, "problem": problem})
        resumed = self.manager.resume(token, decision, ref=listing.ref)
        try:
            return reply(listing, await self.reporting(ctx, resumed, listing.agent))
        except AnswerValidationError as exc:
            if exc.request is None:
                raise
            return held(token, {**exc.request, "problem": exc.detail})  # still held: ask again, same token

    async def reporting(self, ctx: Context, call: Awaitable[Any], agent: bool = True) -> Any:
        """Await ``call``; its events become coalesced progress notifications when the caller can hear them.

        A caller that asked for no progress and can take no log messages gets
        none of the machinery (``orchestrator.progress``).
        """
        if not wants_reports(ctx, agent):
            return await call
        return await self.reporters.report(ctx, call)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The ``inputSchema`` of ``name`` as the latest listing has it (None: not listed yet).

        The SDK's lookup for checking ``Mcp-Param-*`` headers: without it, the
        SDK would run ``tools/list`` before every 2026-era HTTP call. It reads
        the listing only, never a file, as it runs on the event loop.
        """
        latest = self._latest
        listing = latest[1].get(name) if latest is not None else None
        return listing.schema if listing is not None and listing.offer.as_tool else None

    def options(
        self, listing: Listing, arguments: dict[str, Any], env: dict[str, Any], caller: Caller
    ) -> tuple[Any, dict[str, Any]]:
        """The args for one call (the caller's ``$`` options still in them) and the server's own options.

        The engine checks the caller's ``$`` options (``orchestrator.callers``);
        the server adds its envelope and caps ``$timeout`` by ``max_timeout``.
        A wrapped schema's ``$`` options travel beside ``value``; when the value
        is not a mapping they cannot ride in it, so they are checked here.

        Raises:
            ArgsValidationError: a wrapped schema's ``value`` is missing.
            SecurityError, InvocationError: ``$`` options beside a plain value that the rules refuse.
        """
        args: Any = _decoded(arguments, listing.ref)
        server: dict[str, Any] = {"context": {"envelope": env}}
        if listing.wrapped:
            if "value" not in arguments:
                raise ArgsValidationError([("", "missing required property 'value'")], tool=listing.ref)
            value = arguments["value"]
            dollars = {k: v for k, v in arguments.items() if k.startswith("$")}
            if isinstance(value, Mapping):
                args = {**value, **dollars}  # the top-level $ options win
            else:
                args = value
                _, asked = extract_options(dollars, listing.ref, None, None, None, None)
                check_untrusted(listing.ref, asked, caller)
                server.update({k: v for k, v in asked.items() if v is not None and k != "context"})
                server["context"] = {**(asked["context"] or {}), "envelope": env}
        requested = args.get("$timeout") if isinstance(args, Mapping) else server.get("timeout")
        server["timeout"] = self.timeout(requested)
        return args, server

    def timeout(self, requested: Any) -> Any:
        """``requested`` capped by ``max_timeout``; ``max_timeout`` when none is requested."""
        if self.max_timeout is None:
            return requested
        if requested is None:
            return self.max_timeout
        if isinstance(requested, (int, float)) and not isinstance(requested, bool) and requested > 0:
            return min(requested, self.max_timeout)
        return requested  # not a timeout: the engine says so

    async def on_initialized(self, ctx: Context, params: types.NotificationParams) -> None:
        """A handshake session is ready: watch the tools for it until it closes.

        The SDK runs notification handlers in the connection's task group and
        cancels them when the connection ends, so this handler is the
        session's background task.
        """
        from anyio import BrokenResourceError, ClosedResourceError

        async def changed() -> None:
            await ctx.session.send_tool_list_changed()
            await ctx.session.send_prompt_list_changed()

        try:
            await self.watch(changed, await self.polled())
        except (BrokenResourceError, ClosedResourceError):
            log.debug("session closed; stopped watching the tools")

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era ``subscriptions/listen`` stream, watching the tools while it is open."""
        from mcp.server.subscriptions import (
            InMemorySubscriptionBus,
            ListenHandler,
            PromptsListChanged,
            ToolsListChanged,
        )

        bus = InMemorySubscriptionBus()  # one per stream: each stream has its own watcher
        stream = ListenHandler(bus)
        wanted = params.notifications
        if not (wanted.tools_list_changed or wanted.prompts_list_changed):
            return await stream(ctx, params)

        async def changed() -> None:
            await bus.publish(ToolsListChanged())
            await bus.publish(PromptsListChanged())

        seen = await self.polled()  # before the ack: a change the client makes after it is never missed
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.watch, changed, seen)
            try:
                result = await stream(ctx, params)
            finally:
                tg.cancel_scope.cancel()
        return result


class Served(Container[str]):
    """The tools an MCP caller may call and name as middleware: the one it called, and those listed and still servable.

    Membership is checked when asked (a tool hidden since the listing is no
    longer in), in O(1) whatever the number of tools.
    """

    __slots__ = ("service", "served", "called")

    def __init__(self, service: Service, served: Mapping[str, Listing], called: str) -> None:
        self.service = service
        self.served = served
        self.called = called

    def __contains__(self, ref: object) -> bool:
        if ref == self.called:
            return True
        if not isinstance(ref, str):
            return False
        listed = self.served.get(wire_name(ref))
        if listed is None or listed.ref != ref:
            return False
        now = self.service.servable(ref)
        return now is not None and now.offer.as_tool


def reply(listing: Listing, result: Any) -> types.CallToolResult:
    """The result of a call: typed when the tool has ``returns`` (``orchestrator.results``)."""
    if listing.output is None:
        return success(result)
    return typed(result, listing.returns, listing.output_wrapped, listing.ref)


def served_names(served: Mapping[str, Listing]) -> str:
    """The tool names an unknown-tool error lists: the first ``SHOWN_NAMES`` in order, and how many more."""
    tools = [name for name, listing in served.items() if listing.offer.as_tool]
    first = heapq.nsmallest(SHOWN_NAMES, tools)
    more = len(tools) - len(first)
    return ", ".join(first) + (f" and {more} more" if more else "") if first else "no tools"


def _decoded(arguments: dict[str, Any], ref: str) -> dict[str, Any]:
    """``$context``/``$middleware``/``$overrides`` given as JSON text (the MCP Inspector sends them so) decoded.

    Raises:
        InvocationError: the text is not JSON.
    """
    found = {
        k: v for k, v in arguments.items() if k in ("$context", "$middleware", "$overrides") and isinstance(v, str)
    }
    if not found:
        return arguments
    decoded = dict(arguments)
    for key, text in found.items():
        try:
            decoded[key] = json.loads(text)
        except json.JSONDecodeError as exc:
            detail = f"{key} is text but not JSON: {exc.msg} at column {exc.colno}"
            raise InvocationError(detail, tool=ref, key=key) from None
    return decoded


def build_server(
    manager: Manager,
    *,
    allow_overrides: bool = False,
    allow_sessions: bool = False,
    max_timeout: float | None = None,
    poll_interval: float = POLL_INTERVAL,
    stateless_http: bool = False,
) -> Server[State]:
    """The MCP SDK server (low-level ``mcp.server.lowlevel.Server``) serving ``manager``'s tools.

    Run it yourself (``server.run(read, write, server.create_initialization_options())``,
    ``server.streamable_http_app()``) or connect to it in-process with ``mcp.Client(server)``.

    ``allow_sessions`` lets callers continue stored conversations with
    ``$context.session`` (session ids are names, not secrets: allow it only
    for clients that may read each other's conversations).

    ``stateless_http=True`` when you serve it with
    ``server.streamable_http_app(stateless_http=True)``: no session ids are
    handed out then, and an ``Mcp-Session-Id`` a client sends is not taken
    as its identity (``serve`` passes it for you).

    Raises:
        ConfigurationError: ``max_timeout`` is not a positive number.
    """
    from mcp.server.caching import CacheHint
    from mcp.types import NotificationParams

    service = Service(
        manager,
        allow_overrides=allow_overrides,
        allow_sessions=allow_sessions,
        max_timeout=max_timeout,
        poll_interval=poll_interval,
        stateless_http=stateless_http,
    )
    server = server_class()(
        "toolcascade",
        version=__version__,
        lifespan=lifespan,
        cache_hints={"tools/list": CacheHint(ttl_ms=0), "prompts/list": CacheHint(ttl_ms=0)},  # lists follow the files
        get_tool_input_schema=service.input_schema,
        on_list_tools=service.list_tools,
        on_call_tool=service.call_tool,
        on_list_prompts=functools.partial(prompts.list_prompts, service),
        on_get_prompt=functools.partial(prompts.get_prompt, service),
        on_completion=service.complete,
        on_list_resources=functools.partial(resources.list_resources, service),
        on_list_resource_templates=functools.partial(resources.list_templates, service),
        on_read_resource=functools.partial(resources.read_resource, service),
        on_subscriptions_listen=service.listen,
    )
    server.add_notification_handler("notifications/initialized", NotificationParams, service.on_initialized)
    return server


def serve(
    manager: Manager,
    *,
    http: str | None = None,
    allow_overrides: bool = False,
    allow_sessions: bool = False,
    max_timeout: float | None = None,
    poll_interval: float = POLL_INTERVAL,
    stateless: bool = True,
    token: str | None = None,
) -> None:
    """Serve ``manager``'s tools over MCP until the client leaves (stdio) or Ctrl-C (HTTP).

    ``http="127.0.0.1:8000"`` serves streamable HTTP at ``http://127.0.0.1:8000/mcp``,
    bound to that host only; without it, the server speaks on stdin/stdout.
    HTTP is ``stateless`` by default: no ``Mcp-Session-Id``, so replicas behind
    any round-robin balancer answer any request (docs/scaling.md). A
    handshake-era client's name then reaches only its initialize request, and
    ``tools/list_changed`` is not pushed; ``stateless=False`` keeps sessions
    for one process serving clients that need them.

    ``token``: HTTP requests must bear it (``Authorization: Bearer``); any
    other gets ``401`` and reaches no tool (``orchestrator.authorization``).

    Raises:
        ConfigurationError: a malformed ``http`` address or ``max_timeout``, or a ``token`` without ``http``.
    """
    if token is not None and http is None:
        raise ConfigurationError(
            "a bearer token applies to HTTP only: stdio is reached only by the process that starts it"
        )
    server = build_server(
        manager,
        allow_overrides=allow_overrides,
        allow_sessions=allow_sessions,
        max_timeout=max_timeout,
        poll_interval=poll_interval,
        stateless_http=http is not None and stateless,
    )
    try:
        if http is None:
            anyio.run(serve_stdio, server)
        else:
            host, port = parse_address(http)
            run_http(server, host, port, stateless, token)  # uvicorn runs on asyncio only (uvloop's when installed)
    except KeyboardInterrupt:
        pass
