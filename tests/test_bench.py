"""W6 of the benchmark suite as counts, never seconds: a steady invoke costs the same whatever the graph.

``top`` sits in a ring of tools that name each other (the same shape as
``bench/toolsets.write_ring``): one strongly connected component, so every
ring key is auto-static data (R-CAS-8) and ``top``'s chain is the default
pipeline whatever the ring's size. A steady invoke (caches warm, no file
changed) must then do the same work for a 10-tool and a 300-tool graph:
no plan or SCC computed, and no more files stat-ed (R-FIND-3 caches).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import orchestrator.planner
import orchestrator.registry
import orchestrator.searchpath
from orchestrator import Manager

Write = Callable[[str, str], Path]  # the conftest fixture: write(relative path, text) -> the file
pytestmark = pytest.mark.anyio

SMALL, BIG = 10, 300
NOOP = "async def main(ctx):\n    return 1\n"


def write_ring(write: Write, folder: str, size: int) -> Path:
    """``top`` and ``size - 1`` markdown tools, each naming the next, the last naming ``top``."""
    top = write(f"{folder}/top.py", 'frontmatter = {"metadata": {"g0": {}}}\n\n\n' + NOOP)
    for i in range(size - 1):
        after = f"g{i + 1}" if i < size - 2 else "top"
        write(f"{folder}/g{i}.md", f"---\nmetadata:\n  {after}: {{}}\n---\nMember {i} of the ring.\n")
    return top.parent


class Counts:
    """What the engine did since the last ``reset``: stats, plans and SCCs computed."""

    def __init__(self) -> None:
        self.stats = 0
        self.plans = 0
        self.sccs = 0

    def reset(self) -> None:
        self.stats = self.plans = self.sccs = 0

    def counting(self, field: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(self, field, getattr(self, field) + 1)
            return real(*args, **kwargs)

        return counted


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    """Count ``searchpath.signature`` (every os.stat of a watched file or folder), plans and SCCs."""
    found = Counts()
    monkeypatch.setattr(
        orchestrator.searchpath, "signature", found.counting("stats", orchestrator.searchpath.signature)
    )
    monkeypatch.setattr(
        orchestrator.planner.Planner, "_make_plan", found.counting("plans", orchestrator.planner.Planner._make_plan)
    )
    monkeypatch.setattr(
        orchestrator.planner, "reachable_components", found.counting("sccs", orchestrator.planner.reachable_components)
    )
    yield found


async def steady(manager: Manager, counts: Counts) -> Counts:
    """The counts of one invoke of ``top`` after two that filled every cache."""
    assert await manager.invoke("top") == 1
    assert await manager.invoke("top") == 1
    counts.reset()
    assert await manager.invoke("top") == 1
    taken = Counts()
    taken.stats, taken.plans, taken.sccs = counts.stats, counts.plans, counts.sccs
    return taken


def test_a_ring_of_any_size_leaves_top_with_the_default_pipeline(write: Write) -> None:
    # The comparison below is fair only if both tools run the same chain (R-CAS-8 demotes every ring key).
    chains = []
    for size in (SMALL, BIG):
        manager = Manager([write_ring(write, f"ring{size}", size)])
        explained = manager.explain("top")
        assert next(key for key in explained.keys if key.key == "g0").verdict == "data"
        chains.append([entry.name for entry in explained.chain])
    assert chains[0] == chains[1]
    assert "g0" not in chains[0]


async def test_a_steady_invoke_computes_no_plan_or_scc_whatever_the_graph(write: Write, counts: Counts) -> None:
    for size in (SMALL, BIG):
        taken = await steady(Manager([write_ring(write, f"ring{size}", size)]), counts)
        assert (taken.plans, taken.sccs) == (0, 0), f"a {size}-tool graph"


def calls_of(manager: Manager) -> int:
    """Calls made in the engine's code by one steady ``invoke_sync('top')`` (a count, the same on any machine).

    Only calls made from ``orchestrator``'s own files count: the event loop
    and the worker thread around them vary with what ran before in the process.
    """
    import sys

    package = str(Path(orchestrator.registry.__file__).parent)
    calls = 0

    def profile(frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(package):
            calls += 1

    sys.setprofile(profile)
    try:
        manager.invoke_sync("top")
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_once_the_watcher_is_live_a_steady_invoke_does_the_same_work_whatever_the_graph(
    write: Write, counts: Counts
) -> None:
    # What bench.graph times: warmed until file notifications cover the ring, so no interval stat is left.
    import anyio.to_thread

    from bench.graph import warm

    done = {}
    for size in (SMALL, BIG):
        manager = Manager([write_ring(write, f"ring{size}", size)])
        assert await warm(manager), "watchfiles (a dependency) should cover a local folder"
        # No interval tick inside the counted calls: a tick costs the same whatever the graph, but not nothing.
        manager.registry.freshness.interval = 3600.0
        counts.reset()
        calls = [await anyio.to_thread.run_sync(calls_of, manager) for _ in range(3)]
        assert (counts.stats, counts.plans, counts.sccs) == (0, 0, 0), f"a {size}-tool graph"
        done[size] = min(calls)
        manager.registry.freshness.close()
    assert done[SMALL] == done[BIG]


@pytest.mark.slow
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the bench runs on asyncio, as MAF and LangChain do
async def test_w3_times_the_page_beside_the_parts_it_cannot_do_without(tmp_path: Path) -> None:
    """`make bench`'s W3 runs, and shows the page's invocations, renders and validation timed alone."""
    from bench.invoke import tables

    found, _ = await tables(tmp_path, quick=True, only=("W1", "W3"))
    (w3,) = [table for table in found if table.title.startswith("W3")]
    rows = {row.case: row for row in w3.rows}
    page = rows["toolcascade: page.md (params, templated metadata, 2 directives)"]
    floor = rows["  the parts together (W1 + the three above)"]
    assert page.note == "5 invocations" and "  part: 4 more invocations at the per-entry cost" in rows
    assert page.sample is not None and floor.sample is not None and floor.ratios["W1"] > 1
    assert [target.text for target in w3.targets] == ["W3 ≤ 3x W1"]
