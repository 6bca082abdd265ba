"""MCP serving speed (issue 27): a call never re-lists the tools, and progress is set up only when asked for.

The timing itself is ``python -m bench.mcp_latency`` (side by side with the
SDK's ``MCPServer``); these tests pin the behaviour the speed rests on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from mcp import Client
from servers import free_port, listening, stop

from orchestrator import Manager
from orchestrator.mcp import Service, build_server
from orchestrator.progress import wants_reports

pytestmark = pytest.mark.anyio

LIMIT = 30
ECHO = (
    'frontmatter = {"metadata": {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}}\n'
    "async def main(ctx):\n    return ctx.args['text']\n"
)
# The server `serve --http` runs, its tools/list handler counting its runs on stderr.
COUNTING = """
import sys
from orchestrator import Manager, mcp

listed = mcp.Service.list_tools

async def counting(self, ctx, params):
    print("LISTED", file=sys.stderr, flush=True)
    return await listed(self, ctx, params)

mcp.Service.list_tools = counting
mcp.serve(Manager([sys.argv[1]]), http=sys.argv[2])
"""


# asyncio only: on trio the SDK's HTTP client leaves its SSE response generator unclosed (tests/test_mcp.py).
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_http_calls_of_a_2026_client_never_run_tools_list(write, tools: Path) -> None:
    write("tools/echo.py", ECHO)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", COUNTING, str(tools), f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert listening(process, port, LIMIT)
        with anyio.fail_after(LIMIT):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                for i in range(5):
                    result = await client.call_tool("echo", {"text": f"hi {i}"})
                    assert result.content[0].text == f"hi {i}"
    finally:
        stop(process)
    assert process.stderr is not None
    listings = process.stderr.read().count("LISTED")
    process.stderr.close()
    # The client lists once itself (for the output schemas it checks); five calls list nothing more.
    assert 1 <= listings <= 2


async def test_mcp_input_schema_lookup_reads_the_latest_listing(write, tools: Path) -> None:
    write("tools/echo.py", ECHO)
    service = Service(Manager([tools]))
    assert service.input_schema("echo") is None  # nothing listed yet: the SDK skips its header check
    await service.relist()
    assert service.input_schema("echo") == {"type": "object", "properties": {"text": {"type": "string"}}}
    assert service.input_schema("nothing") is None


def context(meta: dict | None, version: str, request: object = None) -> SimpleNamespace:
    return SimpleNamespace(meta=meta, protocol_version=version, request=request)


def test_mcp_progress_is_set_up_only_when_the_caller_can_hear_it() -> None:
    modern, handshake = "2026-07-28", "2025-11-25"
    http = object()  # a request over HTTP
    assert not wants_reports(context({}, modern, http))
    assert not wants_reports(context(None, modern, http))
    assert wants_reports(context({"progress_token": 3}, modern, http))
    assert wants_reports(context({"io.modelcontextprotocol/logLevel": "info"}, modern, http))
    assert wants_reports(context(None, handshake, http))  # log messages always reach a handshake-era client
    # ... and say when an agent's tool calls start and end: other tools have none to send
    assert not wants_reports(context(None, handshake, http), agent=False)
    assert not wants_reports(context({"io.modelcontextprotocol/logLevel": "info"}, modern, http), agent=False)
    assert wants_reports(context({"progress_token": "t"}, handshake, http), agent=False)
    assert wants_reports(context({}, modern))  # in-process: the SDK gives progress to the caller's callback


async def test_mcp_events_are_listened_to_only_while_a_call_is_reported(write, tools: Path) -> None:
    write("tools/echo.py", ECHO)
    manager = Manager([tools])
    heard: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager), mode="legacy") as client:
            assert (await client.call_tool("echo", {"text": "a"}, progress_callback=progress)).content[0].text == "a"
            assert manager.events.listeners == []  # no call in flight: events are not even built


# The event loop `serve --http` runs its server on, printed by the server as it starts.
LOOP = """
import asyncio, sys
from orchestrator import Manager, transports
from orchestrator.mcp import serve

async def reporting(*args):
    print("LOOP", type(asyncio.get_running_loop()).__module__, file=sys.stderr, flush=True)

transports.serve_http = reporting
serve(Manager([sys.argv[1]]), http="127.0.0.1:0")
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_http_is_served_on_uvloop_when_installed_as_uvicorn_run_would(tools: Path) -> None:
    import importlib.util

    done = subprocess.run([sys.executable, "-c", LOOP, str(tools)], capture_output=True, text=True, timeout=LIMIT)
    expected = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio.unix_events"
    assert f"LOOP {expected}" in done.stderr, done.stderr
