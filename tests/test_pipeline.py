"""``Pipeline.bind``: the one way a call's Context is made from what its ref compiled to (issue 26, point 3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import InvocationError, Manager
from orchestrator.binding import place
from orchestrator.chain import SKIPPED
from orchestrator.options import NO_OPTIONS, extract_options

pytestmark = pytest.mark.anyio

ECHO = "async def main(ctx):\n    return {'args': ctx.args, 'depth': ctx.depth, 'run': ctx.run.id}\n"


def test_a_pipeline_binds_a_call_under_its_parent(write: Callable[[str, str], Path], tools: Path) -> None:
    write("tools/echo.py", ECHO)
    manager = Manager([tools])
    parent = manager.prepare("echo", {})
    pipeline = manager.catalog.pipeline("echo", manager.paths, None)
    ctx = pipeline.bind({"a": 1}, None, parent)
    assert ctx.parent is parent and ctx.target is ctx and ctx.depth == 1 and ctx.shared is parent.shared
    assert ctx.tool is pipeline.tool and ctx.args == {"a": 1} and ctx.owner is manager
    assert [frame["tool"] for frame in ctx.run.history] == ["echo", "echo"]


def test_a_top_level_call_is_placed_first(write: Callable[[str, str], Path], tools: Path) -> None:
    """A call with no parent starts a run: ``binding.place`` says where, and bind is told so."""
    write("tools/echo.py", ECHO)
    manager = Manager([tools])
    pipeline = manager.catalog.pipeline("echo", manager.paths, None)
    with pytest.raises(InvocationError, match="parent context"):
        pipeline.bind({}, None, None)
    where = place(manager, None, None, NO_OPTIONS)
    ctx = pipeline.bind({}, None, None, None, 0, where)
    assert ctx.parent is None and ctx.depth == 0 and ctx.shared is where.shared and ctx.paths == manager.paths


def test_options_bind_a_seed_and_overrides(write: Callable[[str, str], Path], tools: Path) -> None:
    write("tools/echo.py", "frontmatter = {'metadata': {'label': 'plain'}}\n\n" + ECHO)
    manager = Manager([tools])
    parent = manager.prepare("echo", {})
    args, options = extract_options({"x": 1}, "echo", {"locals": {"seen": True}}, None, {"label": "over"}, None)
    ctx = manager.catalog.pipeline("echo", manager.paths, None).bind(args, options, parent)
    assert ctx.meta["label"] == "over" and ctx.locals["seen"] is True and ctx.args == {"x": 1}


def test_an_entry_binds_with_its_target_and_a_cycle_binds_to_skipped(
    write: Callable[[str, str], Path], tools: Path
) -> None:
    write("tools/echo.py", ECHO)
    write("tools/top.py", "frontmatter = {'metadata': {'echo': {}}}\n\n" + ECHO)
    manager = Manager([tools])
    top = manager.prepare("top", {})
    entry = manager.catalog.pipeline("echo", top.paths, None).bind({"e": 1}, None, top, top, 0)
    assert entry.entry and entry.target is top and entry.parent is top and entry.depth == 1
    again = manager.catalog.pipeline("top", top.paths, None).bind({}, None, entry, entry, 0)
    assert again is SKIPPED  # top already runs in this pipeline: an invocation cycle (R-CHAIN-10)


def test_an_entry_past_max_stack_is_refused(write: Callable[[str, str], Path], tools: Path) -> None:
    write("tools/echo.py", ECHO)
    write("tools/top.py", "frontmatter = {'metadata': {'echo': {}}}\n\n" + ECHO)
    manager = Manager([tools], max_stack=5)
    top = manager.prepare("top", {})
    with pytest.raises(InvocationError, match="nested invocation limit"):
        manager.catalog.pipeline("echo", top.paths, None).bind({}, None, top, top, 5)


async def test_the_runner_binds_entries_and_the_call_runs_as_before(
    write: Callable[[str, str], Path], tools: Path
) -> None:
    write("tools/pass.py", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/top.py", "frontmatter = {'metadata': {'pass': {}}}\n\n" + ECHO)
    manager = Manager([tools])
    result = await manager.invoke("top", {"q": 1})
    assert result["args"] == {"q": 1} and result["depth"] == 0
