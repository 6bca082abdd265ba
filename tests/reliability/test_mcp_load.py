"""The MCP server under load, and clients that leave mid-call.

Each test starts ``python -m orchestrator serve --http 127.0.0.1:PORT --stateful
--path TOOLS`` as a subprocess and talks to it with the ``mcp`` SDK client over
streamable HTTP, as a real deployment would. Half the clients use the
initialize handshake (an ``Mcp-Session-Id`` session with its list watcher),
half the 2026-era per-request envelopes.

The HTTP tests run on asyncio only: on trio the SDK's HTTP client leaves its
SSE response generator unclosed (a ResourceWarning, an error here); the
server runs on asyncio either way. The in-process tests of how calls find
their tool run on both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from freshness_helpers import refresh
from mcp import Client
from mcp.types import Implementation
from servers import free_port, listening, stop

from orchestrator import Manager
from orchestrator.mcp import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HTTP = pytest.mark.parametrize("anyio_backend", ["asyncio"])

CLIENTS = 50  # concurrent client sessions
DURATION = 10.0  # seconds each client keeps calling
STARTUP = 30  # seconds the server may take to listen
MAX_TIMEOUT = 3  # the disconnect test's --max-timeout: seconds a call may run
SETTLE = 10  # seconds past MAX_TIMEOUT a departed client's call may take to end
LIMIT = 120  # seconds the disconnect test may take: proves "does not hang"

TOOLS = {
    "echo.md": """
        ---
        description: Echoes who called and the call number.
        metadata:
          params: {type: object, properties: {who: {type: string}, n: {type: integer}}, required: [who, n]}
        ---
        {{ args.who }}:{{ args.n }}
        """,
    "add.py": """
        frontmatter = {
            "description": "Adds two numbers.",
            "metadata": {"params": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
        }

        async def main(ctx):
            return {"sum": ctx.args["a"] + ctx.args["b"], "client": ctx.envelope["client"]["name"]}
        """,
    "slow.py": """
        from pathlib import Path

        import anyio

        frontmatter = {"description": "Writes '<marker>.started', sleeps, writes '<marker>.done' however it ends."}

        async def main(ctx):
            marker = Path(ctx.args["marker"])
            marker.with_suffix(".started").write_text("", encoding="utf-8")
            try:
                await anyio.sleep(ctx.args.get("seconds", 30))
            finally:
                marker.with_suffix(".done").write_text("", encoding="utf-8")
            return "slept"
        """,
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    for name, text in TOOLS.items():
        path = tools / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return tools


@contextmanager
def serving(tools: Path, *options: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``toolcascade serve --http`` on a free port; yield its URL and process."""
    port = free_port()
    process = subprocess.Popen(
        # --stateful: half the clients hold handshake sessions (tests/test_mcp_scale.py covers stateless replicas)
        [sys.executable, "-m", "orchestrator", "serve", "--http", f"127.0.0.1:{port}", "--stateful"]
        + ["--path", str(tools), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if not listening(process, port, STARTUP):
            raise RuntimeError(f"the server did not start (exit code {process.poll()})")
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        stop(process)


def memory(process: subprocess.Popen[bytes]) -> dict[str, int]:
    """The server's resident memory now and at its peak, in kB (from /proc)."""
    fields = {}
    with open(f"/proc/{process.pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields


def cpu_seconds(process: subprocess.Popen[bytes]) -> float:
    """CPU time (user + system) the server has used so far (from /proc)."""
    with open(f"/proc/{process.pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def text(result: Any) -> str:
    assert len(result.content) == 1, result
    return str(result.content[0].text)


async def healthy(url: str) -> None:
    """A new client lists the tools and calls one."""
    async with Client(url, mode="legacy") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo", "add", "slow"}
        assert text(await client.call_tool("echo", {"who": "after", "n": 1})) == "after:1"


@HTTP
async def test_mcp_http_serves_fifty_clients_for_ten_seconds_without_a_failed_call(folder):
    """50 sessions connect, then all call in a loop for DURATION seconds; every result is checked."""
    calls = [0] * CLIENTS
    failures: list[str] = []
    connected = [0]
    go = anyio.Event()

    async def client(c: int) -> None:
        who = f"client-{c}"
        mode = "legacy" if c % 2 else "auto"
        async with Client(url, mode=mode, client_info=Implementation(name=who, version="1")) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == {"echo", "add", "slow"}
            connected[0] += 1
            await go.wait()
            n = 0
            while time.monotonic() < end:
                n += 1
                try:
                    if n % 2:
                        result = await session.call_tool("echo", {"who": who, "n": n})
                        ok = not result.is_error and text(result) == f"{who}:{n}"
                    else:  # the envelope names this session's client: nothing crosses between sessions
                        result = await session.call_tool("add", {"a": c, "b": n})
                        ok = not result.is_error and result.structured_content == {"sum": c + n, "client": who}
                except Exception as exc:  # counted: the test wants zero
                    ok, result = False, exc
                if not ok:
                    failures.append(f"{who} call {n}: {result!r}")
                calls[c] += 1

    with serving(folder) as (url, process):
        with anyio.fail_after(DURATION + 180):
            async with anyio.create_task_group() as tg:
                for c in range(CLIENTS):
                    tg.start_soon(client, c)
                while connected[0] < CLIENTS:
                    await anyio.sleep(0.01)
                cpu = cpu_seconds(process)
                started = time.monotonic()
                end = started + DURATION
                go.set()
            seconds = time.monotonic() - started
            cpu = cpu_seconds(process) - cpu
            rss = memory(process)
            await healthy(url)
        assert process.poll() is None
    total = sum(calls)
    print(
        f"\n{CLIENTS} clients, {total} calls in {seconds:.1f} s: {total / seconds:.0f} calls/s, "
        f"{len(failures)} failed; server CPU {1000 * cpu / max(total, 1):.1f} ms per call, "
        f"RSS {rss['VmRSS']} kB, peak {rss['VmHWM']} kB; load average {os.getloadavg()[0]:.1f}"
    )
    assert failures == []
    assert min(calls) > 0  # every client was served, none starved


LEAVER = """
import sys

import anyio
from mcp import Client


async def main():
    async with Client(sys.argv[1], mode=sys.argv[3]) as client:
        await client.call_tool("slow", {"marker": sys.argv[2], "seconds": 60})


anyio.run(main)
"""


@HTTP
async def test_mcp_http_clients_leaving_mid_call_leave_the_server_healthy(folder, tmp_path):
    """Clients cancelled, and client processes killed, while a slow call runs: the server keeps serving.

    The calls they leave behind end within ``--max-timeout``: a 2026-era call
    is cancelled when its connection drops; a handshake session's call runs
    on (the protocol says a disconnection is not a cancellation) until the
    server's cap ends it.
    """
    markers = {f"{how}-{mode}": tmp_path / f"{how}-{mode}" for how in ("cancel", "kill") for mode in ("legacy", "auto")}

    def started(key: str) -> bool:
        return markers[key].with_suffix(".started").exists()

    def running() -> list[str]:
        return [key for key, marker in markers.items() if not marker.with_suffix(".done").exists()]

    async def leave(mode: str) -> None:
        async with Client(url, mode=mode) as client:
            await client.call_tool("slow", {"marker": str(markers[f"cancel-{mode}"]), "seconds": 60})

    with serving(folder, "--max-timeout", str(MAX_TIMEOUT)) as (url, process):
        with anyio.fail_after(LIMIT):
            # 1. client tasks cancelled while their slow calls run: their connections close
            async with anyio.create_task_group() as tg:
                for mode in ("legacy", "auto"):
                    tg.start_soon(leave, mode)
                while not (started("cancel-legacy") and started("cancel-auto")):
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            await healthy(url)

            # 2. client processes killed outright mid-call
            clients = [
                subprocess.Popen(
                    [sys.executable, "-c", LEAVER, url, str(markers[f"kill-{mode}"]), mode],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for mode in ("legacy", "auto")
            ]
            try:
                while not (started("kill-legacy") and started("kill-auto")):
                    assert all(c.poll() is None for c in clients), "a client process ended before its call started"
                    await anyio.sleep(0.05)
            finally:
                for client in clients:
                    os.kill(client.pid, signal.SIGKILL)
                    client.wait(timeout=10)
            await healthy(url)

            # 3. what they left behind ends within the server's cap
            deadline = time.monotonic() + MAX_TIMEOUT + SETTLE
            while running():
                assert time.monotonic() < deadline, f"calls of departed clients still running: {running()}"
                await anyio.sleep(0.1)
            await healthy(url)
        assert process.poll() is None


# -- how a call finds its tool ----------------------------------------------------------


async def test_mcp_calls_share_a_recent_listing_but_check_the_tool_they_call(folder):
    """Calls do not list every tool each time; the tool called is still checked afresh."""
    manager = Manager([folder])
    listings = []
    list_tools = manager.list_tools

    def counted(**options: Any) -> Any:
        listings.append(1)
        return list_tools(**options)

    manager.list_tools = counted  # type: ignore[method-assign]
    server = build_server(manager, poll_interval=3600)  # the listing stays recent for the whole test
    with anyio.fail_after(60):
        async with Client(server) as client:
            assert text(await client.call_tool("echo", {"who": "me", "n": 0})) == "me:0"
            first = len(listings)  # the SDK client may list the tools itself: that lists afresh
            for n in range(1, 100):
                assert text(await client.call_tool("echo", {"who": "me", "n": n})) == f"me:{n}"
            assert len(listings) == first

            (folder / "echo.md").write_text("---\nmetadata: {visibility: hidden}\n---\nhidden\n", encoding="utf-8")
            refresh(manager)
            hidden = await client.call_tool("echo", {"who": "me", "n": 1})
            assert hidden.is_error and text(hidden).startswith("ToolNotFoundError: ")

            (folder / "late.md").write_text("---\ndescription: New.\n---\nlate {{ args.n }}\n", encoding="utf-8")
            refresh(manager)
            assert text(await client.call_tool("late", {"n": 1})) == "late 1"

            (folder / "late.md").write_text("---\nmetadata: {params: {type: string}}\n---\n{{ args }}!\n")
            refresh(manager)
            assert text(await client.call_tool("late", {"value": "wrapped now"})) == "wrapped now!"
