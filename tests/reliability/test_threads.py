"""Sync code runs in worker threads: it never blocks the event loop, timeouts cut it off, limits bound it.

Slow sync bodies wait on a ``threading.Event`` (the gate) handed in through
``nonlocals``, so "still running" is a fact the test controls, not a sleep it
hopes is long enough; every test opens its gates before it ends.
"""

from __future__ import annotations

import contextvars
import textwrap
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

from orchestrator import InvocationError, InvocationTimeout, Manager
from orchestrator.limits import Limits

pytestmark = pytest.mark.anyio

SLOW = """
def main(ctx):
    box = ctx.nonlocals
    box["started"].set()
    try:
        box["gate"].wait(10)
        return "slow done"
    finally:
        box["finished"].set()
"""
GUARD = """
async def main(ctx):
    t = ctx.target
    try:
        return await t.manager.next()
    finally:
        t.nonlocals["log"].append(f"guard finally ({t.tool.name})")
"""
SLEEPER = """
import anyio
frontmatter = {"metadata": {"guard": {}}}
async def main(ctx):
    try:
        ctx.nonlocals["sleeping"].set()
        await anyio.sleep(60)
    finally:
        ctx.nonlocals["log"].append("sleeper finally")
"""


def write_tools(write) -> None:
    write("tools/slow.py", "frontmatter = {'metadata': {'guard': {}}}\n" + textwrap.dedent(SLOW))
    write("tools/guard.py", textwrap.dedent(GUARD))
    write("tools/sleeper.py", textwrap.dedent(SLEEPER))
    write("tools/fast.py", "async def main(ctx):\n    return 'fast'\n")
    write("tools/fast-sync.py", "def main(ctx):\n    return 'fast sync'\n")


@pytest.fixture
def box() -> Iterator[dict]:
    """Shared with the tools through nonlocals; the gate always opens at the end, so no thread outlives the test."""
    shared = {
        "gate": threading.Event(),
        "started": threading.Event(),
        "finished": threading.Event(),
        "log": [],
    }
    yield shared
    shared["gate"].set()
    shared["finished"].wait(10)


async def wait_for(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 5), "the thread never got there"


async def test_a_slow_sync_tool_does_not_delay_a_concurrent_call(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools])
    results: list = []

    async def slow() -> None:
        results.append(await manager.invoke("slow", context={"nonlocals": box}))

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        await wait_for(box["started"])
        assert await manager.invoke("fast") == "fast"
        assert await manager.invoke("fast-sync") == "fast sync"
        assert not box["finished"].is_set()  # both answered while the slow body still ran
        box["gate"].set()
    assert results == ["slow done"]


async def test_r_inv_5_timeout_returns_on_time_while_the_thread_runs_on(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools])
    started = time.monotonic()
    with pytest.raises(InvocationTimeout) as info:
        await manager.invoke("slow", {"$timeout": 0.2}, context={"nonlocals": box})
    assert time.monotonic() - started < 3  # the body would hold on for 10 s
    assert info.value.tool == "slow"
    assert box["log"] == ["guard finally (slow)"]
    assert not box["finished"].is_set()  # abandoned, not stopped: its result is dropped
    box["gate"].set()
    await wait_for(box["finished"])


async def test_cancelling_a_task_group_runs_every_finally_and_leaves_no_task(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools])
    box["sleeping"] = anyio.Event()
    before = {task.id for task in anyio.get_running_tasks()}
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(partial(manager.invoke, "slow", context={"nonlocals": box}))
            group.start_soon(partial(manager.invoke, "sleeper", context={"nonlocals": box}))
            await wait_for(box["started"])
            await box["sleeping"].wait()
            group.cancel_scope.cancel()
    assert sorted(box["log"]) == ["guard finally (sleeper)", "guard finally (slow)", "sleeper finally"]
    assert {task.id for task in anyio.get_running_tasks()} == before
    assert not box["finished"].is_set()


async def test_limits_threads_bounds_sync_bodies_at_once(write, tools: Path):
    write(
        "tools/pair.py",
        """
        def main(ctx):
            box = ctx.nonlocals
            with box["lock"]:
                box["inside"] += 1
                box["peak"] = max(box["peak"], box["inside"])
            try:
                box["barrier"].wait()  # two must be inside together, or this breaks after 5 s
            finally:
                with box["lock"]:
                    box["inside"] -= 1
            return "paired"
        """,
    )
    manager = Manager([tools], limits=Limits(threads=2))
    box = {"lock": threading.Lock(), "inside": 0, "peak": 0, "barrier": threading.Barrier(2, timeout=5)}
    results: list = []

    async def one() -> None:
        results.append(await manager.invoke("pair", context={"nonlocals": box}))

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(one)
    assert results == ["paired"] * 6
    assert box["peak"] == 2


async def test_each_manager_has_its_own_thread_slots(write, tools: Path):
    write("tools/meet.py", "def main(ctx):\n    ctx.nonlocals['barrier'].wait()\n    return 'met'\n")
    first, second = (Manager([tools], limits=Limits(threads=1)) for _ in range(2))
    box = {"barrier": threading.Barrier(2, timeout=5)}
    results: list = []

    async def one(manager: Manager) -> None:
        results.append(await manager.invoke("meet", context={"nonlocals": box}))

    async with anyio.create_task_group() as group:
        group.start_soon(one, first)
        group.start_soon(one, second)
    assert results == ["met", "met"]


async def test_an_abandoned_thread_keeps_its_slot_until_it_ends(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools], limits=Limits(threads=1))
    manager.explain("slow")  # plan slow and its guard now: the 0.1 s below is for its body, not a cold start
    assert await manager.invoke("fast-sync") == "fast sync"  # the worker thread exists; its slot is free again
    with pytest.raises(InvocationTimeout):
        await manager.invoke("slow", {"$timeout": 0.1}, context={"nonlocals": box})
    assert box["started"].is_set()  # the body holds the only slot
    # The only slot is still taken by the abandoned body: a second sync call is refused, naming it (issue 24).
    with pytest.raises(InvocationError, match="'slow'"):
        await manager.invoke("fast-sync", {"$timeout": 30})
    assert await manager.invoke("fast") == "fast"  # async code needs no slot
    box["gate"].set()
    await wait_for(box["finished"])
    with anyio.fail_after(5):
        assert await manager.invoke("fast-sync") == "fast sync"


async def test_registered_sync_functions_run_in_a_worker_thread_with_the_callers_contextvars(tools: Path):
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")
    loop_thread = threading.get_ident()

    def body(ctx):
        return {"off the loop": threading.get_ident() != loop_thread, "request": request_id.get()}

    manager = Manager([tools])
    manager.register("probe", body)
    request_id.set("r-42")
    assert await manager.invoke("probe") == {"off the loop": True, "request": "r-42"}


async def test_async_callables_stay_on_the_loop(tools: Path):
    loop_thread = threading.get_ident()

    class Probe:
        async def __call__(self, ctx):
            return threading.get_ident() == loop_thread

    async def probe(ctx):
        return threading.get_ident() == loop_thread

    manager = Manager([tools])
    manager.register("callable", Probe())
    manager.register("function", probe)
    assert await manager.invoke("callable") is True
    assert await manager.invoke("function") is True


async def test_a_sync_function_returning_an_awaitable_has_it_awaited(tools: Path):
    async def later(ctx):
        return f"awaited for {ctx.tool.name}"

    manager = Manager([tools])
    manager.register("deferred", lambda ctx: later(ctx))
    assert await manager.invoke("deferred") == "awaited for deferred"


async def test_sync_code_in_a_thread_may_call_back_into_the_loop(write, tools: Path):
    write("tools/fast.py", "async def main(ctx):\n    return 'fast'\n")
    write(
        "tools/caller.py",
        "import anyio.from_thread\n"
        "def main(ctx):\n"
        "    return 'called ' + anyio.from_thread.run(ctx.manager.invoke, 'fast')\n",
    )
    assert await Manager([tools]).invoke("caller") == "called fast"


async def test_r_chain_6_sync_fn_entries_run_in_a_thread_and_continue_the_chain(write, tools: Path):
    write("tools/t.py", "async def main(ctx):\n    return 'body'\n")
    loop_thread = threading.get_ident()
    seen: list = []

    def tap(ctx, args):
        seen.append((args, threading.get_ident() != loop_thread))
        return ctx.manager.next()  # a coroutine, awaited on the loop

    def from_thread(ctx, args):
        seen.append((args, threading.get_ident() != loop_thread))
        return anyio.from_thread.run(ctx.manager.next)

    result = await Manager([tools]).invoke(
        "t",
        middleware=[
            {"name": "tap", "fn": tap, "args": "tap"},
            {"name": "from-thread", "fn": from_thread, "args": "from thread", "after": ["tap"]},
        ],
    )
    assert result == "body"
    assert seen == [("tap", True), ("from thread", True)]


async def test_invoke_sync_runs_sync_bodies_on_each_new_loop(write, tools: Path):
    write("tools/fast-sync.py", "def main(ctx):\n    return 'fast sync'\n")
    manager = Manager([tools])
    for backend in ("asyncio", "trio"):
        assert await anyio.to_thread.run_sync(partial(manager.invoke_sync, "fast-sync", backend=backend)) == "fast sync"
