"""How the MCP server is reached: stdio, or streamable HTTP (stateless by default), and a session id per connection."""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio

from .errors import ConfigurationError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    State = dict[str, Any]

log = logging.getLogger("orchestrator.mcp")

SERVED_OVER: ContextVar[str | None] = ContextVar("toolcascade_mcp_transport", default=None)
"""``"stdio"`` or ``"http"`` inside ``serve_stdio`` and ``serve_http``; None for a server run in-process."""


@asynccontextmanager
async def lifespan(server: Server[State]) -> AsyncIterator[State]:
    """Entered once per stdio (or in-process) connection, once per app over HTTP.

    ``tasks`` is where calls start their progress senders (``orchestrator.progress``):
    a task group that lives as long as the connection (or app), so a call starts
    one only when it has something to report.
    """
    async with anyio.create_task_group() as tasks:
        yield {"session": secrets.token_hex(8), "tasks": tasks}
        tasks.cancel_scope.cancel()


@functools.cache
def server_class() -> type[Server[State]]:
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.models import InitializationOptions

    class ToolServer(Server[dict[str, Any]]):
        """The SDK server, advertising ``tools.listChanged`` and ``prompts.listChanged`` to handshake clients."""

        def create_initialization_options(
            self,
            notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None,
        ) -> InitializationOptions:
            return super().create_initialization_options(
                notification_options or NotificationOptions(tools_changed=True, prompts_changed=True),
                experimental_capabilities,
                extensions,
            )

    return ToolServer


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


async def serve_stdio(server: Server[State]) -> None:
    from mcp.server.stdio import stdio_server

    SERVED_OVER.set("stdio")  # this task's context, inherited by the server's tasks
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_http(server: Server[State], host: str, port: int, stateless: bool = True, token: str | None = None) -> None:
    """``serve_http`` until a signal ends it, on uvloop when it is installed (as ``uvicorn.run`` chooses by default).

    On asyncio's own loop the same request took about 12% more server CPU.
    uvloop takes the signal wakeup fd for itself, so each signal uvicorn
    handles is passed on to the fd that was set before (``exits.ending_within``
    learns of SIGTERM through it), as CPython would have written it.
    """
    import importlib.util
    import signal

    if importlib.util.find_spec("uvloop") is None:
        anyio.run(serve_http, server, host, port, stateless, token)
        return
    try:
        relay = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(relay, warn_on_full_buffer=False)
    except ValueError:  # not the main thread: signals are someone else's
        relay = -1
    anyio.run(serve_http, server, host, port, stateless, token, relay, backend_options={"use_uvloop": True})


async def serve_http(
    server: Server[State], host: str, port: int, stateless: bool = True, token: str | None = None, relay: int = -1
) -> None:
    """Serve streamable HTTP at ``/mcp``; with ``token``, only requests bearing it (``orchestrator.authorization``).

    ``relay``: a file descriptor told of each signal uvicorn handles (see ``run_http``).
    """
    import os

    import uvicorn

    from .authorization import StaticToken, settings

    class Relaying(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if relay >= 0:
                try:
                    os.write(relay, bytes([sig]))
                except OSError:
                    pass  # nobody listens any more
            super().handle_exit(sig, frame)

    SERVED_OVER.set("http")
    # One process per container, scaled by replicas: stateless, any replica answers any request.
    if token is None:
        app = server.streamable_http_app(host=host, stateless_http=stateless)
    else:
        auth, verifier = settings(host, port), StaticToken(token)
        app = server.streamable_http_app(host=host, stateless_http=stateless, auth=auth, token_verifier=verifier)
    config = uvicorn.Config(app, host=host, port=port, access_log=False, lifespan="on")
    log.info("serving MCP on http://%s:%d/mcp", host, port)
    await Relaying(config).serve()
