"""Claude Code subagents, slash commands and skills as tools (issue 15), end to end.

The project in ``tests/formats/claude`` is copied to tmp_path for every test:
``.claude/agents``, ``.claude/commands`` (one namespaced), a skill with
resources, and one tool of ours (``tools/changelog.md``) an agent calls.
Models are scripted: ``TOOLCASCADE_MODEL_ALIASES`` points the aliases there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from orchestrator import ArgsValidationError, ConfigurationError, Manager, ToolDefinitionError
from orchestrator.check import check
from orchestrator.cli import cli
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "formats" / "claude"
CLAUDE_TOOLS = {"code-reviewer", "test-writer", "commit", "frontend:component", "explain", "triage", "release-notes"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def manager_for(project: Path, **options) -> Manager:
    return Manager([project / "tools", project], **options)


def cli_in(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(folder)
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner(env=env).invoke(cli, list(args), prog_name="toolcascade")


# -- list and names ----------------------------------------------------------------------


def test_list_names_every_claude_file_and_no_resource(project):
    infos = {info.ref: info for info in manager_for(project).list_tools()}
    assert CLAUDE_TOOLS <= set(infos)
    assert all(info.error is None for info in infos.values()), {r: i.error for r, i in infos.items() if i.error}
    assert infos["frontend:component"].description == "Scaffold a React component"
    assert infos["explain"].description == "Explain the following code to a new team member, step by step."
    assert infos["code-reviewer"].params["required"] == ["prompt"]
    assert infos["commit"].params["properties"]["arguments"]["description"] == "Arguments: [scope]"
    # The skill's other files stay files: never tools, and collect.py is never imported.
    assert not any("template" in ref or "collect" in ref or "SKILL" in ref for ref in infos)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (".claude/agents", {"code-reviewer", "test-writer"}),
        (".claude/commands", {"commit", "frontend:component", "explain", "triage"}),
        (".claude/skills", {"release-notes"}),
        (".claude", CLAUDE_TOOLS),
        (".", CLAUDE_TOOLS | {"tools/changelog"}),
    ],
)
def test_path_may_be_the_project_root_claude_or_a_location_itself(project, where, expected):
    assert {info.ref for info in Manager([project / where]).list_tools()} == expected


def test_a_path_ref_into_claude_still_finds_the_file(project):
    manager = Manager([project])
    assert manager.find_tool(".claude/agents/code-reviewer").name == "code-reviewer"
    assert manager.find_tool(".claude/commands/frontend/component").name == "frontend:component"


def test_formats_select_what_each_search_path_reads(project):
    only_agents = Manager([project], formats={str(project): "claude-agent"})
    assert {i.ref for i in only_agents.list_tools()} == {"code-reviewer", "test-writer", "tools/changelog"}
    assert {i.ref for i in Manager([project], formats=[]).list_tools()} == {"tools/changelog"}
    grouped = Manager([project / ".claude"], formats=["claude"])
    assert {i.ref for i in grouped.list_tools()} == CLAUDE_TOOLS
    with pytest.raises(ConfigurationError, match=r"unknown format 'claude-agents'.*known: .*claude-agent"):
        Manager([project], formats=["claude-agents"])
    with pytest.raises(ConfigurationError, match="formats must be"):
        Manager([project], formats=42)


# -- running ------------------------------------------------------------------------


async def test_subagent_body_is_the_system_prompt_and_the_task_the_user_message(project, scripted):
    scripted(
        sonnet=[
            {
                "expect": {
                    "contains": ["careful senior reviewer", "Review utils.py"],
                    # Claude Code's Read, Grep, Glob and Bash(git diff:*) run as our built-ins: offered too.
                    "tools": ["changelog", "Read", "Grep", "Glob", "Bash"],
                },
                "calls": [{"name": "changelog", "arguments": {}}],
            },
            {"expect": {"contains": ["1.4.0"], "last-role": "tool"}, "answer": "LGTM, add a test."},
        ]
    )
    manager = manager_for(project)
    assert await manager.invoke("code-reviewer", {"prompt": "Review utils.py"}) == "LGTM, add a test."
    tool = manager.find_tool("code-reviewer")
    # Text that looks like jinja2 in a Claude file stays literal: it is not our template language.
    system = manager.explain("code-reviewer", {"prompt": "x"}).key("system").value
    assert "`if {{ not x }}` stays as written" in system
    assert list(tool.metadata["tools"]) == ["changelog", "Read", "Grep", "Glob", "Bash"]
    assert tool.metadata["host-rules"] == {"Bash": ["git diff:*"]}
    assert "host-tools" not in tool.metadata  # every name it lists runs
    assert tool.metadata["format-fields"] == {"color": "purple"}


async def test_subagent_without_model_uses_the_inherit_alias(project, scripted):
    scripted(inherit=[{"expect": {"contains": ["one behaviour per test"]}, "answer": "def test_add(): ..."}])
    assert await manager_for(project).invoke("test-writer", {"prompt": "add(a, b)"}) == "def test_add(): ..."


async def test_subagent_needs_its_task(project, scripted):
    scripted(sonnet=["never asked"])
    with pytest.raises(ArgsValidationError, match="prompt"):
        await manager_for(project).invoke("code-reviewer", {})


async def test_command_substitutes_arguments_and_positional_words(project):
    manager = manager_for(project)
    text = await manager.invoke("frontend:component", {"arguments": "Button primary"})
    assert text == (
        "Create a React component named Button in src/components/Button.tsx.\n"
        'Use the "primary" variant when one is given; export it as the default.'
    )
    missing = await manager.invoke("frontend:component", {"arguments": "Card"})
    assert 'Use the "" variant' in missing
    commit = await manager.invoke("commit", {"arguments": "api"})
    assert "for scope api," in commit
    # Without host-trust {context: true}: never read, never run, the text stays as written.
    assert "!`git status --short`" in commit and "@docs/COMMITS.md" in commit


async def test_command_without_placeholders_gets_the_arguments_appended(project):
    manager = manager_for(project)
    plain = await manager.invoke("explain")
    assert plain == "Explain the following code to a new team member, step by step."
    given = await manager.invoke("explain", {"arguments": "def f(): pass"})
    assert given.endswith("\n\nARGUMENTS: def f(): pass")


async def test_command_arguments_are_data_never_templates(project):
    text = await manager_for(project).invoke("commit", {"arguments": "{{ 7 * 6 }} {% raw %}"})
    assert "for scope {{ 7 * 6 }} {% raw %}," in text


async def test_command_with_a_model_is_answered_by_it(project, scripted):
    scripted(haiku=[{"expect": {"contains": ["Triage this issue", "crash on save"]}, "answer": "bug"}])
    assert await manager_for(project).invoke("triage", {"arguments": "crash on save"}) == "bug"


async def test_skill_prompt_is_its_instructions(project):
    text = await manager_for(project).invoke("release-notes", {"arguments": "feat: names; fix: stat"})
    assert text.startswith("# Release notes")
    assert text.endswith("Titles: feat: names; fix: stat")


# -- show and check --------------------------------------------------------------------


def test_show_json_gives_the_format_and_how_each_field_was_mapped(project, monkeypatch):
    result = cli_in(project, monkeypatch, "show", "code-reviewer", "--json", "--path", "tools", "--path", ".")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["format"] == "claude-agent"
    assert data["host_tools"] == []  # Read, Grep, Glob and Bash(git diff:*) run as built-ins
    mapped = {(m["source"], m["target"]): m for m in data["mapping"]}
    assert mapped[("model", "model")]["note"].startswith("alias sonnet -> ")
    notes = [m["note"] for m in data["mapping"] if (m["source"], m["target"]) == ("tools", "tools")]
    assert "our tools, offered to the model: changelog" in notes
    assert any(
        n.startswith("Claude Code's tools, run by toolcascade's built-ins: Read, Grep, Glob, Bash") for n in notes
    )
    assert mapped[("tools", "host-rules")]["note"] == "permission patterns narrow the tools: Bash(git diff:*)"
    assert ("tools", "host-tools") not in mapped
    assert mapped[("body", "system")]["lossless"] is True
    assert mapped[("color", "format-fields")]["note"] == "kept as data: not used by toolcascade"


def test_show_text_lists_the_mapping_and_host_tools(project, monkeypatch):
    result = cli_in(project, monkeypatch, "show", "commit", "--path", ".")
    assert result.exit_code == 0, result.output
    assert "claude-command (read through its adapter" in result.output
    assert "mapping from claude-command" in result.output
    assert "Claude Code's tools, run by toolcascade's built-ins: Bash" in result.output
    assert "permission patterns narrow the tools: Bash(git status:*), Bash(git diff --staged:*)" in result.output
    assert "kept as data: never offered, never run" not in result.output  # no host tool of commit stays data
    assert "!`git status --short` runs only when the program grants host-trust: {context: true, exec: true}" in (
        result.output
    )


def test_check_reports_unsupported_features_and_host_tools_with_file_and_line(project, monkeypatch):
    (project / ".claude/agents/researcher.md").write_text(
        "---\nname: researcher\ndescription: Looks things up\ntools: Read, WebSearch, mcp__github__get_pr\n---\n"
        "Find the answer.\n",
        encoding="utf-8",
    )
    result = cli_in(project, monkeypatch, "check", "--path", "tools", "--path", ".")
    lines = result.output.splitlines()
    assert result.exit_code == 0, result.output  # warnings only
    assert (
        ".claude/commands/commit.md:8: warning: claude-command: !`git status --short` runs only when the program "
        "grants host-trust: {context: true, exec: true} and allowed-tools lists Bash (e.g. Bash(git status:*)); "
        "until then it stays text" in lines
    )
    assert (
        ".claude/commands/commit.md:9: warning: claude-command: @docs/COMMITS.md is inlined only when the program "
        "grants host-trust: {context: true}; until then it stays text" in lines
    )
    # Host tools we do not run are kept as data and reported; the ones we run (Read, Bash...) are neither.
    assert (
        ".claude/agents/researcher.md:4: warning: claude-agent: host tools WebSearch, mcp__github__get_pr are kept "
        "as data: never offered to a model, never run" in lines
    )
    assert not any(line.startswith(".claude/agents/code-reviewer.md") for line in lines), lines
    assert not any("collect.py" in line or "template.md" in line for line in lines)


def test_names_colliding_across_formats_are_reported_with_both_files(project, monkeypatch):
    (project / "code-reviewer.md").write_text("---\nname: code-reviewer\n---\nours\n", encoding="utf-8")
    (project / ".claude/commands/test-writer.md").write_text("A command named like an agent.\n", encoding="utf-8")
    manager = Manager([project])
    problems = [str(p) for p in check(manager)]
    assert any(
        p.startswith(str(project / ".claude/agents/code-reviewer.md") + ":2: the name 'code-reviewer' is claimed by")
        and "code-reviewer.md too, which wins" in p
        for p in problems
    ), problems
    # Our own file comes first in its search path, so it wins; the agent is reported.
    assert manager.invoke_sync("code-reviewer") == "ours"
    assert any("'test-writer' is claimed by" in p and "agents/test-writer.md" in p for p in problems), problems


# -- MCP -------------------------------------------------------------------------------


async def test_mcp_lists_and_calls_claude_tools(project, scripted):
    with anyio.fail_after(20):
        async with Client(build_server(manager_for(project))) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            called = await client.call_tool("frontend_component", {"arguments": "Nav"})
    assert {"code-reviewer", "frontend_component", "release-notes", "changelog"} <= set(listed)
    assert listed["code-reviewer"].input_schema["required"] == ["prompt"]
    assert called.content[0].text.startswith("Create a React component named Nav")


# -- malformed files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "text", "line", "match"),
    [
        (".claude/agents/bad.md", "---\nname: bad\ntools: [Read\n---\nx\n", 3, "invalid YAML"),  # the unclosed [
        (".claude/agents/bad.md", "---\nname: bad\ntools: 5\n---\nx\n", 3, "'tools' must be a comma-separated"),
        (".claude/agents/bad.md", "---\nname: [a, b]\n---\nx\n", 2, "'name' must be text"),
        (".claude/agents/bad.md", "---\nname: bad\ndescription: {a: 1}\n---\nx\n", 3, "'description' must be text"),
        (".claude/commands/bad.md", "---\nallowed-tools: {Read: true}\n---\nx\n", 2, "'allowed-tools' must be"),
        (".claude/commands/bad.md", "---\nmodel: [haiku]\n---\nx\n", 2, "'model' must be text"),
        (".claude/commands/bad.md", "---\ndescription: x\n", 1, "never closed"),
        (".claude/skills/bad/SKILL.md", "---\nname: bad\nargument-hint: {a: 1}\n---\nx\n", 3, "'argument-hint'"),
    ],
)
def test_malformed_files_are_typed_errors_naming_file_and_line(tmp_path, rel, text, line, match):
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    manager = Manager([tmp_path])
    ref = rel.removesuffix(".md")
    with pytest.raises(ToolDefinitionError, match=match) as info:
        manager.find_tool(ref)
    assert (info.value.path, info.value.line) == (str(path), line)
    listed = {i.ref: i for i in manager.list_tools()}
    broken = [i for i in listed.values() if i.error is not None]
    assert len(broken) == 1 and isinstance(broken[0].error, ToolDefinitionError)
    assert any(str(p).startswith(f"{rel}:{line}: ") or f"{path}:{line}: " in str(p) for p in check(manager))


def test_a_malformed_alias_table_names_the_variable(project, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_MODEL_ALIASES", "sonnet: [")
    with pytest.raises(ToolDefinitionError, match="TOOLCASCADE_MODEL_ALIASES is not a YAML mapping"):
        manager_for(project).find_tool("code-reviewer")
