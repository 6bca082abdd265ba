"""A static chain's entries are resolved with it: entered without a lookup, fresh while its files are."""

from __future__ import annotations

import pytest
from freshness_helpers import eager

from orchestrator import Manager, ToolDefinitionError
from orchestrator.planner import NESTING

pytestmark = pytest.mark.anyio

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"


def stack(write, count: int) -> None:
    for i in range(count):
        write(f"tools/pass{i}.py", PASS)
    entries = ", ".join(f"'pass{i}': {{}}" for i in range(count))
    write("tools/top.py", f"frontmatter = {{'metadata': {{{entries}}}}}\n\nasync def main(ctx):\n    return 'body'\n")


def counting(manager: Manager) -> list[str]:
    """The refs ``manager.catalog.pipeline`` (the door calls and entries look pipelines up through) is asked for."""
    asked: list[str] = []
    compile_ = manager.catalog.pipeline

    def counted(ref, paths, checked):
        asked.append(ref)
        return compile_(ref, paths, checked)

    manager.catalog.pipeline = counted
    return asked


async def test_a_run_enters_its_declared_middleware_without_looking_each_up(write, tools):
    stack(write, 5)
    manager = Manager([tools])
    assert await manager.invoke("top") == "body"
    asked = counting(manager)
    assert await manager.invoke("top") == "body"
    assert asked == ["top"]  # one lookup per run, not one per entry


async def test_an_edit_to_an_entrys_authority_is_seen_through_the_chain_resolved_ahead(write, tools):
    write(
        "tools/mw/tag.py",
        "async def main(ctx):\n    return f\"{ctx.meta.get('color')}:{await ctx.target.manager.next()}\"\n",
    )
    write("tools/mw/AUTHORITY.md", "---\nmetadata:\n  color: red\n---\n")
    write("tools/top.py", "frontmatter = {'metadata': {'mw/tag': {}}}\n\nasync def main(ctx):\n    return 'body'\n")
    manager = eager(Manager([tools]))
    assert await manager.invoke("top") == "red:body"
    write("tools/mw/AUTHORITY.md", "---\nmetadata:\n  color: blue\n---\n")
    assert await manager.invoke("top") == "blue:body"


async def test_an_edit_to_an_entrys_file_is_seen_through_the_chain_resolved_ahead(write, tools):
    stack(write, 2)
    manager = eager(Manager([tools]))
    assert await manager.invoke("top") == "body"
    write("tools/pass1.py", "async def main(ctx):\n    return 'short-circuited'\n")
    assert await manager.invoke("top") == "short-circuited"


async def test_an_authority_edit_after_describe_is_seen_by_the_next_invoke(write, tools):
    """The plan was cached by ``describe``: the invocation's cached lookup must still depend on its files."""
    write("tools/sub/t.py", "async def main(ctx):\n    return ctx.meta.get('color')\n")
    write("tools/sub/AUTHORITY.md", "---\nmetadata:\n  color: red\n---\n")
    manager = eager(Manager([tools]))
    manager.describe("sub/t")
    assert await manager.invoke("sub/t") == "red"
    write("tools/sub/AUTHORITY.md", "---\nmetadata:\n  color: blue\n---\n")
    assert await manager.invoke("sub/t") == "blue"


async def test_an_entry_after_paths_resolves_in_the_added_folder(write, tools, tmp_path):
    """``paths`` changes the target's search paths mid-chain: what was resolved ahead no longer applies."""
    write("tools/mark.py", "async def main(ctx):\n    return 'base:' + await ctx.target.manager.next()\n")
    write("tools/extra/mark.md", "The mark of the added folder.\n")  # markdown: an added folder is not trusted
    write(
        "tools/top.py",
        "frontmatter = {'metadata': {'paths': 'extra', 'mark': {}, '$order': {'mark': {'after': ['paths']}}}}\n\n"
        "async def main(ctx):\n    return 'body'\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("top") == "The mark of the added folder."
    assert await manager.invoke("top") == "The mark of the added folder."


async def test_a_broken_entry_still_fails_where_it_is_entered(write, tools, tmp_path):
    mark = tmp_path / "log-ran"
    write("tools/log.py", f"async def main(ctx):\n    open({str(mark)!r}, 'w').close()\n{PASS.splitlines()[1]}\n")
    write("tools/gone.py", PASS)
    write(
        "tools/top.py",
        "frontmatter = {'metadata': {'log': {}, 'gone': {}, '$order': {'gone': {'after': ['log']}}}}\n\n"
        "async def main(ctx):\n    return 'body'\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("top") == "body"
    write("tools/gone.py", "def main(ctx:\n")  # a syntax error: still a tool, one that cannot load
    mark.unlink()
    manager.refresh()
    with pytest.raises(ToolDefinitionError, match="gone"):
        await manager.invoke("top")
    assert mark.exists()  # the entry before it ran: the error came where ``gone`` was entered


async def test_middleware_nested_deeper_than_the_lookahead_still_runs(write, tools):
    depth = NESTING + 4
    for i in range(depth):
        inner = f"'w{i + 1}': {{}}" if i + 1 < depth else ""
        write(f"tools/w{i}.py", f"frontmatter = {{'metadata': {{{inner}}}}}\n\n{PASS}")
    write("tools/top.py", "frontmatter = {'metadata': {'w0': {}}}\n\nasync def main(ctx):\n    return 'body'\n")
    manager = Manager([tools])
    assert await manager.invoke("top") == "body"
    assert await manager.invoke("top") == "body"


async def test_a_params_edit_in_an_authority_after_an_invoke_is_seen_by_describe(write, tools):
    """The plan was cached by an invocation: describe's cached row must still depend on its files."""
    write("tools/sub/t.py", "async def main(ctx):\n    return 1\n")
    write("tools/sub/AUTHORITY.md", "---\nmetadata:\n  params: {type: object, title: old}\n---\n")
    manager = eager(Manager([tools]))
    assert await manager.invoke("sub/t", {}) == 1
    assert manager.describe("sub/t").params["title"] == "old"
    write("tools/sub/AUTHORITY.md", "---\nmetadata:\n  params: {type: object, title: new}\n---\n")
    assert manager.describe("sub/t").params["title"] == "new"


async def test_a_templated_tool_enters_its_middleware_without_looking_each_up(write, tools):
    """Templates render values, never keys: the chain and its entries' tools are the plan's, as for a static one."""
    for i in range(3):
        write(f"tools/pass{i}.py", PASS)
    write(
        "tools/page.md",
        "---\nmetadata:\n  label: '{{ args.who }}'\n  pass0: {}\n  pass1: {}\n  pass2: {}\n---\nHi {{ meta.label }}\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("page", {"who": "Ada"}) == "Hi Ada"
    asked = counting(manager)
    assert await manager.invoke("page", {"who": "Bob"}) == "Hi Bob"
    assert [ref for ref in asked if ref.startswith("pass")] == []
