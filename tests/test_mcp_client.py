"""The MCP client (issue 27): any MCP server's tools are tools, run through the pipeline.

Real servers as subprocesses over stdio: ``mcp-server-time`` (PyPI), a tiny
flaky server of our own (``tests/mcp_flaky_server.py``: crashes, hangs, big and
media answers) and our own ``toolcascade serve``. Servers are declared in an
``AUTHORITY.md`` as ``mcp-servers`` metadata.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from heap_helpers import own_heap

from orchestrator import (
    ArgsValidationError,
    ConfigurationError,
    Manager,
    RemoteToolError,
    SecurityError,
    ToolNotFoundError,
)

pytestmark = pytest.mark.anyio

FLAKY = str(Path(__file__).with_name("mcp_flaky_server.py"))
RAW = str(Path(__file__).with_name("mcp_raw_server.py"))
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
LIMIT = 60


def folder(root: Path, servers: dict[str, Any], **files: str) -> Path:
    """A tools folder whose AUTHORITY.md declares ``servers``, with ``files`` in it."""
    root.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"metadata": {"mcp-servers": servers}}, sort_keys=False)
    (root / "AUTHORITY.md").write_text(f"---\n{text}---\n", encoding="utf-8")
    for name, body in files.items():
        (root / name.replace("__", "/")).write_text(body, encoding="utf-8")
    return root


@pytest.fixture
def flaky(tmp_path: Path) -> Manager:
    spec = {"command": sys.executable, "args": [FLAKY], "timeout": 10, "max-result": 1000, "env": {"MINE": "1"}}
    manager = Manager([folder(tmp_path / "tools", {"flaky": spec, "time": TIME})])
    yield manager
    manager.close()


async def test_mcp_client_a_remote_tool_runs_through_the_pipeline(flaky):
    with anyio.fail_after(LIMIT):
        now = await flaky.invoke("time/get_current_time", {"timezone": "Europe/Paris"})
        assert now["timezone"] == "Europe/Paris" and isinstance(now["is_dst"], bool)
        tool = flaky.find_tool("time/get_current_time")
        assert tool.kind == "remote" and tool.uri == "mcp://time/get_current_time"
        assert tool.metadata["params"]["required"] == ["timezone"]  # the server's inputSchema
        assert "datetime" in tool.metadata["returns"]["properties"]  # its outputSchema
        with pytest.raises(ArgsValidationError):  # validate-args, before the server is asked
            await flaky.invoke("time/get_current_time", {"timezone": 3})
        with pytest.raises(ToolNotFoundError) as missing:
            await flaky.invoke("time/get_current_tim", {"timezone": "UTC"})
        assert "time/get_current_time" in missing.value.suggestions
        with pytest.raises(RemoteToolError) as failed:  # isError
            await flaky.invoke("time/get_current_time", {"timezone": "Nowhere/Atlantis"})
        assert (failed.value.server, failed.value.remote, failed.value.reason) == ("time", "get_current_time", "error")


# One flaky server per test checks several things: each start costs ~2 s of CPU (the server imports the SDK).


async def test_mcp_client_a_server_crashing_or_hanging_mid_call_is_a_typed_error_and_the_next_call_is_served(flaky):
    with anyio.fail_after(LIMIT):
        with pytest.raises(RemoteToolError) as crashed:
            await flaky.invoke("flaky/die", {})
        assert crashed.value.reason == "crashed" and crashed.value.tool == "flaky/die"
        # reconnected; the answer is the SDK's structuredContent
        assert await flaky.invoke("flaky/echo", {"text": "again"}) == {"result": "again"}
    started = time.monotonic()
    with anyio.fail_after(LIMIT), pytest.raises(RemoteToolError) as late:
        await flaky.invoke("flaky/hang", {})  # a call that never answers
    assert late.value.reason == "timeout"
    assert time.monotonic() - started < 45  # timeout: 10 s, with a generous margin for a loaded machine
    with anyio.fail_after(LIMIT):
        assert await flaky.invoke("flaky/echo", {"text": "still here"}) == {"result": "still here"}


async def test_mcp_client_a_result_over_max_result_is_refused_media_comes_back_as_parts_and_only_named_variables_pass(
    flaky, monkeypatch
):
    monkeypatch.setenv("TC_CANARY_SECRET", "do-not-send")  # before the server starts, at the first call
    with anyio.fail_after(LIMIT):
        assert await flaky.invoke("flaky/big", {"size": 10}) == {"result": "x" * 10}
        with pytest.raises(RemoteToolError) as big:
            await flaky.invoke("flaky/big", {"size": 5000})
        assert big.value.reason == "too-large"
        picture = await flaky.invoke("flaky/picture", {})
        seen = await flaky.invoke("flaky/environment", {})
    assert picture == [{"type": "media", "kind": "image", "media_type": "image/png", "data": picture[0]["data"]}]
    names = seen["result"]  # a stdio server sees only the variables its entry names (and the SDK's safe few)
    assert "MINE" in names and "PATH" in names
    assert "TC_CANARY_SECRET" not in names


def test_mcp_client_a_stdio_server_runs_in_its_own_process_group_until_manager_close(flaky):
    pid = flaky.invoke_sync("flaky/pid", {})["result"]
    os.kill(pid, 0)  # running
    assert os.getpgid(pid) == pid != os.getpgid(0)  # in a process group of its own
    flaky.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_mcp_client_a_server_that_does_not_start_is_a_typed_error(tmp_path):
    tools = folder(tmp_path / "tools", {"gone": {"command": str(tmp_path / "no-such-program")}})
    with Manager([tools]) as manager, anyio.fail_after(LIMIT), pytest.raises(RemoteToolError) as failed:
        await manager.invoke("gone/anything", {})
    assert failed.value.reason == "start" and failed.value.server == "gone"


async def test_mcp_client_an_untrusted_folder_cannot_start_a_server(tmp_path):
    marker = tmp_path / "started"
    entry = {"command": "/bin/sh", "args": ["-c", f"touch {marker}"]}
    untrusted = folder(tmp_path / "elsewhere", {"evil": entry})
    with Manager([folder(tmp_path / "tools", {})]) as manager, anyio.fail_after(LIMIT):
        with pytest.raises(SecurityError) as refused:
            await manager.invoke("evil/run", {}, context={"paths": [str(untrusted)]})
        assert refused.value.key == "mcp-servers.evil"
        assert refused.value.path is not None and refused.value.path.endswith("AUTHORITY.md")
    assert not marker.exists()
    with Manager([folder(tmp_path / "tools", {})], trusted_paths=[untrusted]) as trusting:
        with pytest.raises(RemoteToolError):  # trusted: it starts (and, being no MCP server, fails to answer)
            await trusting.invoke("evil/run", {}, context={"paths": [str(untrusted)]})
    assert marker.exists()


async def test_mcp_client_overrides_cannot_declare_a_server(tmp_path):
    with Manager([folder(tmp_path / "tools", {})]) as manager, pytest.raises(ToolNotFoundError):
        await manager.invoke("time/get_current_time", {"timezone": "UTC"}, overrides={"mcp-servers": {"time": TIME}})


async def test_mcp_client_a_malformed_entry_names_the_key_and_the_fix(tmp_path):
    tools = folder(tmp_path / "tools", {"time": {"comand": "mcp-server-time"}})
    with Manager([tools]) as manager, pytest.raises(ConfigurationError) as bad:
        await manager.invoke("time/get_current_time", {"timezone": "UTC"})
    assert "exactly one of command" in str(bad.value) and bad.value.key == "mcp-servers.time"


async def test_mcp_client_our_own_server_serves_our_client(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "shout.py").write_text(
        'frontmatter = {"description": "Shout.", "metadata": {"params": {"type": "object", '
        '"properties": {"text": {"type": "string"}}, "required": ["text"]}}}\n'
        "def main(ctx):\n    return ctx.args['text'].upper()\n",
        encoding="utf-8",
    )
    ours = {"command": sys.executable, "args": ["-m", "orchestrator", "serve", "--path", str(served)], "env": ["HOME"]}
    with Manager([folder(tmp_path / "tools", {"ours": ours})]) as manager, anyio.fail_after(LIMIT):
        assert await manager.invoke("ours/shout", {"text": "hi"}) == "HI"


async def test_mcp_client_an_agent_calls_a_servers_tools_with_approval_and_call_limit(tmp_path):
    asked: list[Any] = []

    def approver(request: Any) -> str:
        asked.append(request)
        return "approve"

    script = [
        {"calls": [{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
        {"calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"answer": "done", "expect": {"contains": "limit"}},
    ]
    meta = {
        "model": {"provider": "scripted", "script": script},
        "tools": ["time/*"],
        "tool-pipeline": {"call-limit": {"total": 1}, "approval": {"tools": ["time/get_current_time"]}},
    }
    agent = (
        "---\n"
        + yaml.safe_dump({"description": "clock", "metadata": meta}, sort_keys=False)
        + "---\nWhat time is it?\n"
    )
    tools = folder(tmp_path / "tools", {"time": TIME}, **{"clock.md": agent})
    events: list[Any] = []
    with Manager([tools], approver=approver, on_event=events.append, sessions=tmp_path / "s.db") as manager:
        with anyio.fail_after(LIMIT):
            assert await manager.invoke("clock", {}) == "done"
    assert len(asked) == 1  # the second call was refused by call-limit before approval asked
    ends = [e.data for e in events if e.kind == "tool.end" and e.data.get("call") == "time/get_current_time"]
    assert ends[0]["error"] is None and "limit" in ends[1]["error"]


async def test_mcp_client_a_server_sending_something_not_json_rpc_is_a_typed_error(tmp_path):
    raw = {"command": sys.executable, "args": [RAW], "timeout": 20}
    with Manager([folder(tmp_path / "tools", {"raw": raw})]) as manager:
        started = time.monotonic()
        with anyio.fail_after(LIMIT), pytest.raises(RemoteToolError) as broken:
            await manager.invoke("raw/garbage", {})
    assert broken.value.reason == "protocol" and broken.value.server == "raw"
    assert time.monotonic() - started < 15  # failed when the line came, not at the 20 s timeout


async def test_mcp_client_an_agents_own_servers_are_offered_to_that_agent_only(tmp_path):
    script = [
        {"calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"answer": "ok", "expect": {"contains": '"timezone": "UTC"'}},
    ]
    meta = {
        "model": {"provider": "scripted", "script": script},
        "mcp-servers": {"time": TIME},
        "tools": ["time/get_current_time"],
    }
    agent = "---\n" + yaml.safe_dump({"description": "clock", "metadata": meta}, sort_keys=False) + "---\nTime?\n"
    tools = folder(tmp_path / "tools", {}, **{"clock.md": agent})
    with Manager([tools]) as manager, anyio.fail_after(LIMIT):
        assert await manager.invoke("clock", {}) == "ok"
        with pytest.raises(ToolNotFoundError):  # declared by the agent: not a ref outside it
            await manager.invoke("time/get_current_time", {"timezone": "UTC"})


async def test_mcp_client_mcp_server_git_over_stdio(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    import subprocess

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "new.txt").write_text("hello", encoding="utf-8")
    git = {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]}
    with Manager([folder(tmp_path / "tools", {"git": git})]) as manager, anyio.fail_after(LIMIT):
        status = await manager.invoke("git/git_status", {"repo_path": str(repo)})
    text = status if isinstance(status, str) else str(status)
    assert "new.txt" in text


async def test_mcp_client_the_tool_list_is_cached_until_the_server_says_it_changed(tmp_path):
    raw = {"command": sys.executable, "args": [RAW], "timeout": 20}
    with Manager([folder(tmp_path / "tools", {"raw": raw})]) as manager, anyio.fail_after(LIMIT):
        with pytest.raises(ToolNotFoundError):
            manager.find_tool("raw/added")
        assert await manager.invoke("raw/grow", {}) == "grown"
        for _ in range(100):  # the notification is handled on the pool's loop, beside the answer
            try:
                found = manager.find_tool("raw/added")
                break
            except ToolNotFoundError:
                await anyio.sleep(0.1)
        assert found.description == "Added by grow."


async def test_mcp_client_an_agent_hears_a_dead_server_as_a_tool_result(flaky, tmp_path):
    script = [
        {"calls": [{"name": "flaky__die", "arguments": {}}]},
        {"answer": "the server died", "expect": {"last-role": "tool", "contains": "RemoteToolError"}},
    ]
    meta = {"model": {"provider": "scripted", "script": script}, "tools": ["flaky/die"]}
    text = "---\n" + yaml.safe_dump({"description": "d", "metadata": meta}, sort_keys=False) + "---\nGo\n"
    (tmp_path / "tools" / "dier.md").write_text(text, encoding="utf-8")
    with anyio.fail_after(LIMIT):
        assert await flaky.invoke("dier", {}) == "the server died"


async def test_mcp_client_a_remote_lookup_keeps_no_manager_alive(tmp_path):
    import gc
    import weakref

    with own_heap():  # the collection walks what the test made, not the worker's heap
        manager = Manager([folder(tmp_path / "tools", {})])
        with pytest.raises(ToolNotFoundError):  # a miss of NAME/TOOL asks the MCP client for a declared server
            await manager.invoke("nothing/here", {})
        registry = weakref.ref(manager.registry)
        del manager
        gc.collect()
    assert registry() is None  # nor its file watcher thread


def test_mcp_client_a_server_that_never_answers_initialize_stops_at_its_timeout(tmp_path):
    pidfile = tmp_path / "silent.pid"
    silent = {"command": "/bin/sh", "args": ["-c", f'echo $$ > "{pidfile}"; exec sleep 120'], "timeout": 2}
    with Manager([folder(tmp_path / "tools", {"silent": silent})]) as manager:
        with pytest.raises(RemoteToolError) as late:
            manager.invoke_sync("silent/anything", {})
        assert late.value.reason == "timeout"
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 45  # generous: the SDK gives a process 2 s to end before killing it
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break  # stopped at its timeout, while the Manager is still open
            time.sleep(0.05)
        else:
            pytest.fail("the server that never answered initialize still runs")
        started = time.monotonic()
    assert time.monotonic() - started < 8  # close waits for no server that never answered (it waited 10 s each)
