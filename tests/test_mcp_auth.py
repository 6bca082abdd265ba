"""HTTP authorization of the MCP server (issue 27): a bearer token required through the SDK's own auth.

``toolcascade serve --http HOST:PORT --auth-token-env VAR`` runs as a real
process on a free port. A request without the token, or with another, gets
401 and runs no tool (the tool writes a file when it runs); the right token
lists and calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from servers import free_port, listening, stop

from orchestrator import ConfigurationError, Manager
from orchestrator.authorization import TOKEN_ENV, StaticToken, token_from_env
from orchestrator.mcp import serve

pytestmark = pytest.mark.anyio

LIMIT = 30
TOKEN = "s3cret-token-for-tests"
MARK = """
from pathlib import Path

frontmatter = {"description": "Leaves a mark when it runs."}

def main(ctx):
    Path(__file__).with_name("ran.txt").write_text("ran")
    return "marked"
"""
CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mark", "arguments": {}}}
).encode()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("auth") / "tools"
    folder.mkdir()
    (folder / "mark.py").write_text(MARK, encoding="utf-8")
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "TC_TEST_MCP_TOKEN": TOKEN}
    command = [sys.executable, "-m", "orchestrator", "serve", "--path", str(folder), "--http", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [*command, "--auth-token-env", "TC_TEST_MCP_TOKEN"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        if not listening(process, port, LIMIT):
            raise RuntimeError(f"the server did not start: {process.stderr.read().decode()}")  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}/mcp", folder
    finally:
        stop(process)
        process.stderr.close()  # type: ignore[union-attr]


def post(url: str, headers: dict[str, str]) -> int:
    """The status of a raw tools/call POST (urllib: what any HTTP client sends)."""
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    request = urllib.request.Request(url, data=CALL, headers={**base, **headers}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=LIMIT) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_mcp_http_without_a_token_or_with_a_wrong_one_is_401_and_runs_no_tool(guarded):
    url, folder = guarded
    assert post(url, {}) == 401
    assert post(url, {"Authorization": "Bearer not-the-token"}) == 401
    assert post(url, {"Authorization": f"Basic {TOKEN}"}) == 401
    assert not (folder / "ran.txt").exists()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client on trio: see tests/test_mcp.py
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_http_with_the_right_token_lists_and_calls(guarded, mode):
    url, folder = guarded
    with anyio.fail_after(LIMIT):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=LIMIT) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == {"mark"}
                result = await client.call_tool("mark", {})
    assert result.content[0].text == "marked"
    assert (folder / "ran.txt").read_text() == "ran"


async def test_mcp_static_token_verifier_accepts_only_its_token():
    verifier = StaticToken(TOKEN)
    accepted = await verifier.verify_token(TOKEN)
    assert accepted is not None and accepted.token == TOKEN
    assert await verifier.verify_token(TOKEN + "x") is None
    assert await verifier.verify_token("") is None
    with pytest.raises(ConfigurationError):
        StaticToken("")


def test_mcp_token_comes_from_the_named_variable_or_the_default_one():
    assert token_from_env(None, {}) is None
    assert token_from_env(None, {TOKEN_ENV: "t"}) == "t"
    assert token_from_env("MINE", {"MINE": "m", TOKEN_ENV: "t"}) == "m"
    with pytest.raises(ConfigurationError, match="MINE") as unset:
        token_from_env("MINE", {})
    assert "export MINE=" in str(unset.value)


def test_mcp_a_token_without_http_is_a_configuration_error(tools):
    with pytest.raises(ConfigurationError, match="HTTP only"):
        serve(Manager([tools]), token=TOKEN)


def test_mcp_serve_refuses_to_start_open_when_the_named_variable_is_unset(tools):
    command = [sys.executable, "-m", "orchestrator", "serve", "--path", str(tools)]
    done = subprocess.run(  # -X importtime: the refusal comes before the MCP SDK is imported
        [sys.executable, "-X", "importtime", *command[1:], "--http", f"127.0.0.1:{free_port()}"]
        + ["--auth-token-env", "TC_UNSET_VARIABLE"],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert "TC_UNSET_VARIABLE" in done.stderr and "ConfigurationError" in done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "orchestrator.cli" in imported and not {"mcp", "orchestrator.mcp"} & imported
    stdio = subprocess.run(
        [*command, "--auth-token-env", "X"], capture_output=True, text=True, timeout=LIMIT, stdin=subprocess.DEVNULL
    )
    assert stdio.returncode == 2 and "--http only" in stdio.stderr
