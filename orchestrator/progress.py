"""Progress of an MCP call: its events as progress notifications and log messages, coalesced, to a caller that asked.

**Only when asked.** A call gets a ``Reporter`` only when its caller can hear
one (``wants_reports``): the request carries a progress token, or the tool
called is an agent (it has a ``model``: its tool calls' starts and ends are
log messages) and log messages can reach the caller (always on handshake-era
sessions; on 2026-era ones only when the request opted in with a log level; in-process 2026-era
connections show the server no token, so they always get one). Any other call runs with
no progress machinery at all, and the server listens to the manager's events
only while some call is reported (``Reporters``), so unreported calls build
no events either.

**Coalesced.** A reporter sends at most one progress notification per
``INTERVAL`` (0.1 s): what happened meanwhile goes out together, the answer's
text deltas joined into one piece and other messages on lines of their own.
The sender task starts with the first message (in the connection's task
group, so a call that reports nothing starts none) and sends at once, and
whatever is pending when the call ends is always sent before its result.
Tool starts and ends are also log messages (``notifications/message``,
logger ``toolcascade``), sent at the same moments, one per event.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio

from .events import Event

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from mcp.server.context import ServerRequestContext

    from .manager import Manager

    Context = ServerRequestContext[dict[str, Any], Any]

log = logging.getLogger("orchestrator.mcp")

INTERVAL = 0.1  # seconds between two progress notifications of one call, at least

PROGRESS: ContextVar[Reporter | None] = ContextVar("toolcascade_mcp_progress", default=None)
"""The reporter of the MCP call being served (set while it runs), for its events."""


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


def wants_reports(ctx: Context, agent: bool = True) -> bool:
    """Whether anything the call reports can reach its caller: a progress token, or log messages it would take.

    Log messages say when an agent's tool calls start and end: a call of a
    tool that is not an agent (``agent`` False) has none to send.
    """
    log_level_key, modern, served_over = _protocol()
    meta = ctx.meta or {}
    if meta.get("progress_token") is not None:
        return True
    if ctx.protocol_version not in modern:
        return agent  # handshake era: log messages may always be sent
    if ctx.request is None and served_over.get() is None:
        return True  # in-process 2026-era (mcp.Client(server)): the SDK hands progress to the caller's callback
    return agent and log_level_key in meta


@functools.cache
def _protocol() -> tuple[str, Any, ContextVar[Any]]:
    """What ``wants_reports`` reads of the SDK and the transports, imported once (it runs on every served call)."""
    from mcp.types import LOG_LEVEL_META_KEY
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from .transports import SERVED_OVER

    return LOG_LEVEL_META_KEY, MODERN_PROTOCOL_VERSIONS, SERVED_OVER


def joined(parts: list[tuple[bool, str]]) -> str:
    """One message for pending ``(is_text, message)`` parts: adjacent text deltas joined, other messages on lines."""
    pieces: list[str] = []
    text = False
    for is_text, message in parts:
        if is_text and text:
            pieces[-1] += message
        else:
            pieces.append(message)
        text = is_text
    return "\n".join(pieces)


class Reporter:
    """The progress of one MCP call: pending messages, and the sender that sends them at most every ``INTERVAL``.

    ``push`` is called synchronously from the call's tasks (events). The
    sender task is started in ``tasks`` (the connection's task group) on the
    first message only, so a call that reports nothing starts no task. From
    another thread ``push`` only queues, and the next event or the end of
    the call sends what it queued.
    """

    def __init__(self, ctx: Context, tasks: TaskGroup) -> None:
        self.ctx = ctx
        self.tasks = tasks
        self.token = (ctx.meta or {}).get("progress_token")
        self.parts: list[tuple[bool, str]] = []  # (a text delta, the message), pending
        self.logs: list[tuple[bool, str]] = []  # (failed, the message), pending
        self.wake = anyio.Event()
        self.count = 0  # progress notifications sent
        self.gone = False  # the client left or refused a notification: send no more
        self.thread = threading.get_ident()
        self.started = False
        self.closed = False
        self.scope: anyio.CancelScope | None = None
        self.done = anyio.Event()

    def push(self, event: Event) -> None:
        message = progress_message(event)
        if message is None or self.closed:
            return
        self.parts.append((event.kind == "model.delta", message))
        if event.kind in ("tool.start", "tool.end"):
            self.logs.append((bool(event.data.get("error")), message))
        if threading.get_ident() == self.thread:
            if not self.started:
                self.started = True
                self.tasks.start_soon(self.run)
            self.wake.set()

    async def run(self) -> None:
        """Send what is pending whenever something is, then wait ``INTERVAL``; until ``stop``."""
        try:
            with anyio.CancelScope() as self.scope:
                while not self.closed:
                    await self.wake.wait()
                    self.wake = anyio.Event()
                    await self.flush()
                    await anyio.sleep(INTERVAL)
        finally:
            self.done.set()

    async def stop(self) -> None:
        """Stop the sender (a send in progress ends first), then send what is still pending: the last message."""
        self.closed = True
        if self.started:
            if self.scope is not None:
                self.scope.cancel()
            await self.done.wait()
        await self.flush()

    async def flush(self) -> None:
        """Send the pending messages: one progress notification, and a log message per tool start or end."""
        parts, self.parts = self.parts, []
        logs, self.logs = self.logs, []
        if self.gone or not (parts or logs):
            return
        ctx = self.ctx
        try:
            with anyio.CancelScope(shield=True):  # taken from the queue: never lost half-sent
                if parts:
                    self.count += 1
                    message = joined(parts)
                    if self.token is not None:
                        await ctx.session.send_progress_notification(
                            self.token, self.count, None, message, _request_id(ctx)
                        )
                    else:
                        await ctx.session.report_progress(self.count, None, message)
                for failed, line in logs:
                    await _log(ctx, failed, line)
        except Exception:  # the client left or refused: the call itself goes on
            self.gone = True
            log.debug("progress notification not sent", exc_info=True)


class Reporters:
    """The calls being reported on one manager; its events are listened to only while there is one."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.active = 0

    def on_event(self, event: Event) -> None:
        """Hand an event to the reporter of the MCP call it belongs to (a ContextVar says which)."""
        reporter = PROGRESS.get()
        if reporter is not None:
            reporter.push(event)

    async def report(self, ctx: Context, call: Any) -> Any:
        """Await ``call`` while its events become progress notifications; the last ones are sent before returning.

        The sender runs in the connection's task group (``transports.lifespan``
        keeps one as ``tasks``), or in one of the call's own when the server
        was built with another lifespan.
        """
        state = ctx.lifespan_context
        tasks = state.get("tasks") if isinstance(state, Mapping) else None
        if tasks is None:
            async with anyio.create_task_group() as group:
                outcome = await self._reported(ctx, call, group)
        else:
            outcome = await self._reported(ctx, call, tasks)
        if isinstance(outcome, _Failed):
            raise outcome.error
        return outcome

    async def _reported(self, ctx: Context, call: Any, tasks: TaskGroup) -> Any:
        reporter = Reporter(ctx, tasks)
        listeners = self.manager.events.listeners
        if self.active == 0 and self.on_event not in listeners:
            listeners.append(self.on_event)
        self.active += 1
        token = PROGRESS.set(reporter)
        try:
            try:
                outcome = await call
            except Exception as exc:  # re-raised by report, outside any task group, unwrapped
                outcome = _Failed(exc)
            finally:
                with anyio.CancelScope(shield=True):
                    await reporter.stop()  # the last one is always sent, before the result
        finally:
            PROGRESS.reset(token)
            self.active -= 1
            if self.active == 0 and self.on_event in listeners:
                listeners.remove(self.on_event)
        return outcome


class _Failed:
    """A call's exception, carried out of the task group it was raised in."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


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
