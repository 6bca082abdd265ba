"""W5: 10,000 concurrent invocations, 2 pass-through middleware each: memory per in-flight call, throughput.

Every invocation parks in its tool body on one gate until all of them have
arrived, so all are in flight at once. Memory is tracemalloc's traced size
at that moment minus before the flood, divided by the count (Python
allocations only: the tasks, coroutine frames, contexts). Throughput is a
separate untraced flood: invocations divided by the time from the first
start to the last return. MAF runs the same flood: a function tool parked on
the gate behind two function middleware.

    .venv/bin/python -m bench.load [--quick]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio

from orchestrator import Manager

from . import baselines
from .timing import Sample, Table
from .toolsets import write_invoke_tools

FULL = 10_000
QUICK = 2_000


class Gate:
    """Where every invocation of a flood parks until all have arrived."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrived = 0
        self.open = anyio.Event()
        self.full = anyio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.count:
            self.full.set()

    async def wait(self) -> None:
        self.arrive()
        await self.open.wait()


async def flood(start: Callable[[Gate], Coroutine[Any, Any, Any]], count: int, traced: bool) -> tuple[float, float]:
    """Run ``count`` invocations at once; (bytes held per in-flight invocation or 0, invocations per second)."""
    gate = Gate(count)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0] if traced else 0
    held = 0.0
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(start, gate)
        await gate.full.wait()
        if traced:
            held = (tracemalloc.get_traced_memory()[0] - before) / count
        gate.open.set()
    return held, count / (time.perf_counter() - began)


async def measure_flood(
    start: Callable[[Gate], Coroutine[Any, Any, Any]], count: int, rounds: int
) -> tuple[Sample, Sample]:
    """(KB per in-flight invocation, invocations per second), each median and min (max for throughput) over rounds."""
    await flood(start, min(count, 200), traced=False)  # warm every cache
    tracemalloc.start()
    try:
        memory = [(await flood(start, count, traced=True))[0] / 1024 for _ in range(rounds)]
    finally:
        tracemalloc.stop()
    speed = [(await flood(start, count, traced=False))[1] for _ in range(rounds)]
    speed.sort()
    memory.sort()
    return Sample(memory[len(memory) // 2], memory[0], rounds), Sample(speed[len(speed) // 2], speed[-1], rounds)


async def w5_table(folder: Path, quick: bool) -> Table:
    """W5 for toolcascade and MAF, with tools written under ``folder``."""
    count = QUICK if quick else FULL
    rounds = 1 if quick else 2
    table = Table(f"W5 {count:,} concurrent invocations, 2 middleware each")
    manager = Manager([write_invoke_tools(folder / "load", 2)])

    async def ours(gate: Gate) -> Any:
        return await manager.invoke("parked", context={"locals": {"gate": gate.open, "arrived": gate.arrive}})

    holder: list[Gate] = []

    async def parked() -> int:
        """Wait for the gate."""
        await holder[0].wait()
        return 1

    call = baselines.maf_call(2, baselines.maf_tool(parked)) if baselines.maf_tool() is not None else None

    async def theirs(gate: Gate) -> Any:
        holder[:] = [gate]
        assert call is not None
        return await call()

    memory, speed = await measure_flood(ours, count, rounds)
    maf_memory, maf_speed = await measure_flood(theirs, count, rounds) if call else (None, None)
    table.add("MAF: KB held per in-flight invocation", maf_memory, "2 function middleware", unit="KB")
    table.add(
        "toolcascade: KB held per in-flight invocation",
        memory,
        "2 pass-through middleware (default authority)",
        unit="KB",
        ratios={"MAF": memory / maf_memory} if maf_memory else None,
    )
    table.add("MAF: invocations per second", maf_speed, "min column: best round", unit="/s")
    table.add(
        "toolcascade: invocations per second",
        speed,
        "min column: best round",
        unit="/s",
        ratios={"MAF": speed / maf_speed} if maf_speed else None,
    )
    table.target("W5 ≤ 10 KB per in-flight invocation", f"{memory.median:.1f} KB", memory.median <= 10)
    if maf_speed:
        table.target(
            "W5 throughput at least MAF's",
            f"{speed.median:,.0f}/s vs {maf_speed.median:,.0f}/s",
            speed / maf_speed >= 1,
        )
    else:
        table.target("W5 throughput at least MAF's", "MAF not installed", None)
    table.notes.append("Memory: tracemalloc (Python allocations only), all invocations parked at once.")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} invocations, one round")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as name:
        sys.stdout.write(anyio.run(w5_table, Path(name), quick).markdown())


if __name__ == "__main__":
    main()
