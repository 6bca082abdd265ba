"""MCP at scale (issue 16): stateless streamable HTTP behind a round-robin balancer.

Two single-process servers; the real SDK client talks to them through a
round-robin transport that sends each request to the other server, as a
Kubernetes Service or nginx without sticky sessions may. Stateless serving
means no request needs a session: the handshake, listing and calls work
whichever replica answers, and no ``Mcp-Session-Id`` is ever handed out.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from servers import free_port, listening, stop

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 30
# The app `serve --http` runs (orchestrator.mcp._serve_http), stateless.
SERVER = """
import sys, uvicorn
from orchestrator import Manager
from orchestrator.mcp import build_server
server = build_server(Manager([sys.argv[1]]))
app = server.streamable_http_app(host="127.0.0.1", stateless_http=True)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), access_log=False, log_level="warning")
"""
TOOLS = {
    "greet.md": "---\nmetadata:\n  params: {type: object, properties: {name: {type: string}}, required: [name]}\n---\n"
    "Hello, {{ args.name }}!\n",
    "whoami.py": "import os\n\n\ndef main(ctx):\n    return {'pid': os.getpid(), 'session': ctx.envelope.get('session')}\n",
}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    folder = tmp_path_factory.mktemp("scale") / "tools"
    folder.mkdir()
    for name, text in TOOLS.items():
        (folder / name).write_text(text, encoding="utf-8")
    ports = [free_port(), free_port()]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SERVER, str(folder), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for port in ports
    ]
    try:
        for process, port in zip(processes, ports, strict=True):
            if not listening(process, port, LIMIT):
                raise RuntimeError(f"a replica did not start: {process.stderr.read().decode()}")  # type: ignore[union-attr]
        yield ports
    finally:
        for process in processes:
            stop(process)
            process.stderr.close()  # type: ignore[union-attr]


class RoundRobin(httpx2.AsyncBaseTransport):
    """A balancer without sticky sessions: each request goes to the next replica."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[int, str]] = []  # (port, method) of each request
        self.session_ids: list[str] = []  # every Mcp-Session-Id a replica handed out

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.ports[len(self.sent) % len(self.ports)]
        self.sent.append((port, request.method))
        request.url = request.url.copy_with(port=port)
        response = await self.inner.handle_async_request(request)
        if "mcp-session-id" in response.headers:
            self.session_ids.append(response.headers["mcp-session-id"])
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# asyncio only, as in test_mcp: on trio the SDK's HTTP client leaves an SSE generator unclosed.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_stateless_replicas_behind_round_robin(replicas: list[int], mode: str) -> None:
    balancer = RoundRobin(replicas)
    url = f"http://127.0.0.1:{replicas[0]}/mcp"
    pids = set()
    with anyio.fail_after(LIMIT):
        async with httpx2.AsyncClient(transport=balancer, timeout=LIMIT) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                for i in range(3):
                    called = await client.call_tool("greet", {"name": f"n{i}"})
                    assert not called.is_error and called.content[0].text == f"Hello, n{i}!"  # type: ignore[union-attr]
                for _ in range(4):  # one request each: they alternate between the replicas
                    who = (await client.call_tool("whoami", {})).structured_content
                    assert who is not None
                    pids.add(who["pid"])
                    assert not who["session"]  # no session: any replica can answer
    assert names == {"greet", "whoami"}
    assert {port for port, _ in balancer.sent} == set(replicas)  # requests reached both replicas
    assert len(pids) == 2  # and both answered tool calls
    assert balancer.session_ids == []  # stateless: no Mcp-Session-Id, nothing to stick to


# -- cost per call: a call describes the tool it runs, it does not list every tool (issue 11) -----------------


def counted_listings(manager: object) -> list[int]:
    """Wrap ``manager.list_tools`` to count its calls; the list holds the count."""
    calls = [0]
    real = manager.list_tools  # type: ignore[attr-defined]

    def counting(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return real(*args, **kwargs)

    manager.list_tools = counting  # type: ignore[attr-defined]
    return calls


async def test_calls_reuse_the_listing_and_describe_only_the_called_tool(tmp_path: Path) -> None:
    from bench.toolsets import write_catalog
    from orchestrator import Manager
    from orchestrator.mcp import Service

    catalog = write_catalog(tmp_path / "catalog", 200, 4)
    manager = Manager([catalog])
    service = Service(manager, poll_interval=600.0)  # the recent listing stays recent for the whole test
    served = await service.relist()
    listings = counted_listings(manager)
    names = [name for name in served if name.startswith("group")][:50]
    for name in names:
        listing, seen = await service.resolve(name)
        assert listing is not None and listing.name == name
        assert seen is served
    assert listings[0] == 0

    # An edit of the called tool is seen by its call: that tool described afresh, no listing (issue 24, finding 7).
    edited = catalog / "group01" / "tool003.md"
    edited.write_text(edited.read_text().replace("Tool 3 of group 1", "Edited tool of group 1"))
    manager.refresh()
    listing, _seen = await service.resolve("group01__tool003")
    assert listing is not None and listing.description is not None and "Edited tool" in listing.description
    assert listings[0] == 0
