"""Remote tools in ``list`` and ``check`` (issue 27): no program starts unless ``--remote`` asks.

Real servers as subprocesses: ``mcp-server-time`` (PyPI), started through a
small shell wrapper that writes its pid to a file (so a test knows whether it
started, and that it stopped), a program that does not exist, and one that
never answers ``initialize``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import ConfigurationError, Manager, SecurityError, ToolNotFoundError
from orchestrator.cli import cli
from orchestrator.remote import find_server
from orchestrator.servers import declared

GENEROUS = 45  # seconds: far above what each command needs, so a loaded machine never fails a test


def wrapped_time(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """An entry starting ``mcp-server-time`` that first writes its pid to a file, and that file."""
    pidfile = tmp_path / "time.pid"
    script = tmp_path / "time-server.sh"
    script.write_text(
        f'#!/bin/sh\necho $$ > "{pidfile}"\nexec "{sys.executable}" -m mcp_server_time --local-timezone UTC\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return {"command": str(script)}, pidfile


def project(tmp_path: Path, servers: dict[str, Any], tools: list[str], own: dict[str, Any] | None = None) -> Path:
    """A tools folder whose AUTHORITY.md declares ``servers`` and whose agent lists ``tools`` (and declares ``own``)."""
    root = tmp_path / "tools"
    root.mkdir(parents=True)
    text = yaml.safe_dump({"metadata": {"mcp-servers": servers}}, sort_keys=False)
    (root / "AUTHORITY.md").write_text(f"---\n{text}---\n", encoding="utf-8")
    meta: dict[str, Any] = {"model": "scripted", "tools": tools}
    if own:
        meta["mcp-servers"] = own
    agent = yaml.safe_dump({"description": "An agent.", "metadata": meta}, sort_keys=False)
    (root / "helper.md").write_text(f"---\n{agent}---\nHelp.\n", encoding="utf-8")
    return root


def invoke(*args: str) -> Any:
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner(env=env).invoke(cli, list(args), prog_name="toolcascade")


def stopped(pid: int) -> bool:
    """True once ``pid`` is gone (waiting a generous while for it to end)."""
    deadline = time.monotonic() + GENEROUS
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_remote_cli_list_starts_no_server_without_remote(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    tools = project(tmp_path, {"time": entry}, ["time/get_current_time"])
    result = invoke("list", "--path", str(tools), "--all")
    assert result.exit_code == 0, result.output
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in result.stdout.splitlines()}
    assert "helper" in rows and "time/get_current_time" not in rows
    assert rows["time/*"][0] == "remote" and "list --remote" in rows["time/*"][-1]  # the server, not started
    assert not pidfile.exists()
    plain = invoke("list", "--path", str(tools))
    assert "time/" not in plain.stdout and not pidfile.exists()


def test_remote_cli_list_remote_shows_each_servers_tools_and_a_failed_server_as_one_error_row(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    servers = {"time": entry, "gone": {"command": str(tmp_path / "no-such-program")}}
    tools = project(tmp_path, servers, [])
    result = invoke("list", "--path", str(tools), "--remote")
    assert result.exit_code == 0, result.output  # as list treats a broken tool: listed, not fatal
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in result.stdout.splitlines()}
    assert rows["time/get_current_time"][0] == "remote" and "time" in rows["time/get_current_time"][1].lower()
    assert "time/convert_time" in rows
    assert rows["gone/*"][0] == "error" and "did not start" in rows["gone/*"][1]
    assert "helper" in rows  # the files' tools are still listed
    assert "starting MCP servers" in result.stderr and "time" in result.stderr and "gone" in result.stderr
    assert stopped(int(pidfile.read_text()))  # the servers it started stop at the end


def test_remote_cli_list_remote_json_gives_the_servers_input_schema_as_params(tmp_path):
    entry, _ = wrapped_time(tmp_path)
    tools = project(tmp_path, {"time": entry}, [])
    result = invoke("list", "--path", str(tools), "--remote", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["ref"]: row for row in json.loads(result.stdout)}
    now = rows["time/get_current_time"]
    assert now["kind"] == "remote" and now["error"] is None and now["path"] is None
    assert now["params"]["required"] == ["timezone"]  # the server's inputSchema
    assert rows["helper"]["kind"] == "markdown"


def test_remote_cli_list_remote_a_server_that_never_answers_is_an_error_row_within_its_timeout(tmp_path):
    silent = {"command": "/bin/sh", "args": ["-c", "sleep 120"]}  # the entry's own timeout: the default 60 s
    tools = project(tmp_path, {"silent": silent, "gone": {"command": str(tmp_path / "no-such-program")}}, [])
    started = time.monotonic()
    result = invoke("list", "--path", str(tools), "--remote", "--timeout", "3")
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < GENEROUS  # the 3 s of --timeout, not 60 s
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in result.stdout.splitlines()}
    assert rows["silent/*"][0] == "error" and "within 3 s" in rows["silent/*"][1]
    assert rows["gone/*"][0] == "error" and rows["helper"][0] == "markdown"  # one failure never ends the listing


def test_remote_cli_list_remote_includes_an_agents_own_servers(tmp_path):
    entry, _ = wrapped_time(tmp_path)
    tools = project(tmp_path, {}, ["mine/get_current_time"], own={"mine": entry})
    result = invoke("list", "--path", str(tools), "--remote")
    assert result.exit_code == 0, result.output
    assert "mine/get_current_time\tremote" in result.stdout


def test_remote_cli_list_remote_with_no_server_declared_says_so(tmp_path):
    tools = project(tmp_path, {}, [])
    result = invoke("list", "--path", str(tools), "--remote")
    assert result.exit_code == 0, result.output
    assert "no MCP servers are declared" in result.stderr


def test_remote_cli_check_starts_no_server(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    tools = project(tmp_path, {"time": entry}, ["time/get_current_time", "time/*"])
    invoke("check", "--path", str(tools))
    assert not pidfile.exists()


def test_remote_cli_check_remote_starts_the_servers_and_finds_each_tool(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    servers = {"time": entry, "gone": {"command": str(tmp_path / "no-such-program")}}
    tools = project(tmp_path, servers, ["time/get_current_time", "time/get_current_tim", "time/*", "gone/thing"])
    result = invoke("check", "--path", str(tools), "--remote", "--timeout", "20")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    missing = [line for line in lines if "'time/get_current_tim'" in line and "has no tool" in line]
    assert missing and "did you mean 'time/get_current_time'" in missing[0]
    assert missing[0].startswith(f"{Path('tools') / 'helper.md'}:") or "helper.md:" in missing[0]
    assert any("'gone/thing'" in line and "did not start" in line for line in lines)
    assert not any(
        "has no tool" in line and "'time/get_current_time'" in line.split("did you mean")[0] for line in lines
    )
    assert "starting MCP servers" in result.stderr
    assert stopped(int(pidfile.read_text()))


# -- the resolution check uses: nothing started ---------------------------------------------------------------


def test_remote_find_server_finds_a_declared_server_without_starting_it(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    tools = project(tmp_path, {"time": entry}, [], own={"mine": entry})
    with Manager([tools]) as manager:
        agent = manager.find_tool("helper")
        assert find_server(manager.registry, agent, "time/get_current_time", manager.paths).name == "time"
        assert find_server(manager.registry, agent, "mine/*", manager.paths).name == "mine"  # its own
        assert find_server(manager.registry, agent, "nothing/like/it", manager.paths) is None
        assert find_server(manager.registry, agent, "github/search", manager.paths) is None  # no server near
        with pytest.raises(ToolNotFoundError) as near:
            find_server(manager.registry, agent, "tme/get_current_time", manager.paths)
        assert near.value.suggestions == ["time/get_current_time"]
    assert not pidfile.exists()


def test_remote_find_server_refuses_an_untrusted_or_malformed_declaration(tmp_path):
    entry, pidfile = wrapped_time(tmp_path)
    tools = project(tmp_path, {"bad": {"comand": "x"}}, [])
    elsewhere = project(tmp_path / "elsewhere", {"evil": entry}, [])
    with Manager([tools]) as manager:
        with pytest.raises(ConfigurationError) as bad:
            find_server(manager.registry, manager.find_tool("helper"), "bad/x", manager.paths)
        assert bad.value.key == "mcp-servers.bad"
        paths = (manager.search_path(elsewhere), *manager.paths)
        untrusted = manager.registry.find("helper", paths)
        with pytest.raises(SecurityError) as refused:
            find_server(manager.registry, untrusted, "evil/x", paths)
        assert refused.value.key == "mcp-servers.evil"
        assert [d.name for d in declared(manager)] == ["bad"] and declared(manager)[0].error is not None
    assert not pidfile.exists()
