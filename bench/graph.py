"""W6: the steady invoke of a tool whose reachable tool graph has 1,000 tools, against a 10-tool graph.

Both tools are ``top`` (the trivial async tool) in a ring of markdown tools
that reference each other (``toolsets.write_ring``): one strongly connected
component, so every ring key is auto-static data and both chains are the
default pipeline. Only the reachable graph differs, so any difference is the
cost of revalidating it. The invocation counts behind the figures are
tested in ``tests/test_bench.py`` (stats and plan computations per steady
invoke must not grow with the graph).

    .venv/bin/python -m bench.graph [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

import orchestrator.searchpath
from orchestrator import Manager

from .timing import Table, measure

SIZES = (10, 1_000)
WARM_LIMIT = 10.0  # seconds to wait for the file watcher before timing without it


async def warm(manager: Manager) -> bool:
    """Invoke ``top`` until the registry's file watcher covers the tools; True once it does.

    The watcher starts ``freshness.START_AFTER`` after the first lookup and
    then looks at every remembered path once: timing before that measures
    the warm-up (interval stats of the whole graph), not the steady cost.
    Gives up after ``WARM_LIMIT`` seconds (no ``watchfiles``, a network file
    system): the figures are then the interval-stat cost, and say so.
    """
    freshness = manager.registry.freshness
    deadline = time.monotonic() + WARM_LIMIT
    while time.monotonic() < deadline:
        await manager.invoke("top")
        if freshness.watching:
            await manager.invoke("top")  # the first lookup after going live stats everything once
            return True
        await anyio.sleep(0.01)
    return False


def count_stats(manager: Manager, calls: int) -> float:
    """``os.stat`` calls (``registry.signature``) per ``invoke_sync('top')``, after a first invoke."""
    manager.invoke_sync("top")
    real = orchestrator.searchpath.signature
    seen = 0

    def counting(path: str) -> orchestrator.searchpath.Signature:
        nonlocal seen
        seen += 1
        return real(path)

    orchestrator.searchpath.signature = counting  # type: ignore[assignment]
    try:
        for _ in range(calls):
            manager.invoke_sync("top")
    finally:
        orchestrator.searchpath.signature = real  # type: ignore[assignment]
    return seen / calls


async def w6_table(folder: Path, quick: bool) -> Table:
    """W6 with two rings written under ``folder``."""
    from .toolsets import write_ring

    table = Table("W6 steady invoke, reachable tool graph of 1,000 tools vs 10")
    rounds = 5 if quick else 9
    samples = {}
    for size in SIZES:
        manager = Manager([write_ring(folder / f"ring{size}", size)])
        watched = await warm(manager)
        calls = (3_000 if size == SIZES[0] else 300) // (5 if quick else 1)
        samples[size] = await measure(partial(manager.invoke, "top"), calls, rounds)
        stats = await anyio.to_thread.run_sync(count_stats, manager, 20)
        against = {"10-tool graph": samples[size] / samples[SIZES[0]]} if size != SIZES[0] else None
        table.add(
            f"toolcascade: `top` in a {size:,}-tool graph",
            samples[size],
            f"{stats:.0f} stats per invoke" + ("" if watched else "; no file watcher: stat-ing at an interval"),
            ratios=against,
        )
    ratio = samples[SIZES[1]] / samples[SIZES[0]]
    table.target("W6 steady cost with a 1,000-tool graph within 1.2x of a 10-tool graph", f"{ratio:.2f}x", ratio <= 1.2)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as name:
        sys.stdout.write(anyio.run(w6_table, Path(name), quick).markdown())


if __name__ == "__main__":
    main()
