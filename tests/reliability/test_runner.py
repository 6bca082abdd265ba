"""The runner under misbehaving middleware (R-CHAIN-6..9): one next() at a time per chain.

Every middleware here is an ordinary tool file; the body counts its runs in
``nonlocals`` (a box the test seeds), so "the body ran once" is observed, not
assumed.
"""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import anyio
import pytest
import yaml
from heap_helpers import own_heap

from orchestrator import InvocationError, Manager, ReturnsValidationError
from orchestrator.events import Event

pytestmark = pytest.mark.anyio

ALREADY = "next() is already running for 't': an entry may continue the chain once at a time"

# The body every test wraps: counts its runs, yields to the loop once (so a
# concurrent next() really overlaps it), returns 'done'.
BODY = """
import anyio
async def main(ctx):
    ctx.nonlocals["body"] = ctx.nonlocals.get("body", 0) + 1
    await anyio.sleep(0.01)
    return "done"
"""


def tool(write, name: str, metadata: dict, body: str = BODY) -> None:
    """tools/<name>.py with ``metadata`` as its frontmatter and ``body`` as its code."""
    write(f"tools/{name}.py", f"frontmatter = {{'metadata': {metadata!r}}}\n" + textwrap.dedent(body))


def middleware(write, name: str, body: str) -> None:
    write(f"tools/{name}.py", textwrap.dedent(body))


PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"

# Where the middleware under test sits in ``t``'s chain: first, or after a pass-through entry that went down
# the chain inline (a runner telling tasks apart per chain rather than per level would differ there).
PLACES = pytest.mark.parametrize("place", ["first", "later"])


def chained(write, name: str, body: str, place: str = "first") -> None:
    """The middleware ``name`` (``body``) and ``t``, whose chain has it ``first`` or ``later``, after ``first``."""
    middleware(write, name, body)
    if place == "first":
        tool(write, "t", {name: {}})
    else:
        middleware(write, "first", PASS)
        tool(write, "t", {"first": {}, name: {}, "$order": {name: {"after": ["first"]}}})


async def run(manager: Manager, ref: str = "t", args: dict | None = None) -> tuple[object, dict]:
    box: dict = {}
    result = await manager.invoke(ref, args, context={"nonlocals": box})
    return result, box


async def test_r_chain_7_next_twice_in_sequence_returns_the_result_at_once(write, tools: Path):
    middleware(
        write,
        "twice",
        """
        async def main(ctx):
            t = ctx.target
            first = await t.manager.next()
            second = await t.manager.next()
            t.nonlocals["seen"] = [first, second]
            return second
        """,
    )
    tool(write, "t", {"twice": {}})
    result, box = await run(Manager([tools]))
    assert result == "done"
    assert box["seen"] == ["done", "done"]
    assert box["body"] == 1


@PLACES
async def test_r_chain_6_next_twice_concurrently_is_an_error_and_the_chain_runs_once(write, tools: Path, place: str):
    chained(
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
                    outcomes.append(("error", type(exc).__name__, str(exc), exc.tool))
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                group.start_soon(call)
            t.nonlocals["outcomes"] = outcomes
            return [o for o in outcomes if o[0] == "ok"][0][1]
        """,
        place,
    )
    result, box = await run(Manager([tools]))
    assert result == "done"
    assert box["body"] == 1
    assert sorted(box["outcomes"]) == [
        ("error", "InvocationError", f"{ALREADY} (tool 't')", "t"),
        ("ok", "done"),
    ]


@PLACES
async def test_r_chain_6_next_from_a_task_outside_the_chain_is_an_error(write, tools: Path, place: str):
    chained(
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
        place,
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


@PLACES
async def test_r_chain_6_next_from_one_child_task_of_the_entry_is_fine(write, tools: Path, place: str):
    chained(
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
        place,
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("done", 1)


async def test_r_chain_7_an_entry_that_never_calls_next_ends_the_descent(write, tools: Path):
    middleware(write, "stopper", "async def main(ctx):\n    return 'stopped here'\n")
    middleware(
        write,
        "later",
        "async def main(ctx):\n    ctx.target.nonlocals['later'] = True\n    return await ctx.target.manager.next()\n",
    )
    tool(write, "t", {"stopper": {}, "later": {}, "$order": {"later": {"after": ["stopper"]}}})
    result, box = await run(Manager([tools]))
    assert result == "stopped here"
    assert "later" not in box
    assert "body" not in box


async def test_r_chain_11_an_error_after_next_travels_through_outer_entries(write, tools: Path):
    middleware(
        write,
        "outer",
        """
        async def main(ctx):
            t = ctx.target
            log = t.nonlocals.setdefault("log", [])
            try:
                return await t.manager.next()
            except ValueError as exc:
                log.append(f"outer caught: {exc}")
                raise
            finally:
                log.append("outer finally")
        """,
    )
    middleware(
        write,
        "raiser",
        """
        async def main(ctx):
            t = ctx.target
            result = await t.manager.next()
            t.nonlocals["log"].append(f"raiser saw {result}")
            raise ValueError("raiser failed after next")
        """,
    )
    tool(write, "t", {"outer": {}, "raiser": {}, "$order": {"raiser": {"after": ["outer"]}}})
    box: dict = {}
    with pytest.raises(ValueError, match="raiser failed after next"):
        await Manager([tools]).invoke("t", context={"nonlocals": box})
    assert box["log"] == ["raiser saw done", "outer caught: raiser failed after next", "outer finally"]
    assert box["body"] == 1


async def test_r_chain_11_a_value_returned_after_a_caught_error_is_the_result(write, tools: Path):
    middleware(
        write,
        "handler",
        """
        async def main(ctx):
            t = ctx.target
            try:
                return await t.manager.next()
            except Exception as exc:
                t.nonlocals["inner result"] = t.locals.get("result")
                return f"recovered from {type(exc).__name__}"
        """,
    )
    # The body sets a result (42), then validate-returns rejects it: the
    # handler's value replaces the inner one.
    tool(write, "t", {"handler": {}, "returns": {"type": "string"}}, "def main(ctx):\n    return 42\n")
    result, box = await run(Manager([tools]))
    assert result == "recovered from ReturnsValidationError"
    assert box["inner result"] == 42
    with pytest.raises(ReturnsValidationError):
        await Manager([tools]).invoke("t", middleware={"handler": {"remove": True}})


async def test_the_guard_is_released_when_next_raises(write, tools: Path):
    middleware(
        write,
        "again",
        """
        async def main(ctx):
            t = ctx.target
            try:
                await t.manager.next()
            except RuntimeError as exc:
                t.nonlocals["caught"] = str(exc)
            return ["again", await t.manager.next()]
        """,
    )
    tool(write, "t", {"$inherit": False, "again": {}}, "async def main(ctx):\n    raise RuntimeError('body broke')\n")
    result, box = await run(Manager([tools]))
    assert result == ["again", None]
    assert box["caught"] == "body broke"


async def test_the_guard_is_released_when_next_is_cancelled(write, tools: Path):
    middleware(
        write,
        "impatient",
        """
        import anyio
        async def main(ctx):
            t = ctx.target
            with anyio.move_on_after(0.05):
                await t.manager.next()
            return ["gave up", await t.manager.next()]
        """,
    )
    tool(
        write,
        "t",
        {"$inherit": False, "impatient": {}},
        "import anyio\nasync def main(ctx):\n    await anyio.sleep(60)\n",
    )
    with anyio.fail_after(5):  # the bug this guards against would hang or raise
        result, _ = await run(Manager([tools]))
    assert result == ["gave up", None]


async def test_retry_reruns_the_chain_after_a_failure(write, tools: Path):
    tool(
        write,
        "t",
        {"retry": {"attempts": 3, "backoff": 0, "on": ["RuntimeError"]}},
        """
        async def main(ctx):
            ctx.nonlocals["body"] = ctx.nonlocals.get("body", 0) + 1
            if ctx.nonlocals["body"] < 3:
                raise RuntimeError(f"attempt {ctx.nonlocals['body']}")
            return "third time"
        """,
    )
    result, box = await run(Manager([tools]))
    assert result == "third time"
    assert box["retries"] == ["RuntimeError: attempt 1", "RuntimeError: attempt 2"]


async def test_r_chain_9_injected_entries_continue_the_chain(write, tools: Path):
    middleware(
        write,
        "injector",
        """
        async def tag(ctx, args):
            ctx.nonlocals.setdefault("tags", []).append(args)
            return await ctx.manager.next()
        async def main(ctx):
            t = ctx.target
            t.manager.inject([{"name": "tag-a", "fn": tag, "args": "a"}, {"name": "tag-b", "fn": tag, "args": "b"}])
            return await t.manager.next()
        """,
    )
    tool(write, "t", {"injector": {}})
    result, box = await run(Manager([tools]))
    assert (result, box["tags"], box["body"]) == ("done", ["a", "b"], 1)


async def test_nested_chains_each_have_their_own_guard(write, tools: Path):
    # 'wrap' runs under the default authority (a chain of its own) and wraps a
    # tool whose body invokes another tool through the same middleware.
    middleware(write, "wrap", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    tool(write, "inner", {"wrap": {}})
    tool(write, "t", {"wrap": {}}, "async def main(ctx):\n    return 'outer+' + await ctx.manager.invoke('inner')\n")
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("outer+done", 1)


async def test_a_child_task_that_took_over_hands_the_chain_back(write, tools: Path):
    # The child continues the chain; once its next() returned, the entry's own next() returns the result at once.
    chained(
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
        "later",
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == (["done", "done"], 1)


async def test_the_body_runs_once_when_a_child_task_races_its_entrys_own_next(write, tools: Path):
    # The child's next() overlaps the entry's own: it is refused (or, on a slow machine, comes after and gets
    # the result at once); the chain runs once.
    chained(
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
        "later",
    )
    result, box = await run(Manager([tools]))
    assert (result, box["body"]) == ("done", 1)
    assert box["late"] in (["InvocationError"], ["done"])


async def test_a_finished_chain_keeps_no_cycle(write, tools: Path):
    chained(write, "second", PASS, "later")
    manager = Manager([tools])
    with own_heap():  # the collections walk what the calls made, not the worker's heap
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


def agent(write, name: str, script: list, body: str) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}}
    text = "---\n" + yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}) + "---\n" + body + "\n"
    write(f"tools/{name}.md", text)


async def test_r_agent_3_a_model_calling_next_twice_in_one_turn_hears_an_error(write, tools: Path):
    tool(write, "t", {"reviewer": {}})
    agent(
        write,
        "reviewer",
        [
            {"calls": [{"name": "next", "arguments": {}}, {"name": "next", "arguments": {}}]},
            {
                "answer": "reviewed once",
                # "\n" + "error:": a tool message starts with the error.
                "expect": {"last-role": "tool", "contains": ["done", f"\nerror: InvocationError: {ALREADY}"]},
            },
        ],
        "Review the result.",
    )
    ends: list[Event] = []
    manager = Manager([tools], on_event=lambda e: ends.append(e) if e.kind == "tool.end" else None)
    result, box = await run(manager)
    assert result == "reviewed once"
    assert box["body"] == 1
    errors = sorted(str(e.data["error"]) for e in ends)
    assert errors == ["None", f"error: InvocationError: {ALREADY} (tool 't')"]
