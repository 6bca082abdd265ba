"""check and MCP servers' tools (issue 27): a NAME/TOOL in tools is checked without starting the server."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from orchestrator import Manager
from orchestrator.check import check


def test_check_a_declared_servers_tool_is_no_problem_and_no_server_starts(tmp_path: Path):
    pidfile = tmp_path / "time.pid"
    script = tmp_path / "time-server.sh"
    script.write_text(f'#!/bin/sh\necho $$ > "{pidfile}"\nexec "{sys.executable}" -m mcp_server_time\n')
    script.chmod(0o755)
    root = tmp_path / "tools"
    root.mkdir()
    servers = {"time": {"command": str(script)}, "bad": {"comand": "x"}}
    (root / "AUTHORITY.md").write_text("---\n" + yaml.safe_dump({"metadata": {"mcp-servers": servers}}) + "---\n")
    names = ["time/get_current_time", "time/*", "mine/x", "tme/get_current_time", "bad/x", "team/nothing"]
    meta = {"model": "scripted", "tools": names, "mcp-servers": {"mine": {"command": str(script)}}}
    (root / "helper.md").write_text("---\n" + yaml.safe_dump({"description": "d", "metadata": meta}) + "---\nHi\n")
    with Manager([root]) as manager:
        problems = [str(p) for p in check(manager)]
    about = {name: [p for p in problems if f"names {name!r}" in p or f"no tool {name!r}" in p] for name in names}
    assert about["time/get_current_time"] == [] and about["time/*"] == [] and about["mine/x"] == []
    assert (
        len(about["tme/get_current_time"]) == 1
        and "did you mean 'time/get_current_time'" in about["tme/get_current_time"][0]
    )
    assert len(about["bad/x"]) == 1 and "mcp-servers.bad" in about["bad/x"][0]
    assert (
        len(about["team/nothing"]) == 1 and "which is not a tool" in about["team/nothing"][0]
    )  # no server near: as before
    assert all("helper.md:" in p for found in about.values() for p in found)  # at the line of tools
    assert not pidfile.exists()


def test_check_a_server_declared_by_an_untrusted_folder_is_reported_where_it_is_declared(tmp_path: Path):
    root = tmp_path / "tools"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    evil = {"mcp-servers": {"evil": {"command": "/bin/sh", "args": ["-c", f"touch {tmp_path / 'started'}"]}}}
    (elsewhere / "AUTHORITY.md").write_text("---\n" + yaml.safe_dump({"metadata": evil}) + "---\n")
    meta = {"model": "scripted", "tools": ["evil/run"], "paths": ["../elsewhere"]}
    (root / "helper.md").write_text("---\n" + yaml.safe_dump({"description": "d", "metadata": meta}) + "---\nHi\n")
    with Manager([root]) as manager:
        problems = [str(p) for p in check(manager)]
    assert any("evil" in p and "does not trust" in p for p in problems), problems
    assert not (tmp_path / "started").exists()
