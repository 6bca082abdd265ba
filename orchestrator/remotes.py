"""The MCP client's connections: one session per server entry, pooled, on a loop of its own.

``Pool`` keeps one ``ClientSession`` (the official ``mcp`` SDK, the ``mcp``
extra, imported only here and only when a server is first used) per server
entry (``ServerSpec``). Sessions live on one asyncio event loop in a thread
of the pool's own (an anyio blocking portal): a session is bound to the task
that opened it, and callers come from any loop (asyncio or trio, and
``invoke_sync`` makes a new loop per call). A caller waits for its request
in a worker thread it may abandon, so a cancelled call never blocks its loop.

- **stdio**: the server is started by the SDK in a process group of its own,
  with only the variables the entry names plus the SDK's login basics
  (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``); the SDK
  stops the group when the session ends.
- **streamable HTTP**: ``headers`` as given, and ``Authorization: Bearer``
  from the variable ``bearer-token-env`` names, read when connecting (never
  from a template, never from args).

A connection that drops (the process exits, the stream closes) is opened
again on the next use. ``tools/list`` is cached per connection until the
server sends ``notifications/tools/list_changed``; ``on_change`` is then
called (the registry drops the remote tools it built from the old list).
``close()`` ends every session and the loop (``Manager.close()`` calls it).

Every failure is a ``RemoteToolError`` naming the server and the tool. A
result's media (an image, audio, an embedded binary resource) is bounded,
each value, by the calling Manager's ``Limits.media_bytes`` as local media is
(``orchestrator.mediaparts``): a ``MediaLimitError`` naming the tool, the
value's place in the server's ``content`` (``content[1]``) and the limit,
judged from the base64 text's length before anything is decoded.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from .errors import ConfigurationError, InvocationError, RemoteToolError
from .mediaparts import check_encoded

DEFAULT_TIMEOUT = 60.0
"""Seconds a server has to start, list its tools or answer a call, unless its entry sets ``timeout``."""
DEFAULT_MAX_RESULT = 16_000_000
"""Bytes a result may hold (its text, structured content and base64 data), unless the entry sets ``max-result``."""
STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "timeout", "max-result"})
HTTP_KEYS = frozenset({"url", "headers", "bearer-token-env", "timeout", "max-result"})


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One ``mcp-servers`` entry, checked: a stdio ``command`` or an HTTP ``url``.

    ``env`` holds (name, value) pairs: the literal values the entry gives and
    the program's values of the names it lists. ``token_env`` is the variable
    holding the bearer token, read when connecting.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    token_env: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_result: int = DEFAULT_MAX_RESULT

    @property
    def starts_process(self) -> bool:
        """True for a stdio server: using it starts a program."""
        return self.command is not None

    @property
    def sends_secret(self) -> bool:
        """True when using it sends something the program holds: headers, a bearer token, environment values."""
        return bool(self.headers or self.token_env or self.env)


def parse_server(name: str, entry: Any, tool: str | None = None) -> ServerSpec:
    """The ``ServerSpec`` of ``mcp-servers.NAME``.

    Raises:
        ConfigurationError: not a mapping, neither or both of ``command`` and ``url``, an unknown key
            (with "did you mean"), or a value of the wrong type.
    """
    key = f"mcp-servers.{name}"

    def bad(message: str) -> ConfigurationError:
        return ConfigurationError(f"{key}: {message}", tool=tool, key=key)

    if not isinstance(entry, Mapping):
        raise bad("must be a mapping with a command (stdio) or a url (streamable HTTP)")
    if ("command" in entry) == ("url" in entry):
        raise bad("give exactly one of command (a program to start, over stdio) and url (streamable HTTP)")
    known = STDIO_KEYS if "command" in entry else HTTP_KEYS
    for field_name in entry:
        if field_name not in known:
            from difflib import get_close_matches

            near = get_close_matches(str(field_name), sorted(STDIO_KEYS | HTTP_KEYS), 1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; the keys are {', '.join(sorted(known))}"
            raise bad(f"unknown key {field_name!r}{hint}")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise bad("timeout must be a positive number of seconds")
    limit = entry.get("max-result", DEFAULT_MAX_RESULT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise bad("max-result must be a positive number of bytes")
    if "command" in entry:
        return ServerSpec(
            name,
            command=_text(entry["command"], bad, "command"),
            args=tuple(_text(a, bad, "args") for a in _list(entry.get("args", []), bad, "args")),
            env=_env(entry.get("env", {}), bad),
            cwd=None if entry.get("cwd") is None else _text(entry["cwd"], bad, "cwd"),
            timeout=float(timeout),
            max_result=limit,
        )
    headers = entry.get("headers", {})
    if not isinstance(headers, Mapping):
        raise bad("headers must be a mapping of header names to strings")
    token = entry.get("bearer-token-env")
    return ServerSpec(
        name,
        url=_text(entry["url"], bad, "url"),
        headers=tuple((str(k), _text(v, bad, "headers")) for k, v in headers.items()),
        token_env=None if token is None else _text(token, bad, "bearer-token-env"),
        timeout=float(timeout),
        max_result=limit,
    )


def _text(value: Any, bad: Callable[[str], ConfigurationError], what: str) -> str:
    if not isinstance(value, str) or not value:
        raise bad(f"{what} must be a non-empty string")
    return value


def _list(value: Any, bad: Callable[[str], ConfigurationError], what: str) -> list[Any]:
    if not isinstance(value, list):
        raise bad(f"{what} must be a list of strings")
    return value


def _env(value: Any, bad: Callable[[str], ConfigurationError]) -> tuple[tuple[str, str], ...]:
    """``env``: a mapping of names to values, or a list of names passed on from the program's environment."""
    if isinstance(value, list):
        return tuple((n, os.environ[n]) for n in (_text(n, bad, "env") for n in value) if n in os.environ)
    if isinstance(value, Mapping):
        return tuple((str(k), _text(v, bad, "env")) for k, v in value.items())
    raise bad("env must be a mapping of names to values, or a list of names to pass on")


@dataclass
class _Connection:
    """One open session and what it keeps: its tool list, the task holding it, how it ended."""

    session: Any = None
    tools: dict[str, Any] | None = None
    ended: Any = None  # anyio.Event, set when the session is gone
    stop: Any = None  # anyio.Event the pool sets to end the session
    failure: str | None = None  # why the session ended, when it was not asked to
    pending: set[Any] = field(default_factory=set)  # the cancel scopes of calls in flight
    opening: Any = None  # the cancel scope of the task holding the session: ends a server that never answers


class Pool:
    """The sessions of one Manager's remote tools (see the module docstring)."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self.on_change = on_change
        self._lock = threading.Lock()
        self._portal: Any = None
        self._portal_cm: Any = None
        self._connections: dict[ServerSpec, _Connection] = {}
        self._group: Any = None
        self._done: Any = None
        self.closed = False

    # -- the loop ------------------------------------------------------------------

    def _get_portal(self) -> Any:
        with self._lock:
            if self.closed:
                raise InvocationError("the MCP client pool is closed: make a new Manager to call remote tools")
            if self._portal is None:
                from anyio.from_thread import start_blocking_portal

                self._portal_cm = start_blocking_portal("asyncio")
                self._portal = self._portal_cm.__enter__()
                self._portal.start_task(self._supervise)
            return self._portal

    async def _supervise(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The task group sessions live in (they outlive the call that opened them), until ``close``."""
        self._done = anyio.Event()
        async with anyio.create_task_group() as group:
            self._group = group
            task_status.started()
            await self._done.wait()
            group.cancel_scope.cancel()

    def close(self) -> None:
        """End every session (stopping stdio servers) and the pool's loop; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            portal, manager = self._portal, self._portal_cm
        if portal is None:
            return
        try:
            portal.call(self._close_all)
        finally:
            manager.__exit__(None, None, None)

    async def _close_all(self) -> None:
        for conn in list(self._connections.values()):
            conn.stop.set()
            if conn.session is None and conn.opening is not None:  # still in initialize: it will never see stop
                conn.opening.cancel()
        with anyio.move_on_after(10):
            for conn in list(self._connections.values()):
                await conn.ended.wait()
        self._connections.clear()
        self._done.set()

    # -- what callers use ------------------------------------------------------------

    def list_tools(self, spec: ServerSpec) -> dict[str, Any]:
        """The server's tools by name (``mcp.types.Tool``), cached until it says they changed. Blocking.

        Raises:
            RemoteToolError: the server did not start, timed out or crashed.
        """
        portal = self._get_portal()
        return portal.call(self._tools, spec)  # type: ignore[no-any-return]

    def list_each(self, specs: Sequence[ServerSpec]) -> list[dict[str, Any] | RemoteToolError]:
        """Each server's tools (as ``list_tools``), the servers started side by side; a failure is its error. Blocking.

        Each server has its own ``timeout`` to start and list its tools; one that fails never stops the others.
        """
        return self._get_portal().call(self._each, list(specs))  # type: ignore[no-any-return]

    async def call(self, spec: ServerSpec, remote: str, args: Mapping[str, Any], tool: str, media_bytes: int) -> Any:
        """Call ``remote`` on the server with ``args``; the result as ``convert`` makes it.

        ``media_bytes`` bounds each media value of the result (the calling Manager's ``Limits.media_bytes``).

        Raises:
            RemoteToolError: did not start, timed out, crashed mid-call, answered an error, invalid JSON-RPC,
                a result over ``max-result``, a resource blob that is not base64.
            MediaLimitError: a media value over ``media_bytes``.
        """
        portal = self._get_portal()
        future: Future[Any] = portal.start_task_soon(self._call, spec, remote, dict(args), tool, media_bytes)
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            future.cancel()
            raise

    # -- on the pool's loop ------------------------------------------------------------

    async def _connection(self, spec: ServerSpec, remote: str | None) -> _Connection:
        conn = self._connections.get(spec)
        if conn is not None and not conn.stop.is_set() and not conn.ended.is_set():
            return conn
        conn = _Connection(ended=anyio.Event(), stop=anyio.Event())
        self._connections[spec] = conn
        ready = anyio.Event()
        errors: list[BaseException] = []
        self._group.start_soon(self._hold, spec, conn, ready, errors)
        with anyio.move_on_after(spec.timeout) as scope:
            await ready.wait()
        if scope.cancelled_caught:
            conn.stop.set()
            if conn.opening is not None:
                conn.opening.cancel()  # the server stops now, not when the pool closes
            raise RemoteToolError(
                f"MCP server {spec.name!r} did not answer initialize within {spec.timeout:g} s",
                server=spec.name,
                remote=remote,
                reason="timeout",
            )
        if errors:
            raise RemoteToolError(
                f"MCP server {spec.name!r} did not start: {_describe(errors[0])}",
                server=spec.name,
                remote=remote,
                reason="start",
            ) from errors[0]
        return conn

    async def _hold(self, spec: ServerSpec, conn: _Connection, ready: Any, errors: list[BaseException]) -> None:
        """Open the session, keep it until asked to stop or it drops, then close it (in this one task)."""
        from mcp import ClientSession

        async def handle(message: Any) -> None:
            method = getattr(getattr(message, "root", message), "method", None)
            if method == "notifications/tools/list_changed":
                conn.tools = None
                if self.on_change is not None:
                    self.on_change()

        errlog = open(os.devnull, "w")  # noqa: SIM115 - a stdio server's stderr, for the session's life
        try:
            with anyio.CancelScope() as conn.opening:
                async with _transport(spec, errlog) as streams, anyio.create_task_group() as group:
                    relayed = _relay(streams[0], conn, group)
                    async with ClientSession(relayed, streams[1], message_handler=handle) as s:
                        await s.initialize()
                        conn.session = s
                        ready.set()
                        await conn.stop.wait()
                    group.cancel_scope.cancel()
        except BaseException as exc:  # noqa: BLE001 - reported to the waiter or the call in flight
            if not ready.is_set():
                errors.append(exc)
            elif conn.failure is None and not conn.stop.is_set():
                conn.failure = f"closed the connection ({_describe(exc)})"
            if not isinstance(exc, Exception):
                raise
        finally:
            errlog.close()
            if conn.failure is None and not conn.stop.is_set():
                conn.failure = "closed the connection"
            conn.ended.set()
            ready.set()
            for scope in list(conn.pending):
                scope.cancel()

    async def _each(self, specs: list[ServerSpec]) -> list[dict[str, Any] | RemoteToolError]:
        found: list[dict[str, Any] | RemoteToolError] = [{} for _ in specs]

        async def one(index: int, spec: ServerSpec) -> None:
            try:
                found[index] = await self._tools(spec)
            except RemoteToolError as exc:
                found[index] = exc

        async with anyio.create_task_group() as group:
            for index, spec in enumerate(specs):
                group.start_soon(one, index, spec)
        return found

    async def _tools(self, spec: ServerSpec, remote: str | None = None) -> dict[str, Any]:
        conn = await self._connection(spec, remote)
        if conn.tools is None:
            from mcp.types import PaginatedRequestParams

            listed: dict[str, Any] = {}
            cursor = None
            try:
                with anyio.fail_after(spec.timeout):
                    while True:
                        page = await conn.session.list_tools(
                            params=PaginatedRequestParams(cursor=cursor) if cursor else None
                        )
                        listed.update((t.name, t) for t in page.tools)
                        cursor = page.next_cursor
                        if not cursor:
                            break
            except TimeoutError:
                raise RemoteToolError(
                    f"MCP server {spec.name!r} did not list its tools within {spec.timeout:g} s",
                    server=spec.name,
                    remote=remote,
                    reason="timeout",
                ) from None
            except Exception as exc:
                reason = _reason(conn.failure) if conn.failure is not None else "error"
                raise RemoteToolError(
                    f"MCP server {spec.name!r} could not list its tools: {conn.failure or _describe(exc)}",
                    server=spec.name,
                    remote=remote,
                    reason=reason,
                ) from exc
            conn.tools = listed
        return conn.tools

    async def _call(self, spec: ServerSpec, remote: str, args: dict[str, Any], tool: str, media_bytes: int) -> Any:
        conn = await self._connection(spec, remote)

        def failed(reason: str, message: str) -> RemoteToolError:
            return RemoteToolError(
                f"MCP server {spec.name!r}, tool {remote!r}: {message}",
                server=spec.name,
                remote=remote,
                reason=reason,
                tool=tool,
            )

        with anyio.CancelScope() as scope:
            conn.pending.add(scope)
            try:
                with anyio.fail_after(spec.timeout):
                    result = await conn.session.call_tool(remote, args)
            except TimeoutError:
                raise failed("timeout", f"no answer within {spec.timeout:g} s") from None
            except Exception as exc:
                if conn.failure is not None:
                    raise failed(_reason(conn.failure), f"the server {conn.failure} mid-call") from exc
                raise failed("error", f"the call failed: {_describe(exc)}") from exc
            finally:
                conn.pending.discard(scope)
        if scope.cancelled_caught:
            raise failed(_reason(conn.failure or ""), f"the server {conn.failure or 'closed the connection'} mid-call")
        size = _size(result)
        if size > spec.max_result:
            raise failed("too-large", f"the result holds {size} bytes, more than max-result ({spec.max_result})")
        if getattr(result, "is_error", False):
            raise failed("error", f"the tool answered an error: {_texts(result) or '(no text)'}")
        try:
            return convert(result, media_bytes, tool)
        except binascii.Error as exc:
            raise failed("protocol", f"sent a resource blob that is not base64 ({exc})") from exc


def _relay(source: Any, conn: _Connection, group: Any) -> Any:
    """What ``source`` receives, passed on; when it ends (the server exited), the calls in flight fail at once.

    The SDK's session leaves a request waiting when its server's stream ends; this ends them and the session.
    """
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def relay() -> None:
        async with send:
            try:
                async for message in source:
                    if isinstance(message, Exception):  # a line the transport could not parse as JSON-RPC
                        conn.failure = f"sent something that is not valid JSON-RPC ({_describe(message)})"
                        for scope in list(conn.pending):
                            scope.cancel()
                    await send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
        if not conn.stop.is_set():
            conn.failure = conn.failure or "exited"
            for scope in list(conn.pending):
                scope.cancel()
            conn.stop.set()

    group.start_soon(relay)
    return receive


def _reason(failure: str) -> str:
    return "protocol" if "JSON-RPC" in failure else "crashed"


def _transport(spec: ServerSpec, errlog: Any) -> Any:
    """The SDK transport for ``spec``: an async context manager of (read, write) streams."""
    if spec.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env), cwd=spec.cwd)
        return stdio_client(params, errlog=errlog)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = dict(spec.headers)
    if spec.token_env is not None:
        token = os.environ.get(spec.token_env)
        if not token:
            raise ConfigurationError(
                f"mcp-servers.{spec.name}: bearer-token-env names {spec.token_env!r}, which is not set: "
                f"export {spec.token_env}=...",
                key=f"mcp-servers.{spec.name}",
            )
        headers["Authorization"] = f"Bearer {token}"
    timeout = httpx2.Timeout(spec.timeout, read=max(spec.timeout, 300.0))
    client = httpx2.AsyncClient(headers=headers, timeout=timeout)
    return _owning(client, streamable_http_client(spec.url or "", http_client=client))


class _owning:
    """``streamable_http_client`` with the httpx client it was given, closed after it."""

    def __init__(self, client: Any, inner: Any) -> None:
        self.client, self.inner = client, inner

    async def __aenter__(self) -> Any:
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            await self.client.aclose()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _texts(result: Any) -> str:
    return "\n".join(p.text for p in getattr(result, "content", []) or [] if getattr(p, "type", None) == "text")


def _size(result: Any) -> int:
    size = 0
    for part in getattr(result, "content", []) or []:
        size += len(getattr(part, "text", "") or "") + len(getattr(part, "data", "") or "")
        resource = getattr(part, "resource", None)
        if resource is not None:
            size += len(getattr(resource, "text", "") or "") + len(getattr(resource, "blob", "") or "")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        size += len(json.dumps(structured, default=str))
    return size


def convert(result: Any, media_bytes: int, tool: str | None = None) -> Any:
    """A ``CallToolResult`` as a tool result: ``structuredContent`` as the dict, else its content.

    One text part is a str; otherwise a list with a str per text part and a
    media part dict per image, audio or embedded binary resource
    (``{"type": "media", "kind", "media_type", "data"}``, as
    ``orchestrator.agent.media`` documents); an embedded text resource is its
    text, a resource link ``{"type": "resource_link", "uri", "name"}``.

    Raises:
        MediaLimitError: a media value over ``media_bytes`` (``tool`` and its place, ``content[N]``, named).
        binascii.Error: a resource blob that is not base64.
    """
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    parts: list[Any] = []
    for index, part in enumerate(result.content or []):
        kind = getattr(part, "type", None)
        where = {"tool": tool, "key": f"content[{index}]"}
        if kind == "text":
            parts.append(part.text)
        elif kind in ("image", "audio"):
            check_encoded(part.data, f"the {kind} the remote tool returned", media_bytes, where)
            parts.append({"type": "media", "kind": kind, "media_type": part.mime_type, "data": part.data})
        elif kind == "resource":
            resource = part.resource
            if getattr(resource, "blob", None) is not None:
                media = resource.mime_type or "application/octet-stream"
                check_encoded(resource.blob, "the resource the remote tool returned", media_bytes, where)
                base64.b64decode(resource.blob, validate=True)  # what goes on is base64, or nothing
                parts.append({"type": "media", "kind": "file", "media_type": media, "data": resource.blob})
            else:
                parts.append(resource.text)
        elif kind == "resource_link":
            parts.append({"type": "resource_link", "uri": str(part.uri), "name": part.name})
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts
