"""Load: many concurrent invocations stay isolated (R-INV-4), and memory stays flat over many calls.

Every invocation runs real tool files through ``await manager.invoke``: a
python tool and a markdown template tool, each wrapped by two metadata
middleware (``stamp`` records per-call state in its target's locals and
nonlocals and checks it after ``next()``; ``wrap`` wraps the result with a
marker). Every marker is derived from the ``id`` in the call's own args, so a
result that carries another call's id, or a middleware that finds another
call's state, shows state crossing between invocations.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator import Manager

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CONCURRENT = 10_000  # invocations in flight at once, in one task group
WARM_UP = 20_000  # invocations before memory is measured (every bounded cache is full, the file watcher started)
MEASURED = 5_000  # invocations measured after WARM_UP
SEQUENTIAL = WARM_UP + MEASURED  # invocations in the memory test
BATCH = 2_500
# The bounds are per measured call: a leak of 100 bytes or a quarter of an object per call fails.
# (Measured at 20,000 calls with bounds of 2 MB and 5,000 blocks: +880 B and +7 blocks.)
MEMORY_BOUND = MEASURED * 100  # bytes the traced heap may grow by over the MEASURED calls
BLOCK_BOUND = MEASURED // 4  # allocated blocks (and gc objects) it may grow by: one object per call is 5,000

# A python pass-through middleware: per-call state in the target's locals and
# nonlocals (shared by the target's run only), checked again after the rest of
# the chain ran, with real awaits in between so other invocations interleave.
STAMP = """
import anyio

async def main(ctx):
    target = ctx.target
    mine = target.args["id"]
    probe = target.locals.get("probe")
    if probe is not None:
        probe.enter()
    try:
        target.locals["stamp"] = f"s{mine}"
        target.nonlocals["owner"] = mine
        await anyio.sleep(0)
        await target.manager.next()
        await anyio.sleep(0)
        seen = (target.args["id"], target.locals.get("stamp"), target.nonlocals.get("owner"))
        if seen != (mine, f"s{mine}", mine):
            raise RuntimeError(f"state crossed into invocation {mine}: {seen}")
    finally:
        if probe is not None:
            probe.exit()
"""

# A python middleware that wraps the result with a marker of its own call.
WRAP = """
async def main(ctx):
    target = ctx.target
    result = await target.manager.next()
    mine = target.args["id"]
    if isinstance(result, dict):
        return {**result, "wrapped": f"w{mine}"}
    return f"<w{mine}>{result}</w{mine}>"
"""

ECHO_PY = """
frontmatter = {
    "description": "Echoes its id with what the middleware left in its locals.",
    "metadata": {
        "params": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "stamp": {},
        "wrap": {},
    },
}

async def main(ctx):
    return {"id": ctx.args["id"], "stamp": ctx.locals["stamp"], "run": ctx.run.id, "frames": len(ctx.run.history)}
"""

ECHO_MD = """
---
description: Echoes its id with what the middleware left in its locals.
metadata:
  params: {type: object, properties: {id: {type: integer}}, required: [id]}
  tag: "t{{ args.id }}"
  stamp: {}
  wrap: {}
---
{{ args.id }}/{{ meta.tag }}/{{ locals.stamp }}
"""


class Probe:
    """Counts middleware calls in flight, the most seen at once, and the process's memory at that moment."""

    def __init__(self) -> None:
        self.inside = 0
        self.peak = 0
        self.rss_at_peak = 0

    def enter(self) -> None:
        self.inside += 1
        if self.inside > self.peak:
            self.peak = self.inside
            if self.peak % 1000 == 0:
                self.rss_at_peak = rss()

    def exit(self) -> None:
        self.inside -= 1


def rss() -> int:
    """This process's resident memory in kB (from /proc; 0 where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


@pytest.fixture
def echo_tools(write, tools: Path) -> Path:
    write("tools/stamp.py", STAMP)
    write("tools/wrap.py", WRAP)
    write("tools/echo.py", ECHO_PY)
    write("tools/page.md", ECHO_MD)
    return tools


def expected(ref: str, i: int) -> Any:
    if ref == "page":
        return f"<w{i}>{i}/t{i}/s{i}</w{i}>"
    return {"id": i, "stamp": f"s{i}", "wrapped": f"w{i}"}


async def test_r_inv_4_ten_thousand_concurrent_invocations_with_middleware_stay_isolated(echo_tools):
    manager = Manager([echo_tools])
    probe = Probe()
    results: list[Any] = [None] * CONCURRENT

    async def one(i: int) -> None:
        ref = "page" if i % 2 else "echo"
        results[i] = await manager.invoke(ref, {"id": i}, context={"locals": {"probe": probe}})

    solo = await manager.invoke("echo", {"id": -1})
    before = rss()
    started = time.perf_counter()
    with anyio.fail_after(600):  # proves "does not hang"; takes seconds
        async with anyio.create_task_group() as tg:
            for i in range(CONCURRENT):
                tg.start_soon(one, i)
    seconds = time.perf_counter() - started

    runs = set()
    for i, result in enumerate(results):
        ref = "page" if i % 2 else "echo"
        if ref == "echo":
            runs.add(result.pop("run"))
            # the run's history holds this call's own frames only, as many as in a call made alone
            assert result.pop("frames") == solo["frames"], i
        assert result == expected(ref, i), i
    assert len(runs) == CONCURRENT // 2  # every top-level invoke is its own run
    assert probe.inside == 0
    assert probe.peak >= CONCURRENT // 2  # they really were in flight together
    print(
        f"\n{CONCURRENT} concurrent invocations in {seconds:.1f} s, {probe.peak} in middleware at once, "
        f"RSS +{(probe.rss_at_peak - before) / 1024:.0f} MB then"
    )


# -- memory ---------------------------------------------------------------------------

# The same shape with every level ``$inherit: false``: no authority, so no
# built-in middleware; the cheapest pipeline that still runs two metadata
# middleware as full invocations, and a metadata template rendered per call.
# Its body is async: a sync body would run in a worker thread, which costs
# more than the rest of such a call.
LEAN_STAMP = 'frontmatter = {"metadata": {"$inherit": False}}\n' + STAMP
LEAN_WRAP = 'frontmatter = {"metadata": {"$inherit": False}}\n' + WRAP
LEAN_ECHO = """
frontmatter = {"metadata": {"$inherit": False, "tag": "t{{ args.id }}", "stamp": {}, "wrap": {}}}

async def main(ctx):
    return {"id": ctx.args["id"], "stamp": ctx.locals["stamp"], "tag": ctx.meta["tag"]}
"""


def heap() -> tuple[int, int, int]:
    """(traced bytes, allocated blocks, gc objects) after a full collection."""
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    return traced, sys.getallocatedblocks(), len(gc.get_objects())


async def lean_calls(manager: Manager, start: int, stop: int) -> None:
    for i in range(start, stop):
        result = await manager.invoke("lean", {"id": i})
        if result != {"id": i, "stamp": f"s{i}", "tag": f"t{i}", "wrapped": f"w{i}"}:
            raise AssertionError(f"call {i} returned {result!r}")


async def test_memory_is_flat_over_many_invocations(write, tools, anyio_backend):
    """SEQUENTIAL sequential calls (distinct args each) of a tool with two middleware; the heap stays flat.

    Growth is measured from call WARM_UP (every bounded cache is full by then,
    and the file watcher started: its first start, about a second in, adds
    some 2,400 blocks once) to the last call: in allocated blocks (every live object is at least one)
    and gc-tracked objects on both backends, and in bytes on asyncio, where
    tracemalloc starts at call WARM_UP, so what it still holds at the end is
    exactly what the later calls left behind. (Tracing costs about 6x per
    call, so it runs on one backend; the engine's code is the same on both.)
    """
    write("tools/stamp.py", LEAN_STAMP)
    write("tools/wrap.py", LEAN_WRAP)
    write("tools/lean.py", LEAN_ECHO)
    manager = Manager([tools])
    await lean_calls(manager, 0, WARM_UP)
    _, blocks, objects = heap()
    traced = anyio_backend == "asyncio"
    if traced:
        tracemalloc.start()
    try:
        started = time.perf_counter()
        for start in range(WARM_UP, SEQUENTIAL, BATCH):
            await lean_calls(manager, start, start + BATCH)
        seconds = time.perf_counter() - started
        grown, blocks_after, objects_after = heap()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(
        f"\n{SEQUENTIAL - WARM_UP} calls after warm-up in {seconds:.1f} s ({'traced' if traced else 'untraced'}): "
        f"heap +{grown} B (peak {peak} B), blocks {blocks_after - blocks:+}, gc objects {objects_after - objects:+}"
    )
    assert grown < MEMORY_BOUND
    assert blocks_after - blocks < BLOCK_BOUND
    assert objects_after - objects < BLOCK_BOUND


# The markdown echo with no template in its metadata, so that every call hits
# the caches of the default pipeline (per-call merges are the lean test's part).
PLAIN_MD = ECHO_MD.replace('tag: "t{{ args.id }}"', "tag: t")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_memory_is_flat_over_many_invocations_through_the_default_pipeline(write, tools):
    """The same through the default authority's pipeline, a python and a markdown tool alternating.

    Untraced (tracing every allocation would take minutes here): the heap is
    measured in allocated blocks and gc-tracked objects after every batch.
    """
    write("tools/stamp.py", STAMP)
    write("tools/wrap.py", WRAP)
    write("tools/echo.py", ECHO_PY)
    write("tools/page.md", PLAIN_MD)
    manager = Manager([tools])

    async def alternate(start: int, stop: int) -> None:
        for i in range(start, stop):
            result = await manager.invoke("page" if i % 2 else "echo", {"id": i})
            if i % 2:
                ok = result == f"<w{i}>{i}/t/s{i}</w{i}>"
            else:
                del result["run"], result["frames"]
                ok = result == expected("echo", i)
            if not ok:
                raise AssertionError(f"call {i} returned {result!r}")

    await alternate(0, WARM_UP)
    _, blocks, objects = heap()
    started = time.perf_counter()
    growth = []
    for start in range(WARM_UP, SEQUENTIAL, BATCH):
        await alternate(start, start + BATCH)
        _, now_blocks, now_objects = heap()
        growth.append((now_blocks - blocks, now_objects - objects))
    seconds = time.perf_counter() - started
    print(f"\n{SEQUENTIAL - WARM_UP} calls in {seconds:.1f} s; (blocks, gc objects) growth per batch: {growth}")
    assert all(grown_blocks < BLOCK_BOUND and grown_objects < BLOCK_BOUND for grown_blocks, grown_objects in growth)
