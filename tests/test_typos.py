"""Typos are named with a "did you mean" before and when they bite (issue 25, points 5, 6 and 7).

An unknown ref's error suggests close names and a nested ref for a bare
name, names the search paths as the user wrote them (relative to the current
folder) and leaves out the package's own tools; ``check`` reports agents'
``tools:`` names that are not tools, template variables that are neither
params nor metadata keys, and directives one edit from a tool name; the
run-time error for the same template typo carries the same suggestion.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from orchestrator import InterpolationError, Limits, Manager, ToolNotFoundError
from orchestrator.check import check
from orchestrator.cli import cli
from orchestrator.mcp import build_server
from orchestrator.registry import builtin_folder

LIMIT = 30


def output(result) -> str:
    """Everything a CLI command printed: stdout and stderr (which stream carries what is not asserted here)."""
    return result.stdout + result.stderr


@pytest.fixture
def project(tmp_path, tools, write, monkeypatch) -> Path:
    write("tools/summary.md", "---\ndescription: Sums up.\n---\nsum\n")
    write("tools/ops/status.md", "---\ndescription: Status.\n---\nok\n")
    monkeypatch.chdir(tmp_path)
    return tools


# -- unknown refs ------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_unknown_ref_suggests_close_names_and_names_the_search_paths_as_written(project):
    manager = Manager([project])
    with pytest.raises(ToolNotFoundError) as misspelt:
        await manager.invoke("sumary")
    assert misspelt.value.suggestions == ["summary"]
    assert str(misspelt.value) == "no tool 'sumary' in tools; did you mean 'summary'?"
    builtins = str(builtin_folder("tools").resolve())
    assert builtins in misspelt.value.searched  # the field keeps every folder; the message leaves this one out
    assert builtins not in str(misspelt.value) and str(project) not in str(misspelt.value)


@pytest.mark.anyio
async def test_a_bare_name_suggests_the_nested_ref_ending_in_it(project):
    with pytest.raises(ToolNotFoundError, match=r"did you mean 'ops/status'\?"):
        await Manager([project]).invoke("status")


@pytest.mark.anyio
async def test_a_misspelt_builtin_is_suggested_too(project):
    with pytest.raises(ToolNotFoundError) as info:
        await Manager([project]).invoke("exectue")
    assert "execute" in info.value.suggestions


@pytest.mark.anyio
async def test_a_ref_with_nothing_close_gets_no_suggestion(project):
    with pytest.raises(ToolNotFoundError) as info:
        await Manager([project]).invoke("zzzzqqq")
    assert info.value.suggestions == [] and "did you mean" not in str(info.value)


@pytest.mark.anyio
async def test_a_search_path_outside_the_current_folder_is_named_in_full(project, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ToolNotFoundError) as info:
        await Manager([project]).invoke("sumary")
    assert f"in {project.resolve()};" in str(info.value)


def test_a_miss_the_engine_handles_never_looks_for_suggestions(project, write, monkeypatch):
    """Data keys are looked up as tools and missed, once per plan: their errors are never read, so cost nothing."""
    write("tools/uses.md", "---\nmetadata:\n  tone: friendly\n  colour: blue\n---\n{{ meta.tone }}\n")
    manager = Manager([project])
    asked: list[str] = []
    suggest = manager.registry.suggest
    monkeypatch.setattr(manager.registry, "suggest", lambda ref, paths: asked.append(ref) or suggest(ref, paths))
    assert manager.invoke_sync("uses") == "friendly"
    assert asked == []
    with pytest.raises(ToolNotFoundError) as info:
        manager.invoke_sync("sumary")
    assert asked == []  # not even when raised: only once the message is read
    assert "did you mean 'summary'" in str(info.value) and asked == ["sumary"]
    assert str(info.value) and asked == ["sumary"]  # read again: asked once


def test_the_not_found_error_pickles_with_its_message(project):
    with pytest.raises(ToolNotFoundError) as info:
        Manager([project]).invoke_sync("status")
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.suggestions == ["ops/status"] and copy.ref == "status"


def test_cli_run_suggests_and_says_when_there_is_no_tools_folder(project, tmp_path, monkeypatch):
    runner = CliRunner()
    misspelt = runner.invoke(cli, ["run", "sumary"])
    assert misspelt.exit_code == 1
    assert "did you mean 'summary'?" in output(misspelt) and str(tmp_path) not in output(misspelt)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    bare = runner.invoke(cli, ["run", "summary"])
    assert bare.exit_code == 1
    assert "no ./tools here" in output(bare) and "--path" in output(bare)
    assert str(builtin_folder("tools")) not in output(bare)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_error_result_for_an_unknown_ref_suggests_and_hides_the_builtin_folder(project, write, mode):
    write("tools/caller.py", "async def main(ctx):\n    return await ctx.manager.invoke(ctx.args['ref'])\n")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([project])), mode=mode) as client:
            nested = await client.call_tool("caller", {"ref": "status"})
            misspelt = await client.call_tool("caller", {"ref": "sumary"})
    assert nested.is_error and misspelt.is_error
    assert nested.content[0].text == "ToolNotFoundError: no tool 'status' in tools; did you mean 'ops/status'?"
    assert misspelt.content[0].text == "ToolNotFoundError: no tool 'sumary' in tools; did you mean 'summary'?"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_call_of_a_misspelt_served_name_suggests_the_served_one(project, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([project])), mode=mode) as client:
            misspelt = await client.call_tool("sumary", {})
            bare = await client.call_tool("status", {})
    assert misspelt.is_error and misspelt.content[0].text.endswith("did you mean 'summary'?")
    assert bare.is_error and bare.content[0].text.endswith("did you mean 'ops__status'?")  # its served name


# -- check sees what a run would hit ---------------------------------------------------------------------------

WORDS = """
frontmatter = {"description": "Counts words.", "metadata": {"params": {"type": "object"}}}


def main(ctx):
    return str(len(str(ctx.args.get("label", "")).split()))
"""


def problems(tmp_path: Path, tools: Path) -> list[str]:
    return [str(problem) for problem in check(Manager([tools], cwd=tmp_path))]


def test_check_reports_agent_tools_that_are_not_tools_with_a_suggestion(project, tmp_path, write):
    write("tools/wordcount.py", WORDS)
    write(
        "tools/helper.md",
        """
        ---
        description: An agent.
        metadata:
          model: {provider: scripted, script: [{answer: hi}]}
          tools: [wordcout, status, summary]
        ---
        Help.
        """,
    )
    found = problems(tmp_path, project)
    assert "tools/helper.md:5: tools names 'wordcout', which is not a tool" in "\n".join(found)
    [misspelt] = [p for p in found if "'wordcout'" in p]
    [nested] = [p for p in found if "'status'" in p]
    assert "warning" not in misspelt and misspelt.endswith("did you mean 'wordcount'?")
    assert nested.endswith("did you mean 'ops/status'?")
    assert not [p for p in found if "'summary'" in p]


def test_check_looks_agent_tools_up_in_the_folders_paths_adds(project, tmp_path, write):
    write("extra/helper2.md", "---\ndescription: Found through paths.\n---\nx\n")
    write(
        "tools/helper.md",
        "---\nmetadata:\n  paths: ../extra\n  model: {provider: scripted, script: [{answer: hi}]}\n"
        "  tools: [helper2]\n---\nHelp.\n",
    )
    assert problems(tmp_path, project) == []


def test_cli_check_fails_on_an_agent_tool_that_is_not_a_tool(project, write):
    write("tools/wordcount.py", WORDS)
    write("tools/helper.md", "---\nmetadata:\n  model: scripted\n  tools: [wordcout]\n---\nHelp.\n")
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 1
    assert "tools/helper.md:4:" in output(result) and "did you mean 'wordcount'?" in output(result)


TITLED = """
---
description: A review.
metadata:
  params: {type: object, properties: {title: {type: string}}, required: [title]}
---
{{ args.titel }}: said the {{ meta.tone }} reviewer.
"""


@pytest.mark.anyio
async def test_a_misspelt_args_key_is_reported_by_check_and_run_with_the_same_suggestion(project, tmp_path, write):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  tone: friendly\n---\n")
    write("tools/review.md", TITLED)
    [problem] = problems(tmp_path, project)
    assert problem.startswith("tools/review.md:6: the prompt reads args.titel, which params does not declare")
    assert problem.endswith("did you mean 'args.title'?")
    with pytest.raises(InterpolationError) as info:
        await Manager([project]).invoke("review", {"title": "Dune"})
    assert info.value.tool == "review" and info.value.detail.endswith("did you mean 'args.title'?")
    assert "'titel'" in str(info.value)


@pytest.mark.anyio
async def test_a_misspelt_meta_key_is_reported_by_check_and_run_with_the_same_suggestion(project, tmp_path, write):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  tone: friendly\n---\n")
    write("tools/review.md", TITLED.replace("args.titel", "args.title").replace("meta.tone", "meta.tonee"))
    [problem] = problems(tmp_path, project)
    assert problem.startswith("tools/review.md:6: the prompt reads meta.tonee, which no metadata of this tool sets")
    assert problem.endswith("did you mean 'meta.tone'?")
    with pytest.raises(InterpolationError) as info:
        await Manager([project]).invoke("review", {"title": "Dune"})
    assert "'tonee'" in info.value.detail and info.value.detail.endswith("did you mean 'meta.tone'?")


@pytest.mark.anyio
async def test_a_bare_name_that_is_no_variable_is_reported_with_the_args_key_it_may_mean(project, tmp_path, write):
    write("tools/review.md", TITLED.replace("{{ args.titel }}", "{{ title }}").replace("meta.tone", "tool.name"))
    [problem] = problems(tmp_path, project)
    assert "reads 'title', which is no template variable" in problem and problem.endswith("'args.title'?")
    with pytest.raises(InterpolationError) as info:
        await Manager([project]).invoke("review", {"title": "Dune"})
    assert info.value.detail.endswith("did you mean 'args.title'?")


def test_check_reports_reads_in_metadata_templates_at_their_key(project, tmp_path, write):
    write(
        "tools/greet.md",
        """
        ---
        metadata:
          params: {type: object, properties: {name: {type: string}}}
          greeting: "Hello {{ args.nmae }}"
        ---
        {{ meta.greeting }}
        """,
    )
    [problem] = problems(tmp_path, project)
    assert problem.startswith("tools/greet.md:4: metadata key 'greeting' reads args.nmae")
    assert problem.endswith("did you mean 'args.name'?")


def test_check_spares_guarded_reads_declared_keys_dict_methods_and_locals(project, tmp_path, write):
    write(
        "tools/fine.md",
        """
        ---
        metadata:
          params: {type: object, properties: {title: {type: string}, items: {type: array}}}
          tone: warm
        ---
        {% set shout = true %}{% for word in args.title.split() %}{{ word }}{% endfor %}
        {{ args.subtitle | default("") }}{% if meta.mood is defined %}{{ meta.mood }}{% endif %}
        {{ args.get("other") }} {{ meta.tone }} {{ locals.anything }} {{ tool.name }} {{ range(2) | list }}
        {{ args["title"] }} {{ meta["$order"] is undefined }} {{ shout }}
        """,
    )
    assert problems(tmp_path, project) == []


def test_check_leaves_args_alone_when_params_declares_no_properties(project, tmp_path, write):
    write("tools/open.md", "---\nmetadata:\n  params: {type: object}\n---\n{{ args.anything }}\n")
    write("tools/text.md", "---\nmetadata:\n  params: {type: string}\n---\n{{ args }}\n")
    write("tools/none.md", "---\ndescription: no params\n---\n{{ args.whatever }}\n")
    assert problems(tmp_path, project) == []


def test_cli_check_fails_on_a_template_typo(project, write):
    write("tools/review.md", TITLED.replace("meta.tone", "tool.name"))
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 1 and "tools/review.md:6:" in output(result) and "'args.title'?" in output(result)


@pytest.mark.anyio
async def test_a_directive_one_edit_from_a_tool_is_reported_by_check_and_stays_text(project, tmp_path, write):
    write("tools/words.py", WORDS)
    write("tools/note.md", "---\ndescription: A note.\n---\nFirst line.\n\n:wrods[quick brown fox] and :words[a b]\n")
    write("tools/plain.md", "---\ndescription: Unrelated.\n---\n:zzzzzz[far from any tool] at 10:30\n")
    [problem] = problems(tmp_path, project)
    assert problem == (
        "tools/note.md:6: warning: directive :wrods names no tool, so it stays text; did you mean 'words'?"
    )
    assert await Manager([project]).invoke("note") == "First line.\n\n:wrods[quick brown fox] and 2"
    result = CliRunner().invoke(cli, ["check"])
    assert result.exit_code == 0 and "did you mean 'words'?" in output(result)


def test_check_suggests_for_a_claude_agents_tools_too(project, tmp_path, write):
    write(".claude/agents/helper.md", "---\nname: helper\ndescription: Helps.\ntools: Read, sumary\n---\nHelp.\n")
    found = [str(p) for p in check(Manager([project, tmp_path], cwd=tmp_path))]
    [problem] = [p for p in found if "'sumary'" in p]
    assert problem.startswith(".claude/agents/helper.md:4: warning: claude-agent: 'sumary' is not a tool")
    assert "did you mean 'summary'" in problem


def test_suggestions_pass_over_a_search_path_past_the_folder_limit(tmp_path, tools, write):
    """A nested ref is looked for within ``Limits.folder_files`` entries only; the error is still given, and read."""
    limit = len(os.listdir(builtin_folder("tools"))) + 2  # the built-in folder's lookups stay within it
    write("tools/summary.md", "---\ndescription: s\n---\nsum\n")
    for i in range(limit):
        write(f"tools/deep/t{i}.md", "---\ndescription: d\n---\nd\n")
    write("tools/deep/status.md", "---\ndescription: s\n---\nok\n")
    small = Manager([tools], limits=Limits(folder_files=limit))
    with pytest.raises(ToolNotFoundError) as nested:
        small.invoke_sync("status")
    assert nested.value.suggestions == []  # the tree holds more than the limit: not walked
    with pytest.raises(ToolNotFoundError) as close:
        small.invoke_sync("sumary")
    assert close.value.suggestions == ["summary"]  # the ref's own folder, as its lookup read it
    with pytest.raises(ToolNotFoundError) as found:
        Manager([tools]).invoke_sync("status")
    assert found.value.suggestions == ["deep/status"]
