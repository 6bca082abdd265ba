"""The built-in paths middleware: extra search paths, markdown only unless trusted."""

from __future__ import annotations

import pytest

from orchestrator import Manager, SecurityError, ToolNotFoundError

pytestmark = pytest.mark.anyio

CALLER = "frontmatter = {'metadata': {'paths': ['../lib']}}\nasync def main(ctx):\n    return await ctx.manager.invoke(ctx.args['ref'])\n"


async def test_paths_adds_markdown_tools(write, tmp_path):
    write("tools/caller.py", CALLER)
    write("lib/page.md", "---\n---\nfrom lib\n")
    write("lib/code.py", "def main(ctx):\n    return 'python ran'\n")
    manager = Manager([tmp_path / "tools"])
    assert await manager.invoke("caller", {"ref": "page"}) == "from lib"
    with pytest.raises(ToolNotFoundError):
        await manager.invoke("caller", {"ref": "code"})
    trusting = Manager([tmp_path / "tools"], trusted_paths=[tmp_path / "lib"])
    assert await trusting.invoke("caller", {"ref": "code"}) == "python ran"


async def test_paths_from_an_untrusted_folder_stay_inside_it(write, tmp_path):
    write("tools/caller.py", CALLER)
    write("lib/hop.md", "---\nmetadata: {paths: ../elsewhere}\n---\nhop\n")
    write("lib/inner/ok.md", "---\nmetadata: {paths: ..}\n---\nok\n")
    (tmp_path / "elsewhere").mkdir()
    manager = Manager([tmp_path / "tools"])
    with pytest.raises(SecurityError, match="trust.files is off"):
        await manager.invoke("caller", {"ref": "hop"})
    assert await manager.invoke("caller", {"ref": "inner/ok"}) == "ok"


async def test_trust_files_false_keeps_a_trusted_tool_inside_its_path(write, tmp_path):
    write("tools/t.md", "---\nmetadata: {paths: ../lib, trust: {files: false}}\n---\nx\n")
    (tmp_path / "lib").mkdir()
    with pytest.raises(SecurityError):
        await Manager([tmp_path / "tools"]).invoke("t")
