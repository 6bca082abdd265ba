"""VS Code custom agents (*.agent.md) and chat modes (*.chatmode.md) as agents (issue 28).

The fixtures live in tests/formats/hosts/.github/agents and .github/chatmodes;
the export round trip of every fixture (tests/test_export.py) covers them
too. Runs use the scripted model through the ``scripted`` alias fixture.
"""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import Manager
from orchestrator.cli import cli
from orchestrator.export import export_tool
from orchestrator.formats import aliases
from orchestrator.hosttools import IMPLEMENTED_ORDER

pytestmark = pytest.mark.anyio

HOSTS = Path(__file__).parent / "formats" / "hosts"


def call(name: str, **arguments: object) -> dict:
    return {"calls": [{"name": name, "arguments": arguments}]}


def cli_in(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(folder)
    return CliRunner().invoke(cli, list(args))


def test_custom_agents_and_chat_modes_are_listed_as_copilot_agents():
    infos = {info.ref: info for info in Manager([HOSTS]).list_tools()}
    assert infos["security-review"].format == "copilot-agent"
    assert infos["architect"].format == "copilot-agent"
    assert infos["security-review"].description == "Reviews changes for security problems without editing files"
    assert infos["security-review"].params["required"] == ["prompt"]
    assert infos["security-review"].params["properties"]["prompt"]["description"] == "The change or files to review"


def test_an_agents_fields_map_onto_an_agent():
    tool = Manager([HOSTS]).find_tool("security-review")
    meta = tool.metadata
    assert meta["model"] == "anthropic:claude-sonnet-4-5"  # the first of VS Code's fallback list
    assert meta["tools"] == ["Grep", "Glob", "Read", "WebFetch"]  # codebase and fetch run as built-ins
    assert meta["host-tools"] == ["githubRepo"]
    assert meta["system"].startswith("You review code for security problems")
    assert tool.prompt == "{{ args.prompt }}"
    fields = meta["format-fields"]
    assert fields["name"] == "Security Reviewer" and fields["target"] == "vscode"
    assert fields["handoffs"][0]["label"] == "Fix the findings"
    notes = {(m.source, m.target): m.note for m in tool.mapping}
    assert "fallback list" in notes[("model", "model")]
    assert "display name 'Security Reviewer'" in notes[("name", "format-fields")]


def test_a_plain_name_names_the_agent_and_no_tools_means_every_host_built_in(write, tmp_path):
    write("p/.github/agents/x.agent.md", "---\nname: reviewer\ndescription: Reviews.\n---\nReview it.\n")
    tool = Manager([tmp_path / "p"]).find_tool("reviewer")
    assert tool.metadata["tools"] == list(IMPLEMENTED_ORDER)
    assert tool.metadata["model"] == aliases()["inherit"]  # no model: the inherit alias, as VS Code's picker


async def test_a_custom_agent_runs_with_its_instructions_and_reads_a_file(write, tmp_path, scripted):
    write("p/docs/notes.md", "The launch code is BLUE-HARBOUR-7.\n")
    write(
        "p/.github/agents/finder.agent.md",
        "---\ndescription: Finds things.\ntools: ['readFile']\nmodel: sonnet\n---\nYou find facts in the project.\n",
    )
    scripted(
        sonnet=[
            {
                "expect": {"contains": ["You find facts in the project.", "the launch code?"], "tools": ["Read"]},
                **call("Read", file_path="docs/notes.md"),
            },
            {"expect": {"contains": ["BLUE-HARBOUR-7"]}, "answer": "BLUE-HARBOUR-7"},
        ]
    )
    manager = Manager([tmp_path / "p"], cwd=tmp_path / "p")
    assert await manager.invoke("finder", {"prompt": "the launch code?"}) == "BLUE-HARBOUR-7"


async def test_a_chat_mode_runs_like_an_agent(write, tmp_path, scripted):
    write("p/.github/chatmodes/plan.chatmode.md", "---\ndescription: Plans.\nmodel: sonnet\n---\nYou plan.\n")
    scripted(sonnet=[{"expect": {"contains": ["You plan.", "add a cache"]}, "answer": "1. measure"}])
    assert await Manager([tmp_path / "p"]).invoke("plan", {"prompt": "add a cache"}) == "1. measure"


def test_show_check_and_format_selection(monkeypatch):
    shown = cli_in(HOSTS, monkeypatch, "show", "security-review", "--json", "--path", ".")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["format"] == "copilot-agent" and data["host_tools"] == ["githubRepo"]
    checked = cli_in(HOSTS, monkeypatch, "check", "--path", ".")
    assert any(
        line.startswith(".github/agents/security-review.agent.md:15: ") and "${selection}" in line
        for line in checked.output.splitlines()
    )
    listed = cli_in(HOSTS, monkeypatch, "list", "--format", "copilot", "--path", ".")
    names = {line.split()[0] for line in listed.output.splitlines() if line.strip()}
    assert {"security-review", "architect", "lint", "tidy"} <= names
    assert "planner" not in names  # a Claude Code subagent: not one of the copilot formats


def test_an_unknown_model_is_a_check_warning_never_a_guess(write, tmp_path):
    write("p/.github/agents/odd.agent.md", "---\nmodel: Fable 9 (copilot)\n---\nHi.\n")
    tool = Manager([tmp_path / "p"]).find_tool("odd")
    assert tool.metadata["model"] == "Fable 9 (copilot)"
    assert any(line == 2 and "Fable 9" in message for line, message in tool.problems)


def test_an_agent_exports_to_a_subagent_that_loads_back_with_the_same_instructions(tmp_path):
    tool = Manager([HOSTS]).find_tool("architect")
    exported = export_tool(tool, "claude-agent")
    target = tmp_path / "back" / ".claude" / "agents" / "architect.md"
    target.parent.mkdir(parents=True)
    target.write_text(exported.text)
    back = Manager([tmp_path / "back"]).find_tool("architect")
    assert back.metadata["system"] == tool.metadata["system"]
    assert list(back.metadata["tools"]) == ["Glob", "Grep"]
    assert "usages" in {item.why.split(":")[0] for item in exported.lost if item.field == "host-tools"}


def test_the_format_is_an_installed_entry_point():
    names = {point.name: point.value for point in entry_points(group="toolcascade.formats")}
    assert names["copilot-agent"] == "orchestrator.formats.chatmodes:FORMAT"
