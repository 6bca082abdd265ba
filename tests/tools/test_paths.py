"""The built-in paths middleware: extra search paths, markdown only unless trusted."""

from __future__ import annotations

import pytest

from orchestrator import Manager, ToolNotFoundError

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
