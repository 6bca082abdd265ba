"""The built-in agent-execute middleware."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_agent_execute_passes_python_tools_and_templates_through(write, tools):
    write("tools/code.py", "frontmatter = {'metadata': {'model': 'scripted'}}\ndef main(ctx):\n    return 'code ran'\n")
    write("tools/page.md", "---\n---\ntemplate {{ 1 + 1 }}\n")
    manager = Manager([tools])
    assert await manager.invoke("code") == "code ran"
    assert await manager.invoke("page") == "template 2"


async def test_agent_execute_answers_inside_error_handlers(write, tools):
    write(
        "tools/guard.py",
        "async def main(ctx):\n    try:\n        return await ctx.target.manager.next()\n    except Exception as exc:\n        return f'guarded: {type(exc).__name__}'\n",
    )
    write(
        "tools/t.md",
        "---\nmetadata:\n  model: {provider: scripted, script: [{answer: x, fail: 1}]}\n  guard: {}\n"
        "  $order: {guard: {after: [$pre-execute], before: [execute]}}\n---\nhi\n",
    )
    assert await Manager([tools]).invoke("t") == "guarded: ModelError"
