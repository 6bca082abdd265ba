"""The MCP client over streamable HTTP and against ``@modelcontextprotocol/server-everything`` (issue 27).

Our own ``toolcascade serve --http`` (a real process on a free port, with a
bearer token) serves our client: the token comes from the variable the entry
names, and a wrong one is a typed error. ``server-everything`` (npm, started
with ``npx``) runs over stdio and streamable HTTP; those tests are skipped
only where ``npx`` is missing.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import yaml
from servers import free_port, listening, stop

from orchestrator import Manager, RemoteToolError

pytestmark = pytest.mark.anyio

LIMIT = 120
TOKEN = "client-test-token"
NPX = shutil.which("npx")
needs_npx = pytest.mark.skipif(NPX is None, reason="npx (Node.js) is not installed: server-everything needs it")
EVERYTHING = "@modelcontextprotocol/server-everything"


def folder(root: Path, servers: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"metadata": {"mcp-servers": servers}}, sort_keys=False)
    (root / "AUTHORITY.md").write_text(f"---\n{text}---\n", encoding="utf-8")
    return root


def started(command: list[str], port: int, env: dict[str, str]) -> subprocess.Popen:  # type: ignore[type-arg]
    """The server in a process group of its own: ``npx`` runs server-everything as its child (see ``stopped``)."""
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    if not listening(process, port, LIMIT):
        stopped(process)
        raise RuntimeError(f"the server did not start: {process.stderr.read().decode()}")  # type: ignore[union-attr]
    return process


def stopped(process: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Stop the server's whole process group: terminating npx alone left its node child serving, orphaned."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    stop(process)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what of the group outlived SIGTERM


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    served = tmp_path_factory.mktemp("served")
    (served / "shout.py").write_text(
        'frontmatter = {"description": "Shout.", "metadata": {"params": {"type": "object", '
        '"properties": {"text": {"type": "string"}}, "required": ["text"]}}}\n'
        "def main(ctx):\n    return ctx.args['text'].upper()\n",
        encoding="utf-8",
    )
    port = free_port()
    command = [sys.executable, "-m", "orchestrator", "serve", "--path", str(served), "--http", f"127.0.0.1:{port}"]
    env = {"PATH": os.environ["PATH"], "TC_TEST_SERVE_TOKEN": TOKEN}
    process = started([*command, "--auth-token-env", "TC_TEST_SERVE_TOKEN"], port, env)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stopped(process)
        process.stderr.close()  # type: ignore[union-attr]


async def test_mcp_client_our_own_http_server_with_a_bearer_token_from_the_environment(ours, tmp_path, monkeypatch):
    monkeypatch.setenv("TC_CLIENT_TOKEN", TOKEN)
    entry = {"url": ours, "bearer-token-env": "TC_CLIENT_TOKEN"}
    with Manager([folder(tmp_path / "tools", {"ours": entry})]) as manager, anyio.fail_after(LIMIT):
        assert await manager.invoke("ours/shout", {"text": "over http"}) == "OVER HTTP"


async def test_mcp_client_a_wrong_bearer_token_is_a_typed_error(ours, tmp_path, monkeypatch):
    monkeypatch.setenv("TC_CLIENT_TOKEN", "not-the-token")
    entry = {"url": ours, "bearer-token-env": "TC_CLIENT_TOKEN"}
    with Manager([folder(tmp_path / "tools", {"ours": entry})]) as manager, anyio.fail_after(LIMIT):
        with pytest.raises(RemoteToolError) as refused:
            await manager.invoke("ours/shout", {"text": "x"})
    assert refused.value.server == "ours" and refused.value.reason == "start"


@needs_npx
async def test_mcp_client_server_everything_over_stdio(tmp_path):
    entry = {"command": NPX, "args": ["-y", EVERYTHING, "stdio"], "env": ["HOME"], "timeout": LIMIT}
    with Manager([folder(tmp_path / "tools", {"everything": entry})]) as manager, anyio.fail_after(LIMIT):
        assert await manager.invoke("everything/echo", {"message": "hi"}) == "Echo: hi"
        image = await manager.invoke("everything/get-tiny-image", {})
        structured = await manager.invoke("everything/get-structured-content", {"location": "New York"})
    media = [part for part in image if isinstance(part, dict)]
    assert media and media[0]["type"] == "media" and media[0]["kind"] == "image"
    assert media[0]["media_type"] == "image/png"
    assert len(base64.b64decode(media[0]["data"])) > 1000  # what test_mcp_client_media refuses at 1,000 passes here
    assert isinstance(structured, dict) and "temperature" in structured


@needs_npx
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the server is the subject; trio is covered by stdio
async def test_mcp_client_server_everything_over_streamable_http(tmp_path):
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)), "PORT": str(port)}
    process = started([NPX or "npx", "-y", EVERYTHING, "streamableHttp"], port, env)
    try:
        entry = {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Test": "1"}}
        with Manager([folder(tmp_path / "tools", {"everything": entry})]) as manager, anyio.fail_after(LIMIT):
            assert await manager.invoke("everything/get-sum", {"a": 2, "b": 3}) == "The sum of 2 and 3 is 5."
    finally:
        stopped(process)
        process.stderr.close()  # type: ignore[union-attr]
