"""GitHub Copilot prompt files (``*.prompt.md``) as tools (issue 15).

The realistic files live in tests/formats/copilot/.github/prompts/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from orchestrator import ArgsValidationError, Manager, ToolDefinitionError
from orchestrator.cli import cli
from orchestrator.formats import Front
from orchestrator.formats.copilot import FORMAT, map_model
from orchestrator.loader import read_text, split_frontmatter

pytestmark = pytest.mark.anyio

PROJECT = Path(__file__).parent / "formats" / "copilot"
PROMPTS = PROJECT / ".github" / "prompts"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(PROJECT, target)
    return target


def adapt(path: Path):
    data, lines, body, body_line = split_frontmatter(read_text(path), path, empty_ok=True)
    return FORMAT.adapt(path, Front(data, lines), body, body_line)


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="toolcascade")


# -- the adapter -------------------------------------------------------------------


def test_copilot_inputs_become_required_string_params_with_placeholders():
    adapted = adapt(PROMPTS / "new-component.prompt.md")
    assert adapted.name == "new-component"
    assert adapted.metadata["params"] == {
        "type": "object",
        "properties": {
            "component": {"type": "string", "description": "PascalCase name, e.g. DatePicker"},
            "folder": {"type": "string", "description": "folder under src/components"},
            "input": {
                "type": "string",
                "default": "",
                "description": "What is typed after /name: the request, sent after the prompt.",
            },
        },
        "additionalProperties": False,
        "required": ["component", "folder"],
    }
    assert adapted.prompt.startswith("Create a React component named {{ args['component'] }}\nin {{ args['folder'] }}")


def test_copilot_tools_ours_and_vscode_names_we_run_are_offered_the_rest_are_host_tools():
    meta = adapt(PROMPTS / "new-component.prompt.md").metadata
    assert meta["host-tools"] == ["github/*"]
    # codebase -> Grep, Glob, Read; editFiles -> Edit, Write; search -> Glob, Grep (VSCODE_HOST_TOOLS), each once.
    assert meta["tools"] == ["summarize", "Grep", "Glob", "Read", "Edit", "Write"]
    assert meta["format-fields"] == {"mode": "agent"}
    assert meta["$static"] == ["host-tools", "format-fields"]


def test_copilot_editor_variables_and_file_references_are_reported_and_kept_as_text(write):
    adapted = adapt(PROMPTS / "new-component.prompt.md")
    problems = dict((message.split(" ")[0], line) for line, message in adapted.problems)
    assert problems["${selection}"] == 13
    assert problems["#file:../../docs/components.md"] == 10
    assert "#codebase" not in problems and "#codebase" in adapted.prompt  # it names a tool we run: only text
    fetching = adapt(
        write("p/look.prompt.md", "---\ntools: ['githubRepo', 'codebase']\n---\nUse #codebase,\nthen #githubRepo.\n")
    )
    assert [(line, m) for line, m in fetching.problems if m.startswith("#")] == [
        (5, "#githubRepo names a VS Code tool: it stays text and never runs")
    ]
    assert any("../../STYLE.md" in message for _line, message in adapted.problems)
    assert "${selection}" in adapted.prompt and "#file:../../docs/components.md" in adapted.prompt


def test_copilot_model_names_map_by_table_or_stay_as_written():
    assert map_model("GPT-4o")[0] == "openai:gpt-4o"
    assert map_model("o3-mini (Preview)")[0] == "openai:o3-mini"
    assert map_model("Claude Sonnet 4")[0] == "anthropic:claude-sonnet-4-0"
    assert map_model("openai:gpt-4o-mini") == ("openai:gpt-4o-mini", "kept", True)
    assert map_model("sonnet")[0] == "anthropic:claude-sonnet-4-5"  # the shared alias table
    spec, note, lossless = map_model("Gemini 2.5 Pro")  # never guessed (issue 28): a run fails naming the aliases
    assert spec == "Gemini 2.5 Pro" and not lossless and "kept as written" in note


def test_copilot_name_overrides_the_file_name_and_other_fields_are_data():
    adapted = adapt(PROMPTS / "release-notes.prompt.md")
    assert adapted.name == "notes"
    assert adapted.metadata["model"] == "openai:gpt-4o-mini"
    assert adapted.metadata["format-fields"] == {"argument-hint": "the version and the changes"}
    assert adapted.metadata["params"]["required"] == ["version", "changes"]


# -- through the engine ------------------------------------------------------------


async def test_copilot_without_a_model_returns_the_substituted_prompt(project):
    manager = Manager([project])
    result = await manager.invoke(
        "new-component", {"component": "DatePicker", "folder": "src/components/forms"}, overrides={"$remove": ["model"]}
    )
    assert result.startswith("Create a React component named DatePicker\nin src/components/forms.")
    assert "Props are written as `{{ props }}` in our docs" in result  # literal text is never a template
    assert "(${selection})" in result


async def test_copilot_inputs_are_required(project):
    with pytest.raises(ArgsValidationError, match="component"):
        await Manager([project]).invoke("new-component", {"folder": "x"})


async def test_copilot_with_the_scripted_model(project):
    turn = {"answer": "Notes drafted.", "expect": {"contains": ["version 2.1", "- fixed login"]}}
    result = await Manager([project]).invoke(
        "notes",
        {"version": "2.1", "changes": "- fixed login"},
        overrides={"model": {"provider": "scripted", "script": [turn]}},
    )
    assert result == "Notes drafted."


async def test_copilot_offers_ours_and_the_built_ins_never_the_host_tools(project, write):
    write("project/tools/summarize.md", "---\ndescription: Summarizes.\n---\nsummary\n")
    # ours and the built-ins codebase, editFiles and search map to are offered; github/* never is
    turn = {"answer": "done", "expect": {"tools": ["summarize", "Grep", "Glob", "Read", "Edit", "Write"]}}
    result = await Manager([project / "tools", project]).invoke(
        "new-component",
        {"component": "A", "folder": "b"},
        overrides={"model": {"provider": "scripted", "script": [turn]}},
    )
    assert result == "done"


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("---\ntools: [unclosed\n---\nhi\n", 2, "invalid YAML"),  # the unclosed [ (a description would be text)
        ("---\ntools: {a: 1}\n---\nhi\n", 2, "tools"),
        ("---\nmodel: [gpt-4o]\n---\nhi\n", 2, "'model' must be text"),
        ("---\nmode: {ask: true}\n---\nhi\n", 2, "'mode' must be text"),
        ("---\nname: ''\n---\nhi\n", 2, "'name' must be non-empty"),
    ],
)
async def test_copilot_malformed_file_is_a_typed_error_with_file_and_line(write, tmp_path, text, line, match):
    path = write("p/bad.prompt.md", text)
    with pytest.raises(ToolDefinitionError, match=match) as info:
        await Manager([tmp_path / "p"]).invoke("bad", {})
    assert info.value.path == str(path)
    assert info.value.line == line


# -- the command line and MCP --------------------------------------------------------


def test_copilot_cli_list_show_check_run_from_the_project_root(project):
    listed = cli_run("list", "--json", "--path", str(project))
    assert listed.exit_code == 0, listed.output
    assert {row["name"] for row in json.loads(listed.stdout)} == {"new-component", "explain", "notes"}

    shown = cli_run("show", "new-component", "--json", "--path", str(project))
    assert shown.exit_code == 0, shown.output
    assert "host-tools" in shown.stdout and "${input:component:PascalCase name, e.g. DatePicker}" in shown.stdout

    ran = cli_run("run", "explain", "--set", "$remove=[model]", "--path", str(project))
    assert ran.exit_code == 0, ran.output
    assert ran.stdout.startswith("Explain what the following code in ${file} does")

    checked = cli_run("check", "--path", str(project))
    assert "explain.prompt.md:6: " in checked.stdout and "${file}" in checked.stdout


async def test_copilot_mcp_tools_list(project):
    from mcp import Client

    from orchestrator.mcp import build_server

    with anyio.fail_after(20):
        async with Client(build_server(Manager([project]))) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"new-component", "explain", "notes"}
    assert tools["notes"].input_schema["required"] == ["version", "changes"]
    assert tools["explain"].description == "Explain the selected code to a new team member"


async def test_a_folder_mixing_formats_lists_runs_and_reports_collisions(project, write):
    shutil.copy(Path(__file__).parent / "formats" / "prompty" / "haiku-card.prompty", project / "haiku-card.prompty")
    write("project/greet.md", "---\ndescription: Ours.\n---\nHello {{ args.name }}\n")
    write("project/notes.prompty", "---\ndescription: Also notes.\n---\nuser:\nnotes\n")
    manager = Manager([project])
    names = {info.name: info for info in manager.list_tools()}
    assert {"greet", "haiku-card", "new-component", "explain", "notes"} <= set(names)
    assert await manager.invoke("greet", {"name": "Ada"}) == "Hello Ada"
    assert (await manager.invoke("haiku-card", {"recipient": "Ada"}))[0]["role"] == "system"
    assert (await manager.invoke("explain", {}, overrides={"$remove": ["model"]})).startswith("Explain what")
    checked = cli_run("check", "--path", str(project))
    # release-notes.prompt.md says name: notes; notes.prompty has no name of its own, only its stem: hidden, a warning
    assert "notes' hides" in checked.stdout and "notes.prompty, which no name reaches now" in checked.stdout
