"""Invocation (R-INV-1..5): options in args, the steps, the context, isolation, limits."""

from __future__ import annotations

import anyio
import pytest

from orchestrator import (
    InvocationError,
    InvocationTimeout,
    Manager,
    ToolNotFoundError,
)

pytestmark = pytest.mark.anyio

ECHO = (
    "def main(ctx):\n    return {'args': ctx.args, 'locals': {k: v for k, v in ctx.locals.items() if k != 'prompt'}}\n"
)


async def test_r_inv_1_dollar_keys_become_options(write, tools):
    write("tools/echo.py", ECHO)
    manager = Manager([tools])
    result = await manager.invoke(
        "echo", {"a": 1, "$context": {"locals": {"x": 1}}, "$timeout": 5, "$overrides": {"k": 1}}
    )
    assert result["args"] == {"a": 1}
    assert result["locals"] == {"x": 1}


async def test_r_inv_1_explicit_options_win_and_dollar_fills_gaps(write, tools):
    write("tools/echo.py", ECHO)
    manager = Manager([tools])
    result = await manager.invoke(
        "echo",
        {"$context": {"locals": {"from": "dollar"}, "nonlocals": {"n": 1}}},
        context={"locals": {"from": "explicit"}},
    )
    assert result["locals"] == {"from": "explicit"}
    probe = []
    manager.register("seed", lambda ctx: probe.append(ctx.nonlocals))
    await manager.invoke("seed", {"$context": {"nonlocals": {"n": 1}}}, context={"locals": {}})
    assert probe == [{"n": 1}]


async def test_r_inv_1_unknown_dollar_key_is_refused(write, tools):
    write("tools/echo.py", ECHO)
    with pytest.raises(InvocationError, match=r"unknown option '\$evil'") as info:
        await Manager([tools]).invoke("echo", {"$evil": 1})
    assert info.value.key == "$evil"
    with pytest.raises(InvocationError):
        await Manager([tools]).invoke("missing-tool", {"$evil": 1})  # extraction comes before resolution


async def test_r_inv_1_non_mapping_args(write, tools):
    write("tools/echo.py", "def main(ctx):\n    return ctx.args\n")
    manager = Manager([tools])
    assert await manager.invoke("echo", "plain text") == "plain text"
    assert await manager.invoke("echo", [1, "$x"]) == [1, "$x"]
    assert await manager.invoke("echo") == {}


async def test_r_inv_2_steps_set_origin_prompt_tool_and_history(write, tools):
    path = write("tools/page.md", "---\ndescription: A page.\nmetadata: {probe: {}}\n---\nHi {{ args.n }}\n")
    write(
        "tools/probe.py",
        "async def main(ctx):\n"
        "    t = ctx.target\n"
        "    t.nonlocals['seen'] = {'origin': t.run.origin['uri'], 'prompt': t.locals['prompt'], 'tool': dict(t.run.tool),\n"
        "        'history': [(f['tool'], f['args']) for f in t.run.history], 'fm': t.run.origin['frontmatter']['description']}\n"
        "    return await t.manager.next()\n",
    )
    manager = Manager([tools])
    box: dict = {}
    assert await manager.invoke("page", {"n": 1}, context={"nonlocals": box}) == "Hi 1"
    seen = box["seen"]
    assert seen["origin"] == path.as_uri()
    assert seen["prompt"] == "Hi {{ args.n }}"
    assert seen["tool"]["name"] == "page" and seen["tool"]["kind"] == "markdown"
    assert seen["fm"] == "A page."
    assert seen["history"][0] == ("page", {"n": 1})
    assert ("probe", {}) in seen["history"]
    with pytest.raises(ToolNotFoundError):
        await manager.invoke("nope")


async def test_r_inv_3_context_fields(write, tools):
    facts = {}

    async def inner(ctx):
        facts["inner"] = (ctx.depth, ctx.parent is not None, ctx.target is ctx, ctx.envelope, ctx.run.id)
        ctx.nonlocals["from-inner"] = True

    async def outer(ctx):
        facts["outer"] = (ctx.depth, ctx.parent, ctx.target is ctx, ctx.run.id)
        await ctx.manager.invoke("inner")
        facts["nonlocals"] = dict(ctx.nonlocals)
        facts["history"] = [f["tool"] for f in ctx.run.history if f["tool"] in ("outer", "inner")]
        facts["paths"] = ctx.paths
        facts["cwd"] = ctx.cwd

    manager = Manager([tools], cwd=tools)
    manager.register("inner", inner)
    manager.register("outer", outer)
    await manager.invoke("outer", context={"envelope": {"caller": "test"}})
    depth, parent, self_target, run_id = facts["outer"]
    assert (depth, parent, self_target) == (0, None, True)
    assert facts["inner"] == (1, True, True, {"caller": "test"}, run_id)
    assert facts["nonlocals"] == {"from-inner": True}
    assert facts["history"] == ["outer", "inner"]
    assert facts["paths"] == manager.paths
    assert facts["cwd"] == tools.resolve()


async def test_r_inv_3_seeded_nonlocals_are_not_shared_back(write, tools):
    async def inner(ctx):
        ctx.nonlocals["leak"] = True

    async def outer(ctx):
        await ctx.manager.invoke("inner", {"$context": {"nonlocals": {}}})
        return dict(ctx.nonlocals)

    manager = Manager([tools])
    manager.register("inner", inner)
    manager.register("outer", outer)
    assert await manager.invoke("outer") == {}


async def test_r_inv_3_unknown_context_key(write, tools):
    write("tools/echo.py", ECHO)
    with pytest.raises(InvocationError, match="unknown context key"):
        await Manager([tools]).invoke("echo", {"$context": {"globals": {}}})


async def test_r_inv_4_300_concurrent_invocations_share_nothing(write, tools):
    write(
        "tools/work.py",
        "import anyio\n"
        "frontmatter = {'metadata': {'tag': '{{ args.i }}', 'mark': {}}}\n"
        "async def main(ctx):\n"
        "    ctx.locals['mine'] = ctx.args['i']\n"
        "    await anyio.sleep(0)\n"
        "    return (ctx.args['i'], ctx.locals['mine'], ctx.meta['tag'], ctx.locals['marked'], len(ctx.run.history))\n",
    )
    write(
        "tools/mark.py",
        "import anyio\n"
        "async def main(ctx):\n"
        "    ctx.target.locals['marked'] = ctx.target.args['i']\n"
        "    await anyio.sleep(0)\n"
        "    return await ctx.target.manager.next()\n",
    )
    manager = Manager([tools])
    results: dict[int, tuple] = {}

    async def one(i: int) -> None:
        results[i] = await manager.invoke("work", {"i": i})

    async with anyio.create_task_group() as group:
        for i in range(300):
            group.start_soon(one, i)
    histories = {r[4] for r in results.values()}
    assert all(results[i][:4] == (i, i, str(i), i) for i in range(300))
    assert len(histories) == 1  # each run has its own history of the same length


async def test_r_inv_5_depth_limit_is_a_clean_error(write, tools):
    write(
        "tools/deep.py",
        "async def main(ctx):\n    return await ctx.manager.invoke('deep', {'n': ctx.args.get('n', 0) + 1})\n",
    )
    with pytest.raises(InvocationError, match=r"depth limit \(64\)") as info:
        await Manager([tools]).invoke("deep")
    assert info.value.tool == "deep"
    with pytest.raises(InvocationError, match=r"depth limit \(5000\)|nested invocation limit \(2000\)"):
        await Manager([tools], max_depth=5000).invoke("deep")


async def test_r_inv_5_timeout_cancels_and_runs_finally(write, tools):
    cleaned = []

    async def slow(ctx):
        try:
            await anyio.sleep(10)
        finally:
            cleaned.append(True)

    manager = Manager([tools])
    manager.register("slow", slow)
    with anyio.fail_after(5):
        with pytest.raises(InvocationTimeout, match="timed out after 0.05 s") as info:
            await manager.invoke("slow", timeout=0.05)
    assert info.value.tool == "slow"
    assert cleaned == [True]
    with pytest.raises(InvocationTimeout):
        await manager.invoke("slow", {"$timeout": 0.05})
    with pytest.raises(InvocationError, match="positive number"):
        await manager.invoke("slow", {"$timeout": "soon"})


async def test_r_inv_5_invoke_sync_refuses_a_running_loop(write, tools):
    write("tools/echo.py", ECHO)
    with pytest.raises(InvocationError, match="inside an event loop"):
        Manager([tools]).invoke_sync("echo")


def test_r_inv_5_invoke_sync(write, tools):
    write("tools/echo.py", "def main(ctx):\n    return ctx.args['x'] * 2\n")
    manager = Manager([tools])
    assert manager.invoke_sync("echo", {"x": 21}) == 42
    assert manager.invoke_sync("echo", {"x": 2}, backend="trio") == 4
