"""Typos are named with a "did you mean" before and when they bite (issue 25, points 5, 6 and 7).

An unknown ref's error suggests close names and a nested ref for a bare
name, names the search paths as the user wrote them (relative to the current
folder) and leaves out the package's own tools; ``check`` reports agents'
``tools:`` names that are not tools, template variables that are neither
params nor metadata keys, and directives one edit from a tool name; the
run-time error for the same template typo carries the same suggestion.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from orchestrator import Manager, ToolNotFoundError
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
