"""W6 of the benchmark suite as counts, never seconds: a steady invoke costs the same whatever the graph.

``top`` sits in a ring of tools that name each other (the same shape as
``bench/toolsets.write_ring``): one strongly connected component, so every
ring key is auto-static data (R-CAS-8) and ``top``'s chain is the default
pipeline whatever the ring's size. A steady invoke (caches warm, no file
changed) must then do the same work for a 10-tool and a 300-tool graph:
no plan or SCC computed, and no more files stat-ed (R-FIND-3 caches).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from heap_helpers import own_heap

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

    with own_heap():  # the bench collects before each batch: let it walk what the bench made, not the worker's heap
        found, _ = await tables(tmp_path, quick=True, only=("W1", "W3"), smoke=True)
    (w3,) = [table for table in found if table.title.startswith("W3")]
    rows = {row.case: row for row in w3.rows}
    page = rows["toolcascade: page.md (params, templated metadata, 2 directives)"]
    floor = rows["  the parts together (W1 + the three above)"]
    assert page.note == "5 invocations" and "  part: 4 more invocations at the per-entry cost" in rows
    assert page.sample is not None and floor.sample is not None and floor.ratios["W1"] > 1
    assert [(target.issue, target.text) for target in w3.targets] == [
        (11, "W3 ≤ 3x W1"),
        (26, "W3 ≤ 2x the sum of its parts, each timed alone in the same rounds"),
    ]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # LangChain's agent runs on asyncio
async def test_langchain_baseline_runs_the_agent_loop_through_its_public_api() -> None:
    """`agent.ainvoke` runs model -> tool (through the middleware) -> model, every call, whatever ran before.

    Without the bench extra (as in CI) the baseline is None, which the bench prints as "not installed".
    """
    import importlib.util

    from bench.baselines import langchain_agent_call, langchain_toolnode_call

    if importlib.util.find_spec("langchain") is None:
        assert langchain_agent_call(0) is None and langchain_toolnode_call(1) is None
        return
    for count in (0, 3):
        call = langchain_agent_call(count)
        assert call is not None
        first, again = await call(), await call()  # the first call checks the messages itself
        assert [type(m).__name__ for m in again["messages"]] == [type(m).__name__ for m in first["messages"]]
        assert again["messages"][-1].content == "done"
    assert langchain_toolnode_call(1) is not None  # the older, private figure is still measurable


async def test_measure_together_times_each_call_in_turn_and_keeps_their_order() -> None:
    from bench.timing import measure_together

    ran: list[str] = []

    async def a() -> None:
        ran.append("a")

    async def b() -> None:
        ran.append("b")

    gc.freeze()  # measure_together collects before each batch: let it walk what this test made, not the worker's heap
    try:
        samples = await measure_together([(a, 3), (b, 2)], rounds=2, warmup=1)
    finally:
        gc.unfreeze()
    assert len(samples) == 2 and all(s.rounds == 2 and s.median >= s.min > 0 for s in samples)
    assert ran == ["a", "b", *(["a"] * 3 + ["b"] * 2) * 2]


def test_targets_are_printed_per_issue_with_their_verdicts() -> None:
    from bench.timing import Table, Target, targets_markdown

    table = Table("W2 each extra pass-through middleware")
    table.target("W2 ≤ 5x MAF's per-middleware cost", "4x", True)
    table.target("W2 ≤ 3x MAF's per-middleware cost", "4x", False, issue=26)
    table.target("W2 vs LangChain", "0.01x", None, issue=26, info=True)
    extra = Target("callgrind", "W1 ≤ 1.05x", "1.0x", None, 26)
    eleven, twenty_six = targets_markdown([table], 11), targets_markdown([table], 26, [extra])
    assert "5x MAF" in eleven and "3x MAF" not in eleven and "callgrind" not in eleven
    assert [line.rsplit("|", 2)[1].strip() for line in twenty_six.splitlines()[2:]] == [
        "**FAIL**",
        "(figure, no bound)",
        "not measured",
    ]


def test_instruction_targets_compare_with_the_reference_and_the_page_with_its_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.instructions as instructions
    from bench.instructions import Count, per_call, targets

    assert per_call([7, 100, 500, 7, 10, 90], [10, 2]) == [10.0, 10.0]  # set-up, N, 5N: (5N - N) / 4N
    monkeypatch.setattr(instructions, "REFERENCE", {"w1": 100.0, "w3": 1000.0})
    counts = [
        Count("w1", "W1", 104.0),
        Count("w2", "W2", 20.0),
        Count("maf-w2", "MAF per middleware", 5.0),
        Count("w3", "W3", 1100.0),
        Count("w3-parts", "parts", 500.0),
        Count("per-entry-100", "at 100", 10.0),
        Count("per-entry-1000", "at 1000", 13.0),
    ]
    verdicts = {t.text.split(":")[0] if ":" in t.text else t.text: t.passed for t in targets(counts)}
    assert verdicts["W1"] is True and verdicts["W3"] is False  # +4% passes, +10% fails
    assert verdicts["W3 ≤ 2x the sum of its parts, in instructions"] is False  # 2.2x
    assert verdicts["W2 ≤ 3x MAF's per-middleware cost, in instructions"] is False  # 4x
    assert verdicts["W2"] is None  # no reference count: not measured, never a pass
    assert [t.passed for t in targets(counts) if "chain" in t.text] == [False]  # 1.3x > 1.2x


@pytest.mark.slow
def test_instruction_phases_are_counted_between_markers(tmp_path: Path) -> None:
    """One valgrind run, one total per phase between two os.getppid() calls (callgrind --dump-before)."""
    import shutil

    from bench.instructions import phases

    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    marker, small_loop, big_loop = "os.getppid()\n", "x = [i for i in range(1000)]\n", "x = [i for i in range(5000)]\n"
    script = "import os\n" + marker + small_loop + marker + big_loop + marker
    small, big = phases(script, [])
    assert 0 < small < big
