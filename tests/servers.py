"""Helpers for tests that start a server on 127.0.0.1: a process, or a tiny HTTP/1.1 server in the test."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Terminate a server process, killing it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def fakellm_http(url: str, method: str = "GET") -> dict[str, Any]:
    """A tiny stdlib client for fakellm's control endpoints (``/_fakellm/stats``, ``/_fakellm/reset``)."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"{}")  # type: ignore[no-any-return]


@contextmanager
def fakellm_server(folder: Path, rules: Any) -> Iterator[str]:
    """A real fakellm (an OpenAI- and Anthropic-compatible server) on 127.0.0.1 with ``rules``; yields its URL."""
    import yaml

    config = folder / "rules.yaml"
    config.write_text(yaml.safe_dump(rules))
    port = free_port()
    exe = Path(sys.executable).parent / "fakellm"
    process = subprocess.Popen(
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--config", str(config)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            fakellm_http(f"{base}/_fakellm/stats")
            break
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("fakellm did not start") from None
            time.sleep(0.1)
    try:
        yield base
    finally:
        stop(process)


def listening(process: subprocess.Popen, port: int, seconds: float) -> bool:  # type: ignore[type-arg]
    """Wait until ``process`` accepts connections on 127.0.0.1:``port``; False if it exits or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)


# -- a tiny HTTP/1.1 model server, for what fakellm cannot answer ------------------------------

Reply = Callable[[anyio.abc.ByteStream], Awaitable[None]]


class Server:
    """An HTTP/1.1 server answering request N with reply N (the last reply repeats); it records every request."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        try:
            async with stream:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += await stream.receive()
                head, _, body = data.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                while len(body) < int(headers.get("content-length", 0)):
                    body += await stream.receive()
                self.requests.append(
                    {"path": lines[0].split(" ")[1], "headers": headers, "body": json.loads(body or b"null")}
                )
                reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
                await reply(stream)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client gave up (its timeout): nothing to answer


@asynccontextmanager
async def serve(*replies: Reply) -> AsyncIterator[Server]:
    server = Server(list(replies))
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server.url = f"http://127.0.0.1:{port}"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.handle)
        try:
            yield server
        finally:
            group.cancel_scope.cancel()
