"""One next() at a time when entries start tasks (R-CHAIN-6), deep in a chain as at its first entry.

These tests put the entry that starts tasks after one that goes down the
chain inline, where a runner that tells tasks apart per chain rather than per
level would differ.
"""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import anyio
import pytest

from orchestrator import InvocationError, Manager

pytestmark = pytest.mark.anyio

ALREADY = "next() is already running for 't': an entry may continue the chain once at a time (tool 't')"

BODY = """
import anyio
async def main(ctx):
    ctx.nonlocals["body"] = ctx.nonlocals.get("body", 0) + 1
    await anyio.sleep(0.01)
    return "done"
"""

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"


def tool(write, name: str, metadata: dict, body: str = BODY) -> None:
    write(f"tools/{name}.py", f"frontmatter = {{'metadata': {metadata!r}}}\n" + textwrap.dedent(body))


def later(write, name: str, body: str) -> None:
    """``t`` runs ``first`` (a pass-through) then ``name``: ``name`` is reached by an inline next()."""
    write("tools/first.py", PASS)
    write(f"tools/{name}.py", textwrap.dedent(body))
    tool(write, "t", {"first": {}, name: {}, "$order": {name: {"after": ["first"]}}})


async def run(manager: Manager) -> tuple[object, dict]:
    box: dict = {}
    result = await manager.invoke("t", context={"nonlocals": box})
    return result, box


async def test_a_child_task_of_a_later_entry_may_continue_the_chain(write, tools: Path):
    later(
        write,
        "spawner",
        """
        import anyio
        async def main(ctx):
            t = ctx.target
            got = []
            async def go():
                got.append(await t.manager.next())
            async with anyio.create_task_group() as group:
                group.start_soon(go)
            return got[0]
        """,
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("done", 1)


async def test_two_child_tasks_of_a_later_entry_racing_one_is_refused(write, tools: Path):
    later(
        write,
        "racer",
        """
        import anyio
        async def main(ctx):
            t = ctx.target
            outcomes = []
            async def call():
                try:
                    outcomes.append(("ok", await t.manager.next()))
                except Exception as exc:
                    outcomes.append(("error", type(exc).__name__, str(exc)))
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                group.start_soon(call)
            t.nonlocals["outcomes"] = outcomes
            return [o for o in outcomes if o[0] == "ok"][0][1]
        """,
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("done", 1)
    assert sorted(box["outcomes"]) == [("error", "InvocationError", ALREADY), ("ok", "done")]


async def test_a_task_outside_the_chain_is_refused_while_a_later_entry_waits(write, tools: Path):
    later(
        write,
        "parked",
        """
        async def main(ctx):
            t = ctx.target
            t.nonlocals["target"] = t
            t.nonlocals["parked"].set()
            await t.nonlocals["resume"].wait()
            return await t.manager.next()
        """,
    )
    manager = Manager([tools])
    box = {"parked": anyio.Event(), "resume": anyio.Event()}
    results: list = []

    async def invoke() -> None:
        results.append(await manager.invoke("t", context={"nonlocals": box}))

    async with anyio.create_task_group() as group:
        group.start_soon(invoke)
        await box["parked"].wait()
        with pytest.raises(InvocationError, match="already running for 't'"):
            await box["target"].manager.next()
        box["resume"].set()
    assert results == ["done"]
    assert box["body"] == 1


async def test_a_child_task_that_took_over_hands_the_chain_back(write, tools: Path):
    # The child continues the chain; once its next() returned, the entry's own next() returns the result at once.
    later(
        write,
        "handback",
        """
        import anyio
        async def main(ctx):
            t = ctx.target
            got = []
            async def go():
                got.append(await t.manager.next())
            async with anyio.create_task_group() as group:
                group.start_soon(go)
            return [got[0], await t.manager.next()]
        """,
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == (["done", "done"], 1)


async def test_the_body_runs_once_when_a_child_task_races_its_entrys_own_next(write, tools: Path):
    # The child's next() overlaps the entry's own: it is refused (or, on a slow machine, comes after and gets
    # the result at once); the chain runs once.
    later(
        write,
        "hedge",
        """
        import anyio
        async def main(ctx):
            t = ctx.target
            seen = []
            async def late():
                await anyio.sleep(0.001)
                try:
                    seen.append(await t.manager.next())
                except Exception as exc:
                    seen.append(type(exc).__name__)
            async with anyio.create_task_group() as group:
                group.start_soon(late)
                own = await t.manager.next()
            t.nonlocals["late"] = seen
            return own
        """,
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("done", 1)
    assert box["late"] in (["InvocationError"], ["done"])


async def test_a_finished_chain_keeps_no_cycle(write, tools: Path):
    later(write, "second", PASS)
    manager = Manager([tools])
    await manager.invoke("t", context={"nonlocals": {}})
    gc.collect()
    gc.disable()
    try:
        await manager.invoke("t", context={"nonlocals": {}})
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_max_stack_counts_the_levels_a_task_went_down_inline(write, tools: Path):
    # 12 entries going down inline, the last invoking a tool: noop, 12 entries and the invocation take 14 levels.
    write("tools/noop.py", "async def main(ctx):\n    return 'bottom'\n")
    for i in range(11):
        write(f"tools/pass{i}.py", PASS)
    write("tools/caller.py", "async def main(ctx):\n    return await ctx.manager.invoke('noop')\n")
    chain = {f"pass{i}": {} for i in range(11)} | {"caller": {}}
    assert await Manager([tools], max_stack=14).invoke("noop", middleware=chain) == "bottom"
    with pytest.raises(InvocationError, match=r"nested invocation limit \(13\)"):
        await Manager([tools], max_stack=13).invoke("noop", middleware=chain)
