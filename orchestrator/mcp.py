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

The SDK (toolcascade's ``mcp`` extra) is imported by ``build_server``
and ``serve`` only: importing this module stays cheap.
"""

from __future__ import annotations

import functools
import heapq
import json
import logging
import math
import os
import re
import secrets
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Container, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from . import __version__, approval
from .approval import Decision, Denier
from .callers import Caller, check_untrusted
from .errors import (
    ArgsValidationError,
    ConfigurationError,
    Interrupted,
    InvocationError,
    OrchestratorError,
    ToolNotFoundError,
    describe,
)
from .events import Event
from .manager import Manager
from .options import extract_options
from .registry import builtin_folder
from .schema import object_schema
from .tool import wire_name

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    State = dict[str, Any]
    Context = ServerRequestContext[State, Any]

log = logging.getLogger("orchestrator.mcp")

POLL_INTERVAL = 1.0
MAX_NAME = 128  # SEP-986
ASKS = 3  # elicitations per held call before a still-unreadable answer denies it
LISTING_SHARE = 4  # a listing is reused for at least this many times what it took
SHOWN_NAMES = 20  # served names an unknown-tool error lists
SERVER_PATH = "<server path>"  # what an error result says instead of a path outside the served folders
_PATH = re.compile(r"(?<![\w.~/:-])(?:file://)?/[^\s'\"`,;:()\[\]{}<>|]+")
APPROVAL = "approval"  # the key of the elicitation in an input_required result


@dataclass(frozen=True, slots=True)
class Listing:
    """One served tool: the ref it invokes, and what ``tools/list`` says about it."""

    ref: str
    name: str
    description: str | None
    schema: dict[str, Any]
    wrapped: bool  # the schema is params wrapped as ``value``

    def key(self) -> tuple[str, str | None, str]:
        """What a client sees: a change here is a list change."""
        return self.name, self.description, json.dumps(self.schema, sort_keys=True)


def envelope(ctx: Context) -> dict[str, Any]:
    """The caller identity and transport data a call's ``ctx.envelope`` carries.

    ``client`` is the ``clientInfo`` the client sent (at ``initialize``, or in a
    2026-era request's ``_meta``): a claim, not an identity. ``session`` is
    the identity: the HTTP ``Mcp-Session-Id``, or an id per stdio (or
    in-process) connection; ``None`` over stateless HTTP, where nothing tells
    one caller from another (the ``cache`` tool keeps nothing for such a
    caller unless told ``shared: true``). ``request_id`` names the request,
    not the caller: every client's first call has the same one.
    """
    client = None
    params = ctx.session.client_params
    if params is not None:
        client = {"name": params.client_info.name, "version": params.client_info.version}
    headers = getattr(ctx.request, "headers", None)
    if headers is not None:
        session = headers.get("mcp-session-id")
    else:  # stdio and in-process: the lifespan is per connection
        session = ctx.lifespan_context.get("session")
    return {
        "transport": "mcp",
        "client": client,
        "session": session,
        "request_id": ctx.request_id,
        "protocol_version": ctx.protocol_version,
    }


class Service:
    """What the MCP server serves: the listing, the call policy, the list watcher."""

    def __init__(
        self,
        manager: Manager,
        *,
        allow_overrides: bool = False,
        allow_sessions: bool = False,
        max_timeout: float | None = None,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        if max_timeout is not None and not (isinstance(max_timeout, (int, float)) and max_timeout > 0):
            raise ConfigurationError(f"max_timeout must be a positive number of seconds, not {max_timeout!r}")
        self.manager = manager
        self.allow_overrides = allow_overrides
        self.allow_sessions = allow_sessions
        self.max_timeout = max_timeout
        self.poll_interval = poll_interval
        self._reported: set[tuple[str, str]] = set()
        self._latest: tuple[float, dict[str, Listing]] | None = None  # (when, what) of the last listing
        self._cost = 0.0  # seconds the last listing took
        self.paths = ServedPaths(manager)
        self._keys: tuple[dict[str, Listing], list[tuple[str, str | None, str]]] | None = None
        self._running: _Run | None = None  # the listing in progress on a worker thread
        self._failing: str | None = None  # the listing failure last logged (None after a success)

    # -- listing ---------------------------------------------------------------

    def listing(self) -> dict[str, Listing]:
        """Every servable tool by MCP name, listed afresh; problems are logged once each.

        Blocking (the full ``manager.list_tools`` pass): the server runs it
        through ``relist``, on a worker thread; it keeps nothing itself.

        Raises:
            OrchestratorError: the tools cannot be listed at all (a ``FolderLimitError``).
        """
        served: dict[str, Listing] = {}
        for info in self.manager.list_tools():
            if info.error is not None:
                self._report(info.ref, f"not served: {info.error}")
                continue
            name = wire_name(info.ref)
            if name in served:
                self._report(info.ref, f"not served: its MCP name {name!r} is taken by {served[name].ref!r}")
                continue
            if len(name) > MAX_NAME:
                self._report(info.ref, f"not served: its MCP name is longer than {MAX_NAME} characters")
                continue
            try:
                schema, wrapped = object_schema(info.params)
            except ValueError as exc:
                self._report(info.ref, f"not served: {exc}")
                continue
            served[name] = Listing(info.ref, name, info.description, schema, wrapped)
        return served

    async def relist(self) -> dict[str, Listing]:
        """A new listing, made on a worker thread and kept as the latest; one at a time.

        While a listing runs, every other caller awaits its result (or its
        error) instead of starting a second one. A failure is logged once
        until a listing succeeds again.

        Raises:
            OrchestratorError: the tools cannot be listed at all (a ``FolderLimitError``).
        """
        while True:
            run = self._running
            if run is None:
                run = self._running = _Run()
                started = time.monotonic()
                try:
                    run.served = await anyio.to_thread.run_sync(self.listing)
                except OrchestratorError as exc:
                    run.error = exc
                    if describe(exc) != self._failing:
                        self._failing = describe(exc)
                        log.error("the tools cannot be listed: %s", self._failing)
                finally:
                    self._running = None
                    run.done.set()
                if run.served is not None:
                    now = time.monotonic()
                    self._cost = now - started
                    self._latest = (now, run.served)
                    self._failing = None
            else:
                await run.done.wait()
            if run.error is not None:
                raise run.error
            if run.served is not None:
                return run.served
            # the listing ended without a result (its thread raised something else): list again

    async def recent(self) -> dict[str, Listing]:
        """The latest listing while it is fresh enough to share (see the module docstring), else a new one."""
        latest = self._latest
        shared_for = max(self.poll_interval / 2, LISTING_SHARE * self._cost)
        if latest is not None and time.monotonic() - latest[0] < shared_for:
            return latest[1]
        return await self.relist()

    async def resolve(self, name: str) -> tuple[Listing | None, dict[str, Listing]]:
        """The served tool a call to ``name`` runs (None: not served), and the latest listing.

        A name the latest listing has re-checks its own tool only; one it
        lacks is looked up as a ref; only a name neither finds lists again
        (or reuses a listing fresh enough to share).

        Raises:
            OrchestratorError: a listing was needed and the tools cannot be listed.
        """
        latest = self._latest
        if latest is not None and name in latest[1]:
            listing, served = self._recheck(latest[1][name], latest)
            if listing is not None:
                return listing, served
            latest = self._latest  # not served as listed: another ref may read as the name now
        found = self._direct(name)
        if found is not None:
            return found, latest[1] if latest is not None else {}
        served = await self.recent()
        return served.get(name), served

    def servable(self, ref: str) -> Listing | None:
        """How ``ref`` would be listed now, or None when it is not served (missing, broken, hidden, unnamable)."""
        try:
            info = self.manager.describe(ref)
            schema, wrapped = object_schema(info.params)
        except (OrchestratorError, ValueError):
            return None
        name = wire_name(ref)
        if info.hidden or len(name) > MAX_NAME:
            return None
        return Listing(ref, name, info.description, schema, wrapped)

    def _recheck(
        self, listed: Listing, latest: tuple[float, dict[str, Listing]]
    ) -> tuple[Listing | None, dict[str, Listing]]:
        """``listed`` as it is now; a change since is written into a copy of the latest listing (watchers see it)."""
        now = self.servable(listed.ref)
        if now == listed:
            return listed, latest[1]
        served = dict(latest[1])
        if now is None:
            del served[listed.name]
        else:
            served[listed.name] = now
        if self._latest is latest:
            self._latest = (latest[0], served)
        return now, served

    def _direct(self, name: str) -> Listing | None:
        """The servable tool whose ref ``name`` reads as (``__`` as ``/``, or the name itself), when exactly one is."""
        found = [
            listing
            for ref in {name.replace("__", "/"), name}
            if (listing := self.servable(ref)) is not None and listing.name == name
        ]
        return found[0] if len(found) == 1 else None

    def _report(self, ref: str, message: str) -> None:
        if (ref, message) not in self._reported:  # the watcher lists every second: say it once
            self._reported.add((ref, message))
            log.warning("tool %r %s", ref, message)

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """The served tools; a JSON-RPC error naming the cause when they cannot be listed (module docstring)."""
        import mcp.types as types
        from mcp.shared.exceptions import MCPError

        latest = self._latest
        try:
            if latest is not None and time.monotonic() - latest[0] < LISTING_SHARE * self._cost:
                served = latest[1]
            else:
                served = await self.relist()
        except OrchestratorError as exc:
            raise MCPError(types.INTERNAL_ERROR, self.paths.shown(describe(exc))) from None
        tools = [types.Tool(name=t.name, description=t.description, input_schema=t.schema) for t in served.values()]
        return types.ListToolsResult(tools=tools)

    # -- calls -----------------------------------------------------------------

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            listing, served = await self.resolve(params.name)
        except OrchestratorError as exc:  # no listing to find the name in: say why
            why = f"the served tools cannot be listed: {describe(exc)}"
            return self.failure(ToolNotFoundError(params.name, reason=why))
        if listing is None:  # an isError result, as for any other failure, so the model can read it
            return self.failure(ToolNotFoundError(params.name, reason=f"this server serves {served_names(served)}"))
        try:
            if params.request_state is not None:  # a 2026-era retry answering an approval
                return await self.resumed(ctx, listing, params)
            caller = Caller(
                "MCP callers",
                Served(self, served, listing.ref),
                self.allow_overrides,
                sessions=self.allow_sessions,
                switch="--allow-",  # named in a refusal of $overrides or a session
            )
            args, options = self.options(listing, params.arguments or {}, envelope(ctx), caller)
            with approval.asking(self.approver(ctx, listing.ref)):
                result = await self.reporting(ctx, self.manager.invoke(listing.ref, args, caller=caller, **options))
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
        return success(result)

    def failure(self, exc: Exception, ref: str | None = None) -> types.CallToolResult:
        """The error result for ``exc``, its paths named as the client may see them; the log keeps them in full.

        ``ref``: log the full text when paths were hidden (a tool's own bug is logged already, without it).
        """
        full = describe(exc)
        shown = self.paths.shown(full)
        if ref is not None and shown != full:
            log.warning("call of %r failed: %s", ref, full)
        return failure(shown)

    def approver(self, ctx: Context, ref: str) -> approval.Approver | None:
        """Who decides the calls this request holds: the client's user, or a denial saying why not.

        None on a 2026-era session whose client can answer elicitations: the
        call suspends and the client is asked through ``input_required``.
        """
        capabilities = ctx.session.client_capabilities
        asked = capabilities.elicitation if capabilities is not None else None
        if asked is None or (asked.form is None and asked.url is not None):
            return Denier(
                f"tool {ref!r} needs approval, and this MCP client cannot give it: it did not declare the "
                "elicitation capability",
                "the MCP server",
            )
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
        return success(await self.reporting(ctx, self.manager.resume(token, decision, ref=listing.ref)))

    async def reporting(self, ctx: Context, call: Awaitable[Any]) -> Any:
        """Await ``call`` while its events become progress notifications to a caller that asked for them.

        Events reach ``on_event`` from the call's own tasks; a ContextVar tells
        them which call they belong to. What the call does is the message:
        ``calling weather``, ``weather done``, ``asking the model (iteration 2)``,
        and the answer's text as it streams; tool starts and ends are also log
        messages (``notifications/message``, logger ``toolcascade``).
        """
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        outcome: list[Any] = []
        if self.on_event not in self.manager.events.listeners:
            self.manager.events.listeners.append(self.on_event)
        token = _progress.set(send)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_report, ctx, receive)
                try:
                    outcome.append(await call)
                except Exception as exc:  # re-raised outside the task group, unwrapped
                    outcome.append(exc)
                finally:
                    send.close()
        finally:
            _progress.reset(token)
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    def on_event(self, event: Event) -> None:
        """Hand an event to the progress stream of the MCP call it belongs to, if that call asked for progress."""
        stream = _progress.get()
        if stream is not None:
            stream.send_nowait(event)

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
                raise ArgsValidationError([("", "'value' is a required property")], tool=listing.ref)
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

    # -- watching ----------------------------------------------------------------

    async def watch(
        self, notify: Callable[[], Awaitable[None]], seen: list[tuple[str, str | None, str]] | None
    ) -> None:
        """Poll the tool set and call ``notify`` each time it differs from ``seen``, until cancelled.

        ``seen`` None: the tools could not be listed when the watch began.
        """
        while True:
            await anyio.sleep(self.poll_interval)
            now = await self.polled()
            if now is not None and now != seen:
                seen = now
                await notify()

    async def polled(self) -> list[tuple[str, str | None, str]] | None:
        """The ``snapshot``, or None when the tools cannot be listed now (``relist`` logs that once)."""
        try:
            return await self.snapshot()
        except OrchestratorError:
            return None
        except Exception:  # a listing bug must not end the session's notifications
            log.exception("listing the tools failed")
            return None

    async def snapshot(self) -> list[tuple[str, str | None, str]]:
        """What clients see of the tool set; sessions polling together share one listing per half interval.

        Raises:
            OrchestratorError: the tools cannot be listed.
        """
        served = await self.recent()
        if self._keys is None or self._keys[0] is not served:
            self._keys = (served, [listing.key() for listing in served.values()])
        return self._keys[1]

    async def on_initialized(self, ctx: Context, params: types.NotificationParams) -> None:
        """A handshake session is ready: watch the tools for it until it closes.

        The SDK runs notification handlers in the connection's task group and
        cancels them when the connection ends, so this handler is the
        session's background task.
        """
        from anyio import BrokenResourceError, ClosedResourceError

        try:
            await self.watch(ctx.session.send_tool_list_changed, await self.polled())
        except (BrokenResourceError, ClosedResourceError):
            log.debug("session closed; stopped watching the tools")

    async def listen(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-era ``subscriptions/listen`` stream, watching the tools while it is open."""
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

        bus = InMemorySubscriptionBus()  # one per stream: each stream has its own watcher
        stream = ListenHandler(bus)
        if not params.notifications.tools_list_changed:
            return await stream(ctx, params)
        seen = await self.polled()  # before the ack: a change the client makes after it is never missed
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.watch, functools.partial(bus.publish, ToolsListChanged()), seen)
            try:
                result = await stream(ctx, params)
            finally:
                tg.cancel_scope.cancel()
        return result


class _Run:
    """A listing in progress: set ``done`` when it ends, with its ``served`` tools or its ``error``."""

    __slots__ = ("done", "served", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.served: dict[str, Listing] | None = None
        self.error: OrchestratorError | None = None


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
        return listed is not None and listed.ref == ref and self.service.servable(ref) is not None


def served_names(served: Mapping[str, Listing]) -> str:
    """The names an unknown-tool error lists: the first ``SHOWN_NAMES`` in order, and how many more."""
    first = heapq.nsmallest(SHOWN_NAMES, served)
    more = len(served) - len(first)
    return ", ".join(first) + (f" and {more} more" if more else "") if first else "no tools"


_progress: ContextVar[MemoryObjectSendStream[Event] | None] = ContextVar("toolcascade_mcp_progress", default=None)


def progress_message(event: Event) -> str | None:
    """What a progress notification says about ``event``, or None for events a client need not see."""
    data = event.data
    if event.kind == "tool.start":
        return f"calling {data.get('call')}"
    if event.kind == "tool.end":
        return f"{data.get('call')} done" if data.get("error") is None else f"{data.get('call')} failed"
    if event.kind == "model.request":
        return f"asking the model (iteration {event.iteration})"
    if event.kind == "model.delta" and data.get("text"):
        return str(data["text"])
    if event.kind == "approval.request":
        return f"waiting for approval of {event.tool}"
    return None


async def _report(ctx: Context, events: MemoryObjectReceiveStream[Event]) -> None:
    """Send each event worth a message as a progress notification; a client gone away only stops them.

    A handshake-era caller names a progress token in the request's ``_meta``;
    a 2026-era one gets the request-scoped progress its client asked for (the
    SDK sends nothing when it did not).
    """
    token = (ctx.meta or {}).get("progress_token")
    count = 0
    async with events:
        async for event in events:
            message = progress_message(event)
            if message is None:
                continue
            count += 1
            try:
                if token is not None:
                    await ctx.session.send_progress_notification(token, count, None, message, _request_id(ctx))
                else:
                    await ctx.session.report_progress(count, None, message)
                if event.kind in ("tool.start", "tool.end"):
                    await _log(ctx, bool(event.data.get("error")), message)
            except Exception:  # the client left or refused: the call itself goes on
                log.debug("progress notification not sent", exc_info=True)
                return


async def _log(ctx: Context, failed: bool, message: str) -> None:
    """A log message about the call (tool starts and ends) for clients that take them.

    The SDK sends it as the protocol era says: always on handshake-era sessions,
    on 2026-era ones only when the request opted in (logging is deprecated
    there, SEP-2577, so its warning is expected and silenced).
    """
    from mcp.shared.exceptions import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if failed:
            await ctx.session.send_log_message("warning", message, "toolcascade", _request_id(ctx))
        else:
            await ctx.session.send_log_message("info", message, "toolcascade", _request_id(ctx))


def _request_id(ctx: Context) -> str | None:
    """The id of the request being served, as the SDK relates notifications to it."""
    return None if ctx.request_id is None else str(ctx.request_id)


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
    """
    if answer is None or getattr(answer, "action", None) != "accept":
        why = getattr(answer, "action", None) or "no answer"
        return Decision("deny", reason=f"the MCP client's user did not approve ({why})"), None
    content = getattr(answer, "content", None) or {}
    if content.get("approve") is not True:
        reason = content.get("reason")
        return Decision("deny", reason=str(reason) if reason else "the MCP client's user denied it"), None
    text = content.get("args")
    if batch or not isinstance(text, str) or not text.strip():
        return Decision("approve"), None
    try:
        edited = json.loads(text)
    except json.JSONDecodeError as exc:
        return Decision("deny"), f"the arguments are not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(edited, dict):
        return Decision("deny"), "the arguments must be a JSON object"
    return Decision("edit", args=edited), None


class Elicitor:
    """The approver of one handshake-era MCP call: asks the client's user with an ``elicitation/create`` form."""

    label = "the MCP client"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

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
    """The 2026-era answer to a held call: an elicitation to fulfil, and the token to retry with."""
    import mcp.types as types

    message, schema = question(request)
    ask = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    return types.InputRequiredResult(input_requests={APPROVAL: ask}, request_state=token)


def success(result: Any) -> types.CallToolResult:
    """A string as text; anything else as JSON text, plus ``structuredContent`` for an object."""
    from mcp.types import CallToolResult, TextContent

    if isinstance(result, str):
        return CallToolResult(content=[TextContent(text=result)])
    if isinstance(result, Mapping):
        result = dict(result)
    text = json.dumps(result, ensure_ascii=False, default=str)
    structured = json.loads(text) if isinstance(result, dict) else None
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def failure(text: str) -> types.CallToolResult:
    """An ``isError`` result: ``text``, the error described on one line (``"<ErrorType>: <message>"``)."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=text)], is_error=True)


class ServedPaths:
    """How error texts sent to MCP clients name the server's files (see the module docstring).

    Served folders and the built-ins are replaced by what they are (longest
    first, so a folder inside another is named from the inner one); then any
    other absolute path under one of the file system's top-level entries is
    ``SERVER_PATH``. A JSON pointer (``/name``) is not such a path and stays.
    """

    __slots__ = ("names", "known", "top")

    def __init__(self, manager: Manager) -> None:
        builtins = {str(builtin_folder(kind).resolve()): f"built-in {kind}" for kind in ("tools", "authorities")}
        roots = {sp.folder: builtins.get(sp.folder) for sp in manager.paths} | builtins
        self.names: dict[str, str | None] = roots  # None: a served folder (its files are named relative to it)
        ordered = sorted(roots, key=len, reverse=True)
        self.known = re.compile(rf"(?:file://)?({'|'.join(map(re.escape, ordered))})(/|(?![\w.-]))")
        try:
            self.top = frozenset(os.listdir("/"))
        except OSError:
            self.top = frozenset()

    def shown(self, text: str) -> str:
        """``text`` with the server's paths named relative to the served folders, or hidden."""
        return _PATH.sub(self._hidden, self.known.sub(self._relative, text))

    def _relative(self, match: re.Match[str]) -> str:
        root, slash = match.group(1), match.group(2)
        name = self.names[root]
        if name is None:  # a served folder: its files relative to it, itself by its own name
            return "" if slash else os.path.basename(root)
        return name + slash

    def _hidden(self, match: re.Match[str]) -> str:
        found = match.group(0)
        parts = found.removeprefix("file://").strip("/").split("/")
        return SERVER_PATH if len(parts) >= 2 and parts[0] in self.top else found


@asynccontextmanager
async def _lifespan(server: Server[State]) -> AsyncIterator[State]:
    # Entered once per stdio (or in-process) connection, once per app over HTTP.
    yield {"session": secrets.token_hex(8)}


@functools.cache
def _server_class() -> type[Server[State]]:
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.models import InitializationOptions

    class ToolServer(Server[dict[str, Any]]):
        """The SDK server, advertising ``tools.listChanged`` to handshake clients on every transport."""

        def create_initialization_options(
            self,
            notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None,
        ) -> InitializationOptions:
            return super().create_initialization_options(
                notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
            )

    return ToolServer


def build_server(
    manager: Manager,
    *,
    allow_overrides: bool = False,
    allow_sessions: bool = False,
    max_timeout: float | None = None,
    poll_interval: float = POLL_INTERVAL,
) -> Server[State]:
    """The MCP SDK server (low-level ``mcp.server.lowlevel.Server``) serving ``manager``'s tools.

    Run it yourself (``server.run(read, write, server.create_initialization_options())``,
    ``server.streamable_http_app()``) or connect to it in-process with ``mcp.Client(server)``.

    ``allow_sessions`` lets callers continue stored conversations with
    ``$context.session`` (session ids are names, not secrets: allow it only
    for clients that may read each other's conversations).

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
    )
    server = _server_class()(
        "toolcascade",
        version=__version__,
        lifespan=_lifespan,
        cache_hints={"tools/list": CacheHint(ttl_ms=0)},  # the list follows the files
        on_list_tools=service.list_tools,
        on_call_tool=service.call_tool,
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
) -> None:
    """Serve ``manager``'s tools over MCP until the client leaves (stdio) or Ctrl-C (HTTP).

    ``http="127.0.0.1:8000"`` serves streamable HTTP at ``http://127.0.0.1:8000/mcp``,
    bound to that host only; without it, the server speaks on stdin/stdout.
    HTTP is ``stateless`` by default: no ``Mcp-Session-Id``, so replicas behind
    any round-robin balancer answer any request (docs/scaling.md). A
    handshake-era client's name then reaches only its initialize request, and
    ``tools/list_changed`` is not pushed; ``stateless=False`` keeps sessions
    for one process serving clients that need them.

    Raises:
        ConfigurationError: a malformed ``http`` address or ``max_timeout``.
    """
    server = build_server(
        manager,
        allow_overrides=allow_overrides,
        allow_sessions=allow_sessions,
        max_timeout=max_timeout,
        poll_interval=poll_interval,
    )
    try:
        if http is None:
            anyio.run(_serve_stdio, server)
        else:
            host, port = parse_address(http)
            anyio.run(_serve_http, server, host, port, stateless)  # uvicorn runs on asyncio only
    except KeyboardInterrupt:
        pass


def parse_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:8000"`` -> ``("127.0.0.1", 8000)``; ``"[::1]:8000"`` -> ``("::1", 8000)``.

    Raises:
        ConfigurationError: not ``HOST:PORT`` with a port from 0 to 65535.
    """
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigurationError(f"the HTTP address must be HOST:PORT (like 127.0.0.1:8000), not {address!r}")
    return host, int(port)


async def _serve_stdio(server: Server[State]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _serve_http(server: Server[State], host: str, port: int, stateless: bool = True) -> None:
    import uvicorn

    # One process per container, scaled by replicas: stateless, any replica answers any request.
    app = server.streamable_http_app(host=host, stateless_http=stateless)
    config = uvicorn.Config(app, host=host, port=port, access_log=False, lifespan="on")
    log.info("serving MCP on http://%s:%d/mcp", host, port)
    await uvicorn.Server(config).serve()
