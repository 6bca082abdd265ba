"""The runner and extra middleware (R-CHAIN-4..11), end to end through manager.invoke."""

from __future__ import annotations

import gc
import json
import logging

import pytest
from heap_helpers import own_heap

from orchestrator import ConfigurationError, Manager, SecurityError, ctx_target

pytestmark = pytest.mark.anyio

PASS = "async def main(ctx):\n    ctx.target.locals.setdefault('seen', []).append(ctx.tool.name)\n    return await ctx.target.manager.next()\n"
BODY = "def main(ctx):\n    ctx.locals.setdefault('seen', []).append('body')\n    return {'seen': ctx.locals['seen']}\n"


@pytest.fixture
def manager(write, tools):
    write("tools/one.py", PASS)
    write("tools/two.py", PASS)
    write("tools/three.py", PASS)
    write("tools/t.py", "frontmatter = {'metadata': {'one': {}, 'two': {}}}\n" + BODY)
    return Manager([tools])


async def test_r_chain_4_append_from_every_source(manager):
    seed = {"locals": {"middleware": {"three": {}}}}
    assert (await manager.invoke("t", context=seed))["seen"] == ["one", "two", "three", "body"]
    assert (await manager.invoke("t", middleware=[{"name": "three"}]))["seen"] == ["one", "two", "three", "body"]
    assert (await manager.invoke("t", {"$context": seed}))["seen"] == ["one", "two", "three", "body"]
    assert (await manager.invoke("t", {"$middleware": {"three": {}}}))["seen"] == ["one", "two", "three", "body"]


async def test_r_chain_4_remove_and_override(manager):
    assert (await manager.invoke("t", {"$middleware": {"one": {"remove": True}}}))["seen"] == ["two", "body"]
    moved = await manager.invoke("t", {"$middleware": {"one": {"after": ["two"]}}})
    assert moved["seen"] == ["two", "one", "body"]


async def test_r_chain_4_override_keeps_the_original_constraints(write, tools):
    write("tools/a.py", PASS)
    write("tools/b.py", PASS)
    write("tools/t.py", "frontmatter = {'metadata': {'a': 1, 'b': 2, '$order': {'a': {'after': ['b']}}}}\n" + BODY)
    write(
        "tools/args.py",
        "async def main(ctx):\n    ctx.target.locals.setdefault('seen', []).append(ctx.args)\n    return await ctx.target.manager.next()\n",
    )
    manager = Manager([tools])
    assert (await manager.invoke("t"))["seen"] == ["b", "a", "body"]

    def spy(ctx, args):
        ctx.locals.setdefault("seen", []).append(f"fn:{args}")
        return ctx.manager.next()

    replaced = await manager.invoke("t", middleware={"a": {"fn": spy, "args": "new"}})
    assert replaced["seen"] == ["b", "fn:new", "body"]


async def test_r_chain_4_fn_entries_are_called_directly(manager):
    calls = []

    async def tap(ctx, args):
        calls.append((ctx.tool.name, args))
        return await ctx.manager.next()

    result = await manager.invoke("t", middleware={"tap": {"fn": tap, "args": {"k": 1}, "before": ["one"]}})
    assert calls == [("t", {"k": 1})]
    assert result["seen"] == ["two", "one", "body"]
    # R-CHAIN-3: 'two' was inserted before 'tap' and is free as early, so it goes first.
    order = [e.name for e in manager.explain("t", middleware={"tap": {"before": ["one"]}}).chain]
    assert order.index("two") < order.index("tap") < order.index("one")


async def test_r_chain_4_plain_entries_round_trip_through_json(manager):
    spec = json.loads(json.dumps({"$middleware": [{"name": "three", "args": {"x": 1}, "before": ["two"]}]}))
    assert (await manager.invoke("t", spec))["seen"] == ["one", "three", "two", "body"]


async def test_r_chain_4_bad_extra_middleware(manager):
    with pytest.raises(ConfigurationError, match="unknown field"):
        await manager.invoke("t", {"$middleware": {"three": {"times": 3}}})
    with pytest.raises(ConfigurationError, match="mapping or a list"):
        await manager.invoke("t", {"$middleware": "three"})


async def test_r_chain_5_locked_entries_resist_callers(write, tools):
    write("tools/t.md", "---\n---\nhi\n")
    manager = Manager([tools])
    for spec in (
        {"validate-args": {"remove": True}},
        {"trust": {"args": {"env": True}}},
        {"validate-args": {"fn": lambda c, a: "x"}},
    ):
        with pytest.raises(SecurityError) as info:
            await manager.invoke("t", {"$context": {"locals": {"middleware": spec}}})
        assert info.value.tool == "t"
    assert await manager.invoke("t", {"$middleware": {"execute": {"remove": True}}}) == "hi"


async def test_r_chain_5_authorities_lock_their_own_entries(write, tools):
    write("tools/AUTHORITY.md", "---\nname: house\nmetadata: {audit: {}, $locked: [audit]}\n---\n")
    write("tools/audit.py", PASS)
    write("tools/t.py", BODY)
    manager = Manager([tools])
    assert (await manager.invoke("t"))["seen"] == ["audit", "body"]
    with pytest.raises(SecurityError, match="locked"):
        await manager.invoke("t", {"$middleware": {"audit": {"remove": True}}})


async def test_r_chain_6_entries_run_as_full_invocations(write, tools):
    write(
        "tools/inspect-me.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'n': {'default': 5}}}}}\n"
        "async def main(ctx):\n"
        "    t = ctx.target\n"
        "    t.locals['facts'] = [ctx.parent is t, ctx.tool.name, ctx.args, [e.name for e in ctx.chain]]\n"
        "    return await t.manager.next()\n",
    )
    write(
        "tools/t.py", "frontmatter = {'metadata': {'inspect-me': {}}}\ndef main(ctx):\n    return ctx.locals['facts']\n"
    )
    parent_is_target, name, args, chain = await Manager([tools]).invoke("t")
    assert parent_is_target and name == "inspect-me"
    assert args == {"n": 5}  # its own params middleware ran
    assert "validate-args" in chain and "execute" in chain


async def test_r_chain_7_results(write, tools):
    write("tools/none.py", "async def main(ctx):\n    await ctx.target.manager.next()\n    return None\n")
    write("tools/early.py", "def main(ctx):\n    return 'early'\n")
    write("tools/finisher.py", "def main(ctx):\n    ctx.target.manager.finish('finished')\n")
    write(
        "tools/twice.py",
        "async def main(ctx):\n    first = await ctx.target.manager.next()\n    second = await ctx.target.manager.next()\n    ctx.target.locals['both'] = (first, second)\n",
    )
    write("tools/t.py", "frontmatter = {'metadata': {'$inherit': False}}\ndef main(ctx):\n    return 'body'\n")
    manager = Manager([tools])
    assert await manager.invoke("t", {"$middleware": {"none": {}}}) == "body"  # None keeps the result
    assert await manager.invoke("t", {"$middleware": {"early": {}}}) == "early"  # short-circuit: body skipped
    assert await manager.invoke("t", {"$middleware": {"finisher": {}}}) == "finished"

    async def check(ctx, args):
        value = await ctx.manager.next()
        return (value, ctx.locals["both"])

    assert await manager.invoke("t", middleware={"c": {"fn": check}, "twice": {"after": ["c"]}}) == (
        "body",
        ("body", "body"),
    )


async def test_r_chain_7_entry_that_never_calls_next_ends_the_descent(write, tools):
    write("tools/stop.py", "def main(ctx):\n    ctx.target.locals['stopped'] = True\n")
    ran = []

    def later(ctx, args):
        ran.append("later")

    manager = Manager([tools])
    manager.register("t", lambda ctx: ran.append("body") or "body", metadata={"$inherit": False})
    assert await manager.invoke("t", middleware={"stop": {}, "later": {"fn": later, "after": ["stop"]}}) is None
    assert ran == []


async def test_r_chain_7_empty_chain_runs_the_body(write, tools):
    write("tools/t.md", "---\nmetadata: {$inherit: false}\n---\nleaf {{ args.n }}\n")
    assert await Manager([tools]).invoke("t", {"n": 1}) == "leaf 1"


async def test_r_chain_8_body_runs_once_at_execute(write, tools):
    write(
        "tools/exec-again.py",
        "async def main(ctx):\n    await ctx.target.manager.execute()\n    await ctx.target.manager.execute()\n    return await ctx.target.manager.next()\n",
    )
    count = []
    manager = Manager([tools])
    manager.register(
        "t",
        lambda ctx: count.append(1) or len(count),
        metadata={"exec-again": {}, "$order": {"exec-again": {"after": ["$execute"]}}},
    )
    assert await manager.invoke("t") == 1
    assert count == [1]


async def test_r_chain_8_body_at_the_bottom_when_execute_is_removed(write, tools):
    write("tools/after.py", "async def main(ctx):\n    r = await ctx.target.manager.next()\n    return f'[{r}]'\n")
    write("tools/t.md", "---\nmetadata: {after: {}, $order: {after: {after: [$post-execute]}}}\n---\nbody\n")
    manager = Manager([tools])
    assert await manager.invoke("t") == "[body]"
    assert await manager.invoke("t", {"$middleware": {"execute": {"remove": True}}}) == "[body]"


async def test_r_chain_8_post_execute_entries_run_after_the_body(write, tools):
    write(
        "tools/post.py",
        "async def main(ctx):\n    r = ctx.target.locals.get('result')\n    await ctx.target.manager.next()\n    return f'post saw {r}'\n",
    )
    write("tools/t.md", "---\nmetadata: {post: {}, $order: {post: {after: [$post-execute]}}}\n---\nbody\n")
    assert await Manager([tools]).invoke("t") == "post saw body"


async def test_r_chain_9_inject_after_the_current_position(write, tools):
    write(
        "tools/injector.py",
        "async def main(ctx):\n"
        "    t = ctx.target\n"
        "    t.manager.inject([{'name': 'one'}, {'name': 'two'}])\n"
        "    return await t.manager.next()\n",
    )
    write("tools/one.py", PASS)
    write("tools/two.py", PASS)
    write("tools/three.py", PASS)
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'injector': {}, 'three': {}, '$order': {'three': {'after': ['injector']}}}}\n"
        + BODY,
    )
    assert (await Manager([tools]).invoke("t"))["seen"] == ["one", "two", "three", "body"]


async def test_r_chain_9_constrained_injection_resorts_the_rest_and_strips_ran(write, tools):
    write(
        "tools/injector.py",
        "async def main(ctx):\n"
        "    t = ctx.target\n"
        "    t.manager.inject([{'name': 'one', 'after': ['three', 'injector']}, {'name': 'two', 'before': ['injector']}])\n"
        "    t.locals['after_inject'] = [e.name for e in t.chain[t.pos:]]\n"
        "    return await t.manager.next()\n",
    )
    for name in ("one", "two", "three"):
        write(f"tools/{name}.py", PASS)
    write("tools/t.py", "frontmatter = {'metadata': {'injector': {}, 'three': {}, '$inherit': False}}\n" + BODY)
    manager = Manager([tools])
    result = await manager.invoke("t", {"$middleware": {"three": {"after": ["injector"]}}})
    assert result["seen"] == ["two", "three", "one", "body"]


async def test_r_chain_10_forced_invocation_cycle_is_skipped_with_a_warning(write, tools, caplog):
    write(
        "tools/a.py",
        "frontmatter = {'metadata': {'b': {}, '$dynamic': ['b']}}\n" + PASS.replace("ctx.tool.name", "'a'"),
    )
    write(
        "tools/b.py",
        "frontmatter = {'metadata': {'a': {}, '$dynamic': ['a']}}\n" + PASS.replace("ctx.tool.name", "'b'"),
    )
    write("tools/t.py", "frontmatter = {'metadata': {'a': {}}}\n" + BODY)
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        result = await Manager([tools]).invoke("t")
    assert result["seen"] == ["a", "body"]
    assert any("skipping middleware 'a'" in r.getMessage() for r in caplog.records)


async def test_r_chain_10_independent_invokes_never_trigger_it(write, tools, caplog):
    write("tools/shared.py", PASS)
    write("tools/inner.py", "frontmatter = {'metadata': {'shared': {}}}\n" + BODY)
    write(
        "tools/outer.py",
        "frontmatter = {'metadata': {'shared': {}}}\n"
        "async def main(ctx):\n"
        "    return {'outer': ctx.locals['seen'], 'inner': (await ctx.manager.invoke('inner'))['seen']}\n",
    )
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        result = await Manager([tools]).invoke("outer")
    assert result == {"outer": ["shared"], "inner": ["shared", "body"]}
    assert not caplog.records


async def test_r_chain_11_error_handlers_nest_like_an_onion(write, tools):
    write(
        "tools/outer-handler.py",
        "from orchestrator import ctx_target\n"
        "async def main(ctx):\n"
        "    target = ctx_target(ctx)\n"
        "    try:\n"
        "        await target.manager.next()\n"
        "    except Exception as exc:\n"
        "        target.locals['result'] = f'outer recovered from {exc}'\n",
    )
    write(
        "tools/inner-handler.py",
        "async def main(ctx):\n"
        "    target = ctx.target\n"
        "    try:\n"
        "        await target.manager.next()\n"
        "    except ValueError as exc:\n"
        "        target.locals.setdefault('log', []).append('inner saw it')\n"
        "        raise RuntimeError(f'wrapped {exc}') from exc\n"
        "    finally:\n"
        "        target.locals.setdefault('log', []).append('inner finally')\n",
    )
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'outer-handler': {}, 'inner-handler': {}, '$order': {\n"
        "    'outer-handler': {'after': ['$pre-execute'], 'before': ['inner-handler']},\n"
        "    'inner-handler': {'after': ['$pre-execute'], 'before': ['execute']}}}}\n"
        "def main(ctx):\n"
        "    raise ValueError('boom')\n",
    )
    manager = Manager([tools])
    log = []

    async def keep(ctx, args):
        try:
            return await ctx.manager.next()
        finally:
            log.extend(ctx.locals["log"])

    result = await manager.invoke("t", middleware={"keep": {"fn": keep, "before": ["outer-handler"]}})
    assert result == "outer recovered from wrapped boom"
    assert log == ["inner saw it", "inner finally"]


async def test_r_chain_11_errors_propagate_through_finally(write, tools):
    write("tools/t.py", "def main(ctx):\n    raise KeyError('lost')\n")
    manager = Manager([tools])
    cleaned = []

    async def guard(ctx, args):
        try:
            return await ctx.manager.next()
        finally:
            cleaned.append(True)

    with pytest.raises(KeyError):
        await manager.invoke("t", middleware={"guard": {"fn": guard}})
    assert cleaned == [True]


async def test_r_chain_200_entries_deep_onion(write, tools):
    names = [f"m{i:03d}" for i in range(200)]
    for name in names:
        write(f"tools/{name}.py", PASS)
    write("tools/t.py", "frontmatter = {'metadata': {" + ", ".join(f"'{n}': {{}}" for n in names) + "}}\n" + BODY)
    result = await Manager([tools]).invoke("t")
    assert result["seen"] == [*names, "body"]


async def test_r_chain_nested_chains_are_independent(write, tools):
    write("tools/mw.py", "frontmatter = {'metadata': {'one': {}}}\n" + PASS)
    write("tools/one.py", PASS)
    write("tools/t.py", "frontmatter = {'metadata': {'mw': {}}}\n" + BODY)
    # mw's own chain runs 'one' on mw's context; t's chain sees only mw.
    assert (await Manager([tools]).invoke("t"))["seen"] == ["mw", "body"]


async def test_ctx_target_is_the_served_context(write, tools):
    seen = []

    def probe(ctx):
        seen.append(ctx_target(ctx) is ctx)

    manager = Manager([tools])
    manager.register("t", probe)
    await manager.invoke("t")
    assert seen == [True]


async def test_r_chain_7_finish_then_next_returns_at_once(tools):
    ran = []

    async def fin(ctx, args):
        ctx.manager.finish("done")
        ran.append(await ctx.manager.next())

    manager = Manager([tools])
    manager.register("t", lambda ctx: ran.append("body") or "body")
    assert await manager.invoke("t", middleware={"fin": {"fn": fin}}) == "done"
    assert ran == ["done"]  # no later entry and no body ran


async def test_r_chain_7_finish_without_value_keeps_result(tools):
    async def fin(ctx, args):
        await ctx.manager.execute()
        ctx.manager.finish()

    manager = Manager([tools])
    manager.register("t", lambda ctx: "body")
    assert await manager.invoke("t", middleware={"fin": {"fn": fin}}) == "body"


async def test_r_chain_4_an_empty_spec_means_the_entry_as_it_is(write, tools):
    """`$middleware: {guard: {}}` adds guard with args {} (as `guard: {}` in metadata); for an entry the
    cascade already has, {} keeps its args."""
    write("tools/guard.py", "async def main(ctx):\n    return f'{ctx.args!r} ' + await ctx.target.manager.next()\n")
    write("tools/page.md", "---\nmetadata:\n  $inherit: false\n---\nbody\n")
    write("tools/guarded.md", "---\nmetadata:\n  $inherit: false\n  guard: {level: 2}\n---\nbody\n")
    manager = Manager([tools])
    assert await manager.invoke("page", {"$middleware": {"guard": {}}}) == "{} body"
    assert await manager.invoke("page", {"$middleware": [{"name": "guard"}]}) == "{} body"
    assert await manager.invoke("guarded") == "{'level': 2} body"
    assert await manager.invoke("guarded", {"$middleware": {"guard": {}}}) == "{'level': 2} body"
    assert await manager.invoke("guarded", {"$middleware": {"guard": {"args": {"level": 3}}}}) == "{'level': 3} body"


KEEPER = """
import weakref
frontmatter = {'role': 'middleware'}
class Blob:
    def __init__(self):
        self.data = bytes(1 << 20)
async def main(ctx):
    blob = Blob()
    KIND def body(tctx):
        return {'size': len(blob.data), 'blob': weakref.ref(blob)}
    ctx.target.body = body
    return await ctx.target.manager.next()
"""


@pytest.mark.parametrize("kind", ["async ", ""])
async def test_r_chain_8_a_body_closure_set_per_call_dies_with_the_call(write, tools, kind):
    """A middleware that sets target.body to a closure (as delegate does) keeps nothing alive after the call."""
    write("tools/keeper.py", KEEPER.replace("KIND ", kind))
    write("tools/t.py", "frontmatter = {'metadata': {'keeper': {}}}\nasync def main(ctx):\n    return 'body'\n")
    manager = Manager([tools])
    with own_heap():  # the collection walks what the calls made, not the worker's heap
        results = [await manager.invoke("t") for _ in range(3)]
        gc.collect()
    assert [r["size"] for r in results] == [1 << 20] * 3
    assert [r["blob"]() for r in results] == [None] * 3
