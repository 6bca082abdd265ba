"""The SDK clients of the HTTP providers: one per provider configuration and event loop, kept by the Manager.

Building an ``AsyncOpenAI`` or ``AsyncAnthropic`` client creates a TLS
context (about 70 ms), so a client is made once and reused across requests,
runs and invocations. Its key is what makes two clients the same: the SDK,
the base URL, the variable the key is read from and the timeouts, never the
key itself (a changed key gets a copy of the client that shares its
connections).

A client's connections belong to the event loop they were opened on, and
``Manager.invoke_sync`` runs each call in a new loop, so there is one client
per configuration *per running loop*; the TLS context, the expensive part,
is shared by all of them. A client lives as long as the shorter of its
loop and its Manager: a keeper task in the loop closes it there when the
loop ends (``asyncio.run`` cancels every task, trio its system tasks), or
when ``Manager.close()`` asks it to. A loop that has already ended closed
its own clients, so ``close()`` never raises.

``model-call`` tells the providers whose clients to use with
``keeping(ctx.owner)`` around its model request, so an agent's requests and
a program invoking ``model-call`` itself reuse the Manager's client.
A request made outside one (a program calling a provider's ``complete``
directly) or after the Manager closed gets a client of its own, closed after
the request.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .protocol import Setting

if TYPE_CHECKING:
    from ..manager import Manager

log = logging.getLogger("orchestrator.agent")

CLOSE_WAIT = 5.0
"""Seconds ``close()`` waits for a running loop (in another thread) to close its client."""

_KEEPER: ContextVar[Manager | None] = ContextVar("model_clients", default=None)


def keeping(manager: Manager) -> Setting[Manager | None]:
    """``with keeping(manager):`` model requests made inside the block reuse ``manager``'s clients
    (``Manager.resource``)."""
    return Setting(_KEEPER, manager)


Make = Callable[[str, Any], Any]
"""Builds an SDK client from the key and a TLS context (None: the SDK makes its own)."""


def kept_client(key: tuple[Any, ...], api_key: str, make: Make, tls: Callable[[], Any]) -> Any | None:
    """The client the Manager of ``keeping`` keeps for ``key`` in the running loop (made on first use), or None.

    None outside ``keeping`` or once that Manager is closed: then ``leased``
    makes a client of the request's own. The agent's requests take this
    path, without an async context manager around it.
    """
    manager = _KEEPER.get()
    if manager is None or manager.closed:
        return None
    clients = manager.resource(("model-client", *key), lambda: Clients(make, tls))
    return clients.client(api_key)


@asynccontextmanager
async def leased(key: tuple[Any, ...], api_key: str, make: Make, tls: Callable[[], Any]) -> AsyncIterator[Any]:
    """The client for ``key`` in the running loop: the kept one, or one of its own closed on exit.

    ``key`` names the configuration (never a secret); ``make(api_key, tls)``
    builds a client and ``tls()`` the TLS context its loops share.
    """
    kept = kept_client(key, api_key, make, tls)
    if kept is not None:
        yield kept
        return
    async with make(api_key, None) as client:
        yield client


class Clients:
    """One provider configuration's clients, one per running event loop, closed with the Manager."""

    def __init__(self, make: Make, tls: Callable[[], Any]) -> None:
        self.make = make
        self.make_tls = tls
        self.tls: Any = None
        self.lock = threading.Lock()
        self.loops: weakref.WeakKeyDictionary[Any, _Kept] = weakref.WeakKeyDictionary()
        self.made = 0

    def client(self, api_key: str) -> Any:
        """The client of the running loop, made on first use, with ``api_key``."""
        native = anyio.lowlevel.current_token().native_token
        with self.lock:
            kept = self.loops.get(native)
            if kept is None or kept.closed.is_set():
                if self.tls is None:
                    self.tls = self.make_tls()
                kept = self.loops[native] = _Kept(self.make(api_key, self.tls), api_key, native, self.forget)
                self.made += 1
                kept.start()
            elif kept.api_key != api_key:  # the variable now holds another key: same connections, new key
                kept.client, kept.api_key = kept.client.copy(api_key=api_key), api_key
            return kept.client

    def forget(self, native: Any) -> None:
        """Drop a loop's entry once its client is closed (the entry holds the loop)."""
        with self.lock:
            kept = self.loops.get(native)
            if kept is not None and kept.closed.is_set():
                del self.loops[native]

    def close(self) -> None:
        """Have every loop's keeper close its client; wait (bounded) for those running in other threads."""
        with self.lock:
            kept = list(self.loops.values())
            self.loops.clear()
        for one in kept:
            one.stop()


def tls_context(sdk: Any) -> Any:
    """A TLS context as the SDK's own HTTP library makes it (its CA bundle, ``SSL_CERT_FILE``), or None."""
    for cls in getattr(getattr(sdk, "DefaultAsyncHttpxClient", None), "__mro__", ()):
        library = sys.modules.get(cls.__module__.partition(".")[0])  # httpx, or the fork the SDK uses
        create = getattr(library, "create_ssl_context", None)
        if create is not None:
            return create()
    return None


class _Kept:
    """A loop's client and the keeper task that closes it in that loop."""

    __slots__ = ("client", "api_key", "native", "forget", "thread", "scope", "closed", "task")

    def __init__(self, client: Any, api_key: str, native: Any, forget: Callable[[Any], None]) -> None:
        self.client = client
        self.api_key = api_key
        self.native = native  # the asyncio loop, or trio's token
        self.forget = forget
        self.thread = threading.get_ident()
        self.scope = anyio.CancelScope()
        self.closed = threading.Event()
        self.task: Any = None

    def start(self) -> None:
        """Start the keeper in the running loop (a task asyncio cancels at shutdown; a trio system task)."""
        if isinstance(self.native, asyncio.AbstractEventLoop):
            self.task = self.native.create_task(self.keep())  # held here: asyncio keeps tasks weakly
        else:
            import trio

            trio.lowlevel.spawn_system_task(self.keep)

    async def keep(self) -> None:
        try:
            with self.scope:
                await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.client.close()
                except Exception:  # a keeper must not fail its loop (trio would crash on a system task's error)
                    log.debug("closing a model client failed", exc_info=True)
            self.closed.set()
            self.forget(self.native)

    def stop(self) -> None:
        """Cancel the keeper from any thread; wait for it when its loop runs in another thread."""
        try:
            if isinstance(self.native, asyncio.AbstractEventLoop):
                self.native.call_soon_threadsafe(self.scope.cancel)
                running = self.native.is_running()
            else:
                self.native.run_sync_soon(self.scope.cancel)
                running = True
        except RuntimeError:  # the loop is closed (trio: RunFinishedError): its keeper closed the client then
            return
        if running and threading.get_ident() != self.thread:
            self.closed.wait(CLOSE_WAIT)
