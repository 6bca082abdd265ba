"""Progress of an MCP call: its events as progress notifications and log messages to the caller."""

from __future__ import annotations

import logging
import warnings
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .events import Event

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    Context = ServerRequestContext[dict[str, Any], Any]

log = logging.getLogger("orchestrator.mcp")

PROGRESS: ContextVar[MemoryObjectSendStream[Event] | None] = ContextVar("toolcascade_mcp_progress", default=None)
"""The progress stream of the MCP call being served (set while it runs), for its events."""


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


async def report_progress(ctx: Context, events: MemoryObjectReceiveStream[Event]) -> None:
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
