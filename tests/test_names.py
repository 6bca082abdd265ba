"""A tool's ``name`` in its frontmatter is its name (issue 15), and the names index behind it (issue 11)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from mcp import Client

import orchestrator.caches as caches_module
import orchestrator.folders as folders_module
from orchestrator import Manager, ToolNotFoundError
from orchestrator.check import check
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio


def problems(manager: Manager) -> list[str]:
    return [str(problem) for problem in check(manager)]


async def test_a_declared_name_is_how_the_tool_is_invoked_listed_and_shown(tools, write):
    write("tools/sum.md", "---\nname: nice-name\ndescription: Sums up.\n---\nsummary of {{ args.text }}\n")
    manager = Manager([tools])
    assert await manager.invoke("nice-name", {"text": "a"}) == "summary of a"
    listed = [info for info in manager.list_tools() if info.path == tools / "sum.md"]
    assert [(info.ref, info.name) for info in listed] == [("nice-name", "nice-name")]
    assert manager.explain("nice-name").tool == "nice-name"
    assert manager.describe("nice-name").description == "Sums up."
    assert not problems(manager)


async def test_the_stem_still_works_when_no_tool_claims_it(tools, write):
    write("tools/sum.md", "---\nname: nice-name\n---\nS\n")
    assert await Manager([tools]).invoke("sum") == "S"


async def test_a_declared_name_wins_over_another_files_stem_and_check_says_so(tools, write):
    write("tools/a.md", "---\nname: b\n---\nA\n")
    write("tools/b.md", "B\n")
    manager = Manager([tools])
    assert await manager.invoke("b") == "A"
    assert await manager.invoke("a") == "A"
    assert [info.ref for info in manager.list_tools() if info.path and info.path.parent == tools] == ["b"]
    assert (
        f"{tools / 'a.md'}:2: warning: this tool's name 'b' hides {tools / 'b.md'}, which no name reaches now; "
        "rename one" in problems(manager)
    )


async def test_our_file_wins_a_stem_over_another_formats_file_without_a_name_of_its_own(tools, write):
    """``greet.prompty`` without ``name:`` is reached by its stem, which ranks after ``greet.md``'s."""
    write("tools/greet.md", "---\ndescription: ours\n---\nOurs\n")
    write("tools/greet.prompty", "---\ndescription: theirs\n---\nuser:\nTheirs\n")
    manager = Manager([tools])
    assert await manager.invoke("greet") == "Ours"
    assert [(info.ref, info.format) for info in manager.list_tools() if info.ref == "greet"] == [("greet", None)]
    write("tools/greet.prompty", "---\nname: hello\ndescription: theirs\n---\nuser:\nTheirs\n")
    manager.refresh()
    assert manager.describe("hello").format == "prompty"  # a name of its own claims it


async def test_two_files_claiming_one_name_first_wins_and_check_names_both(tools, write):
    write("tools/one.md", "---\nname: dup\n---\none\n")
    write("tools/two.md", "---\ndescription: x\nname: dup\n---\ntwo\n")
    manager = Manager([tools])
    assert await manager.invoke("dup") == "one"  # sorted by file name within the folder
    found = problems(manager)
    assert (
        f"{tools / 'two.md'}:3: the name 'dup' is claimed by {tools / 'one.md'} too, which wins (first in "
        f"{tools}); rename one of them" in found
    )


async def test_a_name_in_a_subfolder_keeps_the_folder_and_the_path_still_works(tools, write):
    write("tools/team/sum.md", "---\nname: summarize\n---\nteam\n")
    manager = Manager([tools])
    assert await manager.invoke("team/summarize") == "team"
    assert await manager.invoke("team/sum") == "team"
    with pytest.raises(ToolNotFoundError):
        await manager.invoke("summarize")
    assert "team/summarize" in {info.ref for info in manager.list_tools()}


async def test_first_search_path_wins_between_a_stem_and_a_name(tmp_path, write):
    write("first/x.md", "first\n")
    write("second/y.md", "---\nname: x\n---\nsecond\n")
    manager = Manager([tmp_path / "first", tmp_path / "second"])
    assert await manager.invoke("x") == "first"
    assert not problems(manager)  # across search paths an earlier one overrides, as for stems


async def test_a_python_tools_literal_name_is_read_without_running_it(tools, write):
    write(
        "tools/impl.py",
        """
        frontmatter = {"name": "py-name", "description": "From python."}

        async def main(ctx):
            return "ran"
        """,
    )
    manager = Manager([tools])
    assert await manager.invoke("py-name") == "ran"
    assert manager.describe("py-name").description == "From python."


async def test_an_agent_offers_and_calls_tools_by_their_declared_names(tools, write):
    write("tools/lookup-impl.md", "---\nname: lookup\ndescription: Looks up.\n---\nfound {{ args.q }}\n")
    write(
        "tools/agent.md",
        """
        ---
        metadata:
          model:
            provider: scripted
            script:
              - expect: {tools: [lookup]}
                calls: [{name: lookup, arguments: {q: cats}}]
              - expect: {contains: [found cats]}
                answer: done
          tools: [lookup]
        ---
        Find cats.
        """,
    )
    assert await Manager([tools]).invoke("agent") == "done"


async def test_mcp_serves_tools_by_their_declared_names(tools, write):
    write("tools/sum.md", "---\nname: nice-name\ndescription: Sums up.\n---\nsum\n")
    with anyio.fail_after(20):
        async with Client(build_server(Manager([tools]))) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            called = await client.call_tool("nice-name", {})
    assert "nice-name" in names and "sum" not in names
    assert called.content[0].text == "sum"


async def test_a_name_edited_in_place_is_found_by_its_new_name(tools, write):
    path = write("tools/sum.md", "---\nname: old-name\n---\nS\n")
    manager = Manager([tools])
    assert await manager.invoke("old-name") == "S"
    folder = os.stat(tools).st_mtime_ns
    path.write_text("---\nname: new-name\n---\nS2\n", encoding="utf-8")
    os.utime(path, ns=(folder + 10**9, folder + 10**9))
    os.utime(tools, ns=(folder, folder))  # an in-place edit: the folder looks unchanged
    manager.registry.freshness.reset()  # as after a notification or the stat interval
    assert await manager.invoke("new-name") == "S2"
    with pytest.raises(ToolNotFoundError):
        await manager.invoke("old-name")


def test_a_name_that_is_not_a_usable_name_is_a_typed_error(tools, write):
    write("tools/bad.md", "---\nname: a/b\n---\nx\n")
    manager = Manager([tools])
    listed = {info.ref: info for info in manager.list_tools()}
    assert "may not contain '/'" in str(listed["bad"].error)


def test_list_json_names_tools_by_name(tools, write):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    write("tools/sum.md", "---\nname: nice-name\n---\nS\n")
    result = CliRunner().invoke(cli, ["list", "--json", "--path", str(tools)])
    rows = {row["ref"]: row for row in json.loads(result.output)}
    assert rows["nice-name"]["name"] == "nice-name" and rows["nice-name"]["path"] == str(tools / "sum.md")


# -- the index: a warm listing reads nothing again ---------------------------------------


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count parses (registry loads) and os.stat calls from now on."""
    counts = {"parses": 0, "stats": 0}
    load, stat = folders_module.load_tool, os.stat

    def counted_load(*args, **kwargs):
        counts["parses"] += 1
        return load(*args, **kwargs)

    def counted_stat(*args, **kwargs):
        counts["stats"] += 1
        return stat(*args, **kwargs)

    monkeypatch.setattr(folders_module, "load_tool", counted_load)
    monkeypatch.setattr(os, "stat", counted_stat)
    return counts


def tree(root: Path, folders: int, per_folder: int) -> None:
    for f in range(folders):
        folder = root / f"f{f:03d}"
        folder.mkdir(parents=True)
        for t in range(per_folder):
            (folder / f"t{t:03d}.md").write_text(f"tool {t}\n", encoding="utf-8")


def test_a_warm_listing_past_the_default_bounds_parses_nothing_again(tmp_path, monkeypatch):
    # The default bounds scaled down 64 times (4,096 -> 64) and 10,000 tools as 640 (10 folders):
    # the same shape as a warm listing of 10,000 tools, which re-parsed all of them before the index.
    monkeypatch.setattr(caches_module, "FILES_BOUND", 64)
    monkeypatch.setattr(caches_module, "DERIVED_BOUND", 64)
    tree(tmp_path / "tools", 10, 64)
    manager = Manager([tmp_path / "tools"])
    counts = counting(monkeypatch)
    assert len(manager.list_tools()) == 640
    assert 640 <= counts["parses"] <= 640 + 50  # cold: each file once (and the built-ins)
    counts.update(parses=0, stats=0)
    assert len(manager.list_tools()) == 640
    assert counts["parses"] == 0
    # Before the index about 15 stats per tool (each re-parse stats again); with notifications, almost none.
    assert counts["stats"] <= 8 * 640, counts
