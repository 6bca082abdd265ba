"""MCP serving speed (issue 27): toolcascade's server beside the SDK's own ``MCPServer``, in one run.

Both servers serve the same trivial tool (``echo``: its ``text`` back) as
subprocesses, and the official ``mcp`` client calls them, turn about, in the
same process run, so a loaded machine loads both alike:

- streamable HTTP (stateless, a real port on 127.0.0.1): per-call latency of
  sequential calls, median over rounds;
- stdio: calls per second, ``CONCURRENCY`` calls in flight, median over rounds;
- both: the server process's CPU time per call (user + system, from
  ``/proc``), which a loaded machine barely changes while it stretches
  every wall-clock figure.

    .venv/bin/python -m bench.mcp_latency [--calls 50] [--rounds 20] [--mode auto|legacy]

Prints a small markdown table and the two ratios against the targets of
issue 27: HTTP latency at most 1.2x the SDK's, stdio throughput at least 0.9x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

HTTP_TARGET = 1.2  # toolcascade's HTTP latency over the SDK's, at most
STDIO_TARGET = 0.9  # toolcascade's stdio calls per second over the SDK's, at least
CONCURRENCY = 8  # stdio calls in flight while throughput is measured
START_SECONDS = 60.0

ECHO = """frontmatter = {
    "description": "Echoes its text.",
    "metadata": {"params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
}


async def main(ctx):
    return ctx.args["text"]
"""

OURS = (
    "import sys; from orchestrator import Manager; from orchestrator.mcp import serve; "
    "serve(Manager([sys.argv[1]]), http=None if sys.argv[2] == '-' else sys.argv[2])"
)
THEIRS = """
import sys
import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("baseline")


@server.tool(structured_output=False)
async def echo(text: str) -> str:
    \"\"\"Echoes its text.\"\"\"
    return text


if sys.argv[2] == "-":
    server.run("stdio")
else:
    import uvicorn

    host, port = sys.argv[2].rsplit(":", 1)
    app = server.streamable_http_app(stateless_http=True, host=host)
    uvicorn.run(app, host=host, port=int(port), access_log=False, log_level="warning")
"""


@dataclass(frozen=True, slots=True)
class Server:
    """One server under test: its label and the command line that starts it with a folder and an address."""

    label: str
    code: str

    def argv(self, folder: Path, address: str) -> list[str]:
        return [sys.executable, "-c", self.code, str(folder), address]


SERVERS = (Server("MCPServer (SDK)", THEIRS), Server("toolcascade", OURS))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children() -> set[int]:
    """The pids of this process's child processes (from ``/proc``; empty where there is none)."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(entry.parent.name))
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds ``pid`` has used (0 where ``/proc`` cannot say)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    import socket

    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start (exit {process.poll()})") from None
            time.sleep(0.05)


async def timed_sequential(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Milliseconds per call, ``calls`` calls one after another."""
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls * 1e3


async def timed_concurrent(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Calls per second, ``calls`` calls with ``CONCURRENCY`` in flight."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(CONCURRENCY):
            group.start_soon(worker)
    return calls / (time.perf_counter() - started)


async def measure(folder: Path, calls: int, rounds: int, mode: str) -> dict[tuple[str, str], list[float]]:
    """Every server over both transports, a round of each in turn; the figures of each round.

    Keys: ``(label, "http")`` ms per call, ``(label, "stdio")`` calls per second, and
    ``(label, "http cpu")`` / ``(label, "stdio cpu")`` the server's CPU µs per call.
    """
    from mcp import Client, StdioServerParameters

    figures: dict[tuple[str, str], list[float]] = {}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        async with AsyncExitStack() as stack:
            clients: dict[tuple[str, str], Any] = {}
            pids: dict[tuple[str, str], int] = {}
            for server in SERVERS:
                port = free_port()
                process = subprocess.Popen(
                    server.argv(folder, f"127.0.0.1:{port}"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
                processes.append(process)
                pids[(server.label, "http")] = process.pid
                await anyio.to_thread.run_sync(wait_listening, process, port)
                url = f"http://127.0.0.1:{port}/mcp"
                clients[(server.label, "http")] = await stack.enter_async_context(Client(url, mode=mode))
                before = children()
                params = StdioServerParameters(command=sys.executable, args=server.argv(folder, "-")[1:])
                clients[(server.label, "stdio")] = await stack.enter_async_context(Client(params, mode=mode))
                started = children() - before
                pids[(server.label, "stdio")] = started.pop() if len(started) == 1 else 0
            calls_of = {key: _caller(client) for key, client in clients.items()}
            for call in calls_of.values():  # warm-up: imports, caches, the client's own tools/list
                await timed_sequential(call, max(10, calls))
            for _ in range(rounds):
                for server in SERVERS:
                    for transport, timed in (("http", timed_sequential), ("stdio", timed_concurrent)):
                        key = (server.label, transport)
                        cpu = cpu_seconds(pids[key])
                        figures.setdefault(key, []).append(await timed(calls_of[key], calls))
                        spent = (cpu_seconds(pids[key]) - cpu) / calls * 1e6
                        figures.setdefault((server.label, f"{transport} cpu"), []).append(spent)
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
    return figures


def _caller(client: Any) -> Callable[[], Awaitable[Any]]:
    async def call() -> None:
        result = await client.call_tool("echo", {"text": "hi"})
        if result.is_error or result.content[0].text != "hi":
            raise RuntimeError(f"unexpected result: {result}")

    return call


def report(figures: dict[tuple[str, str], list[float]], calls: int, rounds: int, mode: str) -> str:
    """The markdown table and the verdicts."""
    theirs, ours = (server.label for server in SERVERS)
    median = {key: statistics.median(values) for key, values in figures.items()}
    http_ratio = median[(ours, "http")] / median[(theirs, "http")]
    stdio_ratio = median[(ours, "stdio")] / median[(theirs, "stdio")]
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"MCP serving speed: {calls} calls x {rounds} rounds, client mode {mode}, load average {load}",
        "",
        "| server | HTTP ms/call (median, min) | HTTP server CPU µs/call | stdio calls/s (median, max) "
        "| stdio server CPU µs/call |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label in (theirs, ours):
        http, stdio = figures[(label, "http")], figures[(label, "stdio")]
        lines.append(
            f"| {label} | {statistics.median(http):.2f} ({min(http):.2f}) | {median[(label, 'http cpu')]:.0f} "
            f"| {statistics.median(stdio):.0f} ({max(stdio):.0f}) | {median[(label, 'stdio cpu')]:.0f} |"
        )
    cpu = {t: median[(ours, f"{t} cpu")] / max(median[(theirs, f"{t} cpu")], 1e-9) for t in ("http", "stdio")}
    lines += [
        "",
        f"- HTTP latency ratio {http_ratio:.2f}x (target <= {HTTP_TARGET}x): "
        + ("pass" if http_ratio <= HTTP_TARGET else "FAIL"),
        f"- stdio throughput ratio {stdio_ratio:.2f}x (target >= {STDIO_TARGET}x): "
        + ("pass" if stdio_ratio >= STDIO_TARGET else "FAIL"),
        f"- server CPU per call, toolcascade over MCPServer: HTTP {cpu['http']:.2f}x, stdio {cpu['stdio']:.2f}x",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_latency", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50, help="calls per round (default 50)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per server and transport (default 20)")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"], help="the client's protocol era")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tools"
        folder.mkdir()
        (folder / "echo.py").write_text(ECHO, encoding="utf-8")
        figures = anyio.run(measure, folder, options.calls, options.rounds, options.mode)
    print(report(figures, options.calls, options.rounds, options.mode))


if __name__ == "__main__":
    main()
