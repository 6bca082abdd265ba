"""The built-in execute middleware."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_execute_runs_the_body_then_post_execute_entries(write, tools):
    write(
        "tools/post.py",
        "async def main(ctx):\n    ctx.target.locals['order'].append('post')\n    return await ctx.target.manager.next()\n",
    )
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'post': {}, '$order': {'post': {'after': ['$post-execute']}}}}\n"
        "def main(ctx):\n    ctx.locals['order'] = ['body']\n    return ctx.locals['order']\n",
    )
    assert await Manager([tools]).invoke("t") == ["body", "post"]


async def test_execute_is_a_leaf(tools):
    assert Manager([tools]).explain("execute").chain == ()
