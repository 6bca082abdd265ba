"""A lean invocation (issue 11, points 2 and 6): no reference cycles, one level per entry, cheap per-call state.

Contexts die by reference counting: after an invocation with the cyclic
collector disabled, ``gc.collect()`` finds nothing to free. A chain of 1,000
default-authority middleware runs; a tool or middleware that recurses still
meets a typed limit, never a ``RecursionError``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import anyio
import pytest
import yaml

from orchestrator import InvocationError, Manager
from orchestrator.options import NO_OPTIONS, extract_options

pytestmark = pytest.mark.anyio

PASS = "frontmatter = {'role': 'middleware'}\nasync def main(ctx):\n    return await ctx.target.manager.next()\n"


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic collector disabled (what is left in cycles stays until ``gc.collect()``), restored after.

    Every object made before the test is frozen (``gc.freeze()``): ``gc.collect()`` then walks only what
    the test made, so it counts the same cycles without walking the whole suite's heap (seconds a test
    in a worker that has run hundreds of tests).
    """
    was = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


async def cyclic_garbage(manager: Manager, ref: str, args: object = None, **options: object) -> tuple[object, int]:
    """Invoke once to warm every cache, then again: the result and what ``gc.collect()`` freed after it."""
    await manager.invoke(ref, args, **options)
    gc.collect()
    result = await manager.invoke(ref, args, **options)
    return result, gc.collect()


async def test_a_python_tool_leaves_no_reference_cycles(write, tools, collector_off):
    write("tools/noop.py", "async def main(ctx):\n    return {'depth': ctx.depth, 'me': ctx.target is ctx}\n")
    result, freed = await cyclic_garbage(Manager([tools]), "noop", {"x": 1})
    assert result == {"depth": 0, "me": True}
    assert freed == 0


async def test_a_chain_of_middleware_and_a_sync_body_leave_no_reference_cycles(write, tools, collector_off):
    for i in range(3):
        write(f"tools/pass{i}.py", PASS)
    write(
        "tools/shout.py",
        "frontmatter = {'metadata': {'params': {'type': 'object'}, 'pass0': {}, 'pass1': {}}}\n"
        "def main(ctx):\n    return str(ctx.args.get('text', '')).upper()\n",
    )
    manager = Manager([tools])
    result, freed = await cyclic_garbage(manager, "shout", {"text": "hi"}, middleware={"pass2": {}})
    assert result == "HI"
    assert freed == 0


async def test_a_templated_markdown_tool_leaves_no_reference_cycles(write, tools, collector_off):
    write(
        "tools/greet.md",
        """
        ---
        description: Greets.
        metadata:
          params: {type: object, properties: {name: {type: string}}}
          title: "Dr {{ args.name }}"
        ---
        Hello {{ meta.title }}!
        """,
    )
    result, freed = await cyclic_garbage(Manager([tools]), "greet", {"name": "Ada"})
    assert result == "Hello Dr Ada!"
    assert freed == 0


async def test_an_agent_run_leaves_no_reference_cycles(write, tools, collector_off):
    write("tools/weather.py", "async def main(ctx):\n    return {'temp': len(ctx.args['city'])}\n")
    script = [
        {"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        {"answer": "It is 5 in Paris."},
    ]
    metadata = {"model": {"provider": "scripted", "script": script}, "tools": ["weather"]}
    front = yaml.safe_dump({"description": "forecast", "metadata": metadata}, sort_keys=False)
    write("tools/forecast.md", f"---\n{front}---\nWeather in {{{{ args.city }}}}?\n")
    manager = Manager([tools])
    await manager.invoke("forecast", {"city": "Paris"})  # the provider and its imports, once
    result, freed = await cyclic_garbage(manager, "forecast", {"city": "Paris"})
    assert result == "It is 5 in Paris."
    assert freed == 0


async def test_a_context_refers_to_itself_only_through_properties(write, tools):
    seen = {}

    async def probe(ctx):
        seen.update(target=ctx.target is ctx, bound=ctx.manager is not ctx.manager, run=ctx.run.tool["name"])
        ctx.meta["added"] = 1  # its own copy: the plan's merged metadata stays untouched
        return dict(ctx.meta)

    manager = Manager([tools])
    manager.register("probe", probe, metadata={"label": "x"})
    first = await manager.invoke("probe")
    second = await manager.invoke("probe")
    assert first["added"] == 1 and second["label"] == "x"
    assert manager.explain("probe").key("label").value == "x"
    assert "added" not in {k.key for k in manager.explain("probe").keys}
    assert seen == {"target": True, "bound": True, "run": "probe"}


@pytest.mark.slow
async def test_a_chain_of_1000_default_authority_middleware_runs(write, tools):
    write("tools/noop.py", "async def main(ctx):\n    return 'bottom'\n")
    for i in range(1000):
        write(f"tools/pass{i}.py", PASS)
    manager = Manager([tools])
    with anyio.fail_after(120):  # generous: proves "does not hang", not a speed
        assert await manager.invoke("noop", middleware={f"pass{i}": {} for i in range(1000)}) == "bottom"


async def test_an_entry_takes_one_level_of_max_stack(write, tools):
    write("tools/noop.py", "async def main(ctx):\n    return 'bottom'\n")
    for i in range(12):
        write(f"tools/pass{i}.py", PASS)
    # noop and the 12 entries (its trust has no work: no invocation); the entries' own built-ins count apart
    manager = Manager([tools], max_stack=13)
    assert await manager.invoke("noop", middleware={f"pass{i}": {} for i in range(12)}) == "bottom"
    tight = Manager([tools], max_stack=12)
    with pytest.raises(InvocationError, match=r"nested invocation limit \(12\)") as info:
        await tight.invoke("noop", middleware={f"pass{i}": {} for i in range(12)})
    assert info.value.tool == "noop"


async def test_a_recursing_tool_still_meets_the_limit_as_a_typed_error(write, tools):
    write("tools/deep.py", "async def main(ctx):\n    return await ctx.manager.invoke('deep')\n")
    with pytest.raises(InvocationError, match=r"nested invocation limit \(300\)"):
        await Manager([tools], max_depth=10_000, max_stack=300).invoke("deep")


async def test_a_middleware_that_keeps_injecting_into_its_own_chain_meets_the_limit(write, tools):
    # An entry of a middleware's own chain that injects another of itself each time: the levels counted
    # apart for entries of entries bound it too, with a typed error rather than a RecursionError.
    write(
        "tools/again.py",
        "frontmatter = {'role': 'middleware'}\n"
        "async def main(ctx):\n"
        "    ctx.target.manager.inject([{'name': 'again2'}])\n"
        "    return await ctx.target.manager.next()\n",
    )
    write(
        "tools/again2.py",
        "frontmatter = {'role': 'middleware'}\n"
        "async def main(ctx):\n"
        "    ctx.target.manager.inject([{'name': 'again'}])\n"
        "    return await ctx.target.manager.next()\n",
    )
    write("tools/wrapper.py", PASS.replace("'middleware'}", "'middleware', 'metadata': {'again': {}}}"))
    write("tools/noop.py", "async def main(ctx):\n    return 'bottom'\n")
    with pytest.raises(InvocationError, match=r"nested invocation limit \(200\)"):
        await Manager([tools], max_stack=200).invoke("noop", middleware={"wrapper": {}})


async def test_run_ids_are_unique_and_shared_by_a_run(write, tools):
    write(
        "tools/ids.py",
        "async def main(ctx):\n    inner = await ctx.manager.invoke('leaf')\n    return ctx.run.id, inner\n",
    )
    write("tools/leaf.py", "async def main(ctx):\n    return ctx.run.id\n")
    manager = Manager([tools])
    runs = [await manager.invoke("ids") for _ in range(50)]
    assert all(outer == inner for outer, inner in runs)
    assert len({outer for outer, _ in runs}) == 50
    assert all(isinstance(i, str) and len(i) >= 16 for i, _ in runs)


def test_no_options_build_no_option_dict():
    args = {"text": "hi"}
    cleaned, options = extract_options(args, "shout", None, None, None, None)
    assert cleaned is args and options is NO_OPTIONS
    assert extract_options(None, "shout", None, None, None, None) == ({}, NO_OPTIONS)
    cleaned, options = extract_options({"$timeout": 2, "a": 1}, "shout", None, None, None, None)
    assert cleaned == {"a": 1} and options["timeout"] == 2


def test_the_hot_path_objects_have_slots():
    from orchestrator.context import BoundManager, Context, Run, Shared

    for cls in (Context, BoundManager, Run, Shared):
        assert "__slots__" in vars(cls) and cls.__dictoffset__ == 0, cls  # no per-instance __dict__


async def test_an_entry_context_is_the_context_the_constructor_builds(write, tools):
    """Pipeline.bind sets every slot of a template-free entry's context (the hot path must not drift from __init__)."""
    from orchestrator.context import Context, Shared

    write("tools/leaf.py", "frontmatter = {'metadata': {'v': 2}}\n\nasync def main(ctx):\n    return 1\n")
    write("tools/top.py", "async def main(ctx):\n    return 1\n")
    manager = Manager([tools])
    pipeline = manager.catalog.pipeline("leaf", manager.paths, None)
    tool, plan = pipeline.tool, pipeline.plan
    target = Context(
        manager,
        manager.find_tool("top"),
        {"a": 1},
        Shared("r"),
        parent=None,
        target=None,
        envelope={"e": 1},
        paths=manager.paths,
        cwd=manager.cwd,
        chain=[],
        values={"k": 1},
        nonlocals={"n": 1},
    )
    built = Context(
        manager,
        tool,
        {"b": 2},
        target.shared,
        parent=target,
        target=target,
        envelope=target.envelope,
        paths=target.paths,
        cwd=target.cwd,
        chain=(),
        values=plan.static.values,
        phases=plan.phases,
        locked=plan.static.locked,
        env=plan.env,
        resolved=None,
    )
    fast = pipeline.bind({"b": 2}, None, target, target, 0)
    for slot in Context.__slots__:
        assert getattr(fast, slot) == getattr(built, slot), slot
    assert fast.target is target and fast.meta["v"] == 2 and fast.trust == built.trust
