"""Every file its own host accepts loads here, and does its job (issue 28): Claude Code and Copilot files.

The project in ``tests/formats/hosts`` (written by us in the shapes the hosts
document) is copied to tmp_path: agents whose frontmatter is not strict YAML,
a command with ``argument-hint: [pr-number] [priority]`` and a ```` ```! ````
block, a skill whose ``name:`` is a display name, Copilot prompt files with
VS Code's own tools and model picker names, and one tool of ours.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import ConfigurationError, Manager, ToolDefinitionError
from orchestrator.cli import cli
from orchestrator.formats import resolve_model, unknown_model
from orchestrator.formats.copilot import map_model
from orchestrator.formats.lenient import chunks

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "formats" / "hosts"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def manager_for(project: Path) -> Manager:
    return Manager([project / "tools", project])


def cli_in(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(folder)
    env = {"NO_COLOR": "1", "COLUMNS": "250", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner(env=env).invoke(cli, list(args), prog_name="toolcascade")


def checked(project: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    result = cli_in(project, monkeypatch, "check", "--path", "tools", "--path", ".")
    assert result.exit_code == 0, result.output  # warnings only
    return result.output.splitlines()


# -- lenient where the host is -------------------------------------------------------------


def test_frontmatter_that_is_not_strict_yaml_is_read_key_by_key_as_the_host_reads_it(project):
    tool = manager_for(project).find_tool("planner")
    assert tool.description.startswith("Use this agent when a release needs a plan. Examples:\n<example>\n")
    # The lines of the <example> block that look like keys stay in the description: the tag is still open.
    assert 'user: "plan the 2.0 release"\n' in tool.description and tool.description.endswith("</example>")
    assert list(tool.metadata["tools"]) == ["Read", "Grep", "Glob"]  # the key after </example> is a key again
    assert tool.metadata["format-fields"] == {"color": "blue"}
    assert tool.metadata["model"] == "anthropic:claude-sonnet-4-5"


def test_check_warns_of_each_key_read_as_text_with_file_and_line(project, monkeypatch):
    lines = checked(project, monkeypatch)
    planner = [line for line in lines if line.startswith(".claude/agents/planner.md:3: warning: claude-agent: ")]
    assert len(planner) == 1 and "not valid YAML at 'description'" in planner[0] and "quote the value" in planner[0]
    assert any(
        line.startswith(".claude/commands/review-pr.md:3: warning: claude-command: frontmatter is not valid YAML")
        and "'argument-hint'" in line
        for line in lines
    )
    assert any(
        line.startswith(".github/prompts/lint.prompt.md:3: warning: copilot-prompt: frontmatter is not valid YAML")
        for line in lines
    )


def test_show_says_which_key_was_read_as_text(project, monkeypatch):
    shown = cli_in(project, monkeypatch, "show", "review-pr", "--json", "--path", ".")
    assert shown.exit_code == 0, shown.output
    problems = json.loads(shown.output)["problems"]
    assert [3, problems[0][1]] == problems[0] and "'argument-hint'" in problems[0][1]
    text = cli_in(project, monkeypatch, "show", "review-pr", "--path", ".")
    assert "frontmatter is not valid YAML at 'argument-hint'" in text.output


async def test_argument_hint_of_brackets_is_the_text_written(project):
    manager = manager_for(project)
    review = manager.find_tool("review-pr")
    assert review.metadata["params"]["properties"]["arguments"]["description"] == "Arguments: [pr-number] [priority]"
    text = await manager.invoke("review-pr", {"arguments": "42 high"})
    assert text.startswith("Review pull request #42 at priority high.")
    # A YAML list in a field the host documents as text is read as written, with a warning, never refused.
    scaffold = manager.find_tool("scaffold")
    assert scaffold.metadata["params"]["properties"]["arguments"]["description"] == "Arguments: [name]"
    assert any("'argument-hint' is a YAML list" in message for _line, message in scaffold.problems)


def test_a_block_list_in_a_text_field_is_its_items_one_per_line(write, tmp_path):
    write(".claude/commands/plan.md", "---\ndescription:\n  - Plan the work\n  - then do it\n---\nPlan $ARGUMENTS\n")
    assert Manager([tmp_path]).find_tool("plan").description == "Plan the work\nthen do it"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("---\nname: bad\ntools: [Read\n---\nx\n", 3),  # a list the host cannot read either
        ("---\nname: bad\n  stray: [\n---\nx\n", 3),
    ],
)
def test_a_key_that_is_not_text_and_not_yaml_stays_an_error_at_its_line(write, tmp_path, text, line):
    path = write(".claude/agents/bad.md", text)
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tmp_path]).find_tool("bad")
    assert (info.value.path, info.value.line) == (str(path), line)


def test_our_own_markdown_tools_stay_strict(write, tmp_path):
    path = write("tools/plan.md", "---\ndescription: Plan it: step by step\nargument-hint: [a] [b]\n---\nx\n")
    with pytest.raises(ToolDefinitionError, match="invalid YAML") as info:
        Manager([tmp_path / "tools"]).find_tool("plan")
    assert info.value.path == str(path) and info.value.line == 2


def test_a_line_outside_any_key_is_an_error_naming_it(write, tmp_path):
    path = write(".claude/commands/odd.md", "---\n: [\ndescription: x\n---\nbody\n")
    with pytest.raises(ToolDefinitionError, match="neither 'key: value' nor part of a value") as info:
        Manager([tmp_path]).find_tool("odd")
    assert (info.value.path, info.value.line) == (str(path), 2)


def test_chunks_keep_continuation_lines_with_their_key():
    found = chunks("# a comment\ndescription: one\n  two\n<x>\nuser: three\n</x>\nmodel: haiku")
    assert [(chunk.key, chunk.start) for chunk in found] == [("description", 1), ("model", 6)]
    assert found[0].text() == "one\ntwo\n<x>\nuser: three\n</x>"


# -- skills ---------------------------------------------------------------------------------


async def test_a_skill_is_found_by_its_folder_and_its_name_is_a_display_name(project):
    manager = manager_for(project)
    tool = manager.find_tool("hookify")
    assert tool.name == "hookify"
    assert tool.metadata["format-fields"] == {"name": "Writing Hookify Rules"}
    assert "hookify" in {info.ref for info in manager.list_tools()}
    assert "Writing Hookify Rules" not in {info.ref for info in manager.list_tools()}
    assert (await manager.invoke("hookify", {"arguments": "no force push"})).endswith(
        "Write one rule for: no force push"
    )


def test_space_separated_allowed_tools_are_separate_names(project):
    tool = manager_for(project).find_tool("hookify")
    assert list(tool.metadata["tools"]) == ["Read", "Edit", "Bash"]
    assert tool.metadata["host-rules"] == {"Bash": ["git log:*"]}
    assert "host-tools" not in tool.metadata


# -- the host's tools -------------------------------------------------------------------------


async def test_claude_code_tools_we_run_are_offered_the_others_kept_as_host_tools_never_failing_a_run(
    project, scripted
):
    (project / ".claude/agents/scout.md").write_text(
        "---\nname: scout\ndescription: Looks around.\ntools: Read, WebSearch, Task, mcp__x__y\nmodel: haiku\n---\n"
        "You look around and report.\n",
        encoding="utf-8",
    )
    scripted(
        sonnet=[
            {
                "expect": {"tools": ["Read", "Grep", "Glob"], "contains": ["numbered steps", "ship 2.0"]},
                "answer": "1. tag",
            }
        ],
        haiku=[{"expect": {"tools": ["Read"], "contains": ["look around", "the repo"]}, "answer": "seen"}],
    )
    manager = manager_for(project)
    assert await manager.invoke("planner", {"prompt": "ship 2.0"}) == "1. tag"
    assert list(manager.find_tool("scout").metadata["host-tools"]) == ["WebSearch", "Task", "mcp__x__y"]
    assert await manager.invoke("scout", {"prompt": "the repo"}) == "seen"


async def test_copilot_tools_we_do_not_know_stay_the_hosts(project):
    manager = manager_for(project)
    tool = manager.find_tool("lint")
    assert list(tool.metadata["host-tools"]) == ["terminalCommand", "pylanceRunCodeSnippet", "Microsoft Docs"]
    assert list(tool.metadata["tools"]) == ["summarize"]
    turn = {"expect": {"tools": ["summarize"]}, "answer": "clean"}
    overrides = {"model": {"provider": "scripted", "script": [turn]}}
    assert await manager.invoke("lint", {}, overrides=overrides) == "clean"


def test_check_lists_a_files_host_tools_once(project, monkeypatch):
    lines = checked(project, monkeypatch)
    lint = [line for line in lines if "lint.prompt.md" in line and "host tools" in line]
    assert lint == [
        ".github/prompts/lint.prompt.md:5: warning: copilot-prompt: host tools terminalCommand, "
        "pylanceRunCodeSnippet, Microsoft Docs are kept as data: never offered to a model, never run"
    ]
    assert not any("'terminalCommand' is not a tool" in line for line in lines)


# -- Copilot prompt files take their task ---------------------------------------------------------


async def test_copilot_text_after_the_slash_command_is_the_request(project):
    manager = manager_for(project)
    plain = {"$remove": ["model"]}
    alone = await manager.invoke("tidy", {}, overrides=plain)
    assert alone == "Sort and group the imports; remove the unused ones."
    asked = await manager.invoke("tidy", {"input": "src/app.py, keep the __future__ import"}, overrides=plain)
    assert asked == alone + "\n\nsrc/app.py, keep the __future__ import"
    turn = {"expect": {"contains": ["remove the unused ones", "src/app.py"]}, "answer": "tidied"}
    overrides = {"model": {"provider": "scripted", "script": [turn]}}
    assert await manager.invoke("tidy", {"input": "src/app.py"}, overrides=overrides) == "tidied"


async def test_copilot_input_is_data_never_a_template(project):
    text = await manager_for(project).invoke("tidy", {"input": "{{ 7 * 6 }}"}, overrides={"$remove": ["model"]})
    assert text.endswith("\n\n{{ 7 * 6 }}")


# -- models -------------------------------------------------------------------------------------


def test_an_unknown_model_name_is_never_guessed(project):
    assert resolve_model("fable")[0] == "fable"
    assert resolve_model("claude-3-5-haiku-20241022")[0] == "anthropic:claude-3-5-haiku-20241022"
    assert manager_for(project).find_tool("dreamer").metadata["model"] == "sonet"
    assert unknown_model("sonnet") is None
    assert "did you mean 'sonnet'?" in (unknown_model("sonet") or "")


def test_check_warns_of_an_unknown_model_with_the_aliases(project, monkeypatch):
    lines = checked(project, monkeypatch)
    dreamer = [line for line in lines if line.startswith(".claude/agents/dreamer.md:4: warning: ")]
    assert len(dreamer) == 1
    assert "'sonet' is not a model alias or id" in dreamer[0] and "haiku, inherit, opus, sonnet" in dreamer[0]
    assert "did you mean 'sonnet'?" in dreamer[0]
    assert any(
        line.startswith(".github/prompts/tidy.prompt.md:3: warning: ") and "Gemini 2.5 Pro" in line for line in lines
    )


async def test_running_an_unknown_model_fails_naming_the_aliases(project):
    with pytest.raises(ConfigurationError, match=r"'sonet'") as info:
        await manager_for(project).invoke("dreamer", {"prompt": "a cat"})
    assert all(alias in str(info.value) for alias in ("haiku", "opus", "sonnet"))  # the aliases, named
    assert "anthropic:sonet" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("Claude Sonnet 4.5 (copilot)", "anthropic:claude-sonnet-4-5"),
        ("Claude Haiku 4.5 (copilot)", "anthropic:claude-haiku-4-5"),
        ("Claude Opus 4.1 (copilot)", "anthropic:claude-opus-4-1"),
        ("GPT-4o (copilot)", "openai:gpt-4o"),
        ("GPT-5 mini (copilot)", "openai:gpt-5-mini"),
        ("GPT-4.1", "openai:gpt-4.1"),
    ],
)
def test_copilot_model_picker_names_map_by_the_table(name, spec):
    assert map_model(name)[0] == spec


def test_copilot_model_name_in_a_file_maps_by_the_table(project):
    assert manager_for(project).find_tool("lint").metadata["model"] == "anthropic:claude-sonnet-4-5"


# -- check's false positives ------------------------------------------------------------------------


def test_npm_scopes_and_code_are_not_file_references_and_shell_blocks_are_reported(project, monkeypatch):
    lines = [line for line in checked(project, monkeypatch) if "review-pr.md" in line]
    assert ".claude/commands/review-pr.md:13: warning: claude-command: @docs/REVIEW.md is inlined only when " in (
        "\n".join(lines)
    )
    assert not any("@axe-core" in line or "@testing-library" in line for line in lines)
    assert any(
        line.startswith(".claude/commands/review-pr.md:8: warning: claude-command: the ```! block")
        and "gh pr view $1 --comments" in line
        and "runs only when the program grants host-trust: {context: true, exec: true}" in line
        for line in lines
    )


def test_template_literals_in_code_are_not_vscode_variables(project, monkeypatch):
    lines = [line for line in checked(project, monkeypatch) if "lint.prompt.md" in line]
    assert any(line.startswith(".github/prompts/lint.prompt.md:7: ") and "${file}" in line for line in lines)
    assert not any("${name}" in line or "${count}" in line for line in lines)


# -- Claude Code plugins ----------------------------------------------------------------------------

PLUGIN_TOOLS = {"review:critic", "review:check", "review:git:tidy", "review:house-style"}


@pytest.mark.parametrize("where", [".", "plugins", "plugins/review", "plugins/review/commands"])
def test_plugin_folders_are_claude_code_locations_named_after_the_plugin(project, where):
    refs = {info.ref for info in Manager([project / where]).list_tools()}
    expected = {"review:check", "review:git:tidy"} if where.endswith("commands") else PLUGIN_TOOLS
    assert expected <= refs
    assert not {ref for ref in refs if "README" in ref or "style.md" in ref or ref.startswith("plugins/")}


async def test_plugin_root_is_the_plugins_folder_in_the_project(project):
    manager = manager_for(project)
    text = await manager.invoke("review:check", {"arguments": "src/app.py"})
    assert text == "Check src/app.py against the rules in plugins/review/RULES.md."
    skill = manager.find_tool("review:house-style")
    assert skill.metadata["format-fields"] == {"name": "House Style"}
    assert any(m.source == "${CLAUDE_PLUGIN_ROOT}" and "plugins/review" in m.note for m in skill.mapping)


async def test_a_plugin_agent_runs_under_its_plugin_name(project, scripted):
    scripted(haiku=[{"expect": {"contains": ["single weakest point", "a cache"]}, "answer": "invalidation"}])
    assert await manager_for(project).invoke("review:critic", {"prompt": "a cache"}) == "invalidation"


# -- the README's table --------------------------------------------------------------------------------


def test_the_format_table_has_a_row_per_claude_and_copilot_format_with_every_column():
    from orchestrator.formats import summary_table

    rows = summary_table().splitlines()
    assert rows[0] == "| format | read | runs | lenient | host-only |"
    named = {row.split(" | ")[0].removeprefix("| ").strip("`"): row for row in rows[2:]}
    assert {"claude-agent", "claude-command", "claude-skill", "copilot-prompt"} <= set(named)
    for row in named.values():
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert len(cells) == 5 and all(cells), row


@pytest.fixture
def first_manager(tmp_path: Path) -> Manager:
    """A Manager made before Hypothesis starts: the first one raises the recursion limit, which Hypothesis watches."""
    return Manager([tmp_path])


FRONT_LINES = [
    "description: Plan it: step by step",
    "argument-hint: [a] [b]",
    "argument-hint: [a]",
    "tools: [Read",
    "allowed-tools: Read Edit Bash(git log:*)",
    "model: sonet",
    "<example>",
    "user: hi",
    "</example>",
    "  - a",
    ": [",
    "a: b: c",
    "# a comment",
    "",
]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.sampled_from(FRONT_LINES) | st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=12),
        max_size=8,
    )
)
def test_any_frontmatter_gives_a_tool_or_a_typed_error_naming_the_file(first_manager, lines):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ".claude" / "commands" / "any.md"
        path.parent.mkdir(parents=True)
        path.write_text("---\n" + "\n".join(lines) + "\n---\nDo $ARGUMENTS\n", encoding="utf-8")
        try:
            tool = Manager([Path(folder)]).find_tool("any")
        except ToolDefinitionError as exc:
            assert exc.path == str(path) and exc.line is not None
        else:
            assert tool.format == "claude-command"


def test_an_unknown_copilot_model_suggests_the_nearest_picker_name(write, tmp_path):
    write("p/pick.prompt.md", "---\nmodel: Claude Sonet 4.5\n---\nPick one.\n")
    tool = Manager([tmp_path / "p"]).find_tool("pick")
    assert tool.metadata["model"] == "Claude Sonet 4.5"
    [(line, message)] = [problem for problem in tool.problems if "model" in problem[1]]
    assert line == 2 and message.endswith("did you mean 'claude sonnet 4.5'?")


def plugin_repo(write, rel: str, manifest: str) -> None:
    write(f"{rel}/.claude-plugin/plugin.json", manifest)
    write(
        f"{rel}/commands/fix.md", "---\ndescription: Fix lint\n---\nFix $ARGUMENTS with ${CLAUDE_PLUGIN_ROOT}/fix.sh\n"
    )
    write(f"{rel}/agents/helper.md", "---\nname: helper\ndescription: Helps.\n---\nYou help.\n")
    write(f"{rel}/skills/polish/SKILL.md", "---\ndescription: Polishes.\n---\nPolish $ARGUMENTS\n")


@pytest.mark.parametrize("where", ["kit", "."])
async def test_a_folder_with_a_plugin_manifest_is_a_plugin_named_by_it(write, tmp_path, where):
    plugin_repo(write, "kit", '{"name": "tidy-kit", "version": "1.0.0"}')
    manager = Manager([tmp_path / where])
    assert {info.ref for info in manager.list_tools()} == {"tidy-kit:fix", "tidy-kit:helper", "tidy-kit:polish"}
    written = "./fix.sh" if where == "kit" else "kit/fix.sh"  # the plugin's folder, relative to the search path
    assert await manager.invoke("tidy-kit:fix", {"arguments": "a.py"}) == f"Fix a.py with {written}"


def test_a_manifest_without_a_usable_name_names_the_plugin_after_its_folder(write, tmp_path):
    plugin_repo(write, "kit", '{"name": "../up"}')
    assert "kit:fix" in {info.ref for info in Manager([tmp_path / "kit"]).list_tools()}


def test_a_commands_folder_without_a_manifest_holds_our_own_tools(write, tmp_path):
    write("commands/fix.md", "---\ndescription: Ours.\n---\nFix {{ args.x }}\n")
    tool = Manager([tmp_path]).find_tool("commands/fix")
    assert tool.format is None
