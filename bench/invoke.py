"""W1-W3: the default pipeline, each extra middleware entry, a templated page; and long chains.

W1 times one trivial tool through the default pipeline beside a direct
await and MAF invoking one function tool. W2 times what each extra
pass-through middleware declared in a tool's metadata adds, beside a
koa-style compose, MAF's function middleware and LangChain's
``awrap_tool_call`` middleware (``create_agent`` driven by ``agent.ainvoke``,
its public API; the older private ``ToolNode._arun_one`` figure beside it):
the slope between 1 and 1+N entries, so fixed costs cancel. Chains of 100 and
1,000 entries are timed against the per-entry figure. W3 times a markdown
page with interpolated metadata and two directives, and the parts it cannot
do without (its invocations, renders and validation) alone, in the same
rounds. Issue 26's targets are recorded beside issue 11's.

    .venv/bin/python -m bench.invoke [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import anyio

from orchestrator import Manager, OrchestratorError

from . import baselines
from .timing import Sample, Table, fmt, measure, measure_together, slope
from .toolsets import write_invoke_tools

# Extra middleware entries the W2 slope spans (1 -> 1 + STEPS), and the long chains. Deeper
# stacks cost more per frame (MAF: 0.47 µs per middleware from 1 to 51 entries, 1.06 µs from 1 to 201),
# so every framework is measured over the same span.
STEPS = 20
LONG = 100
LONGEST = 1_000


def write_stack(tools: Path, count: int) -> str:
    """Write (once) ``stack<count>.py``: a trivial tool declaring ``pass0`` ... in its metadata; its ref."""
    ref = f"stack{count}"
    path = tools / f"{ref}.py"
    if not path.exists():
        entries = ", ".join(f"'pass{i}': {{}}" for i in range(count))
        path.write_text(f"frontmatter = {{'metadata': {{{entries}}}}}\n\n\nasync def main(ctx):\n    return 1\n")
    return ref


def koa_call(count: int) -> baselines.Call:
    """The trivial body behind ``count`` pass-through koa middleware."""
    run = baselines.compose([baselines.passing] * count, baselines.bare)
    return lambda: run(None)


class Invoke:
    """W1-W3 against one tools folder; figures kept for the targets and for other workloads."""

    def __init__(self, tools: Path, quick: bool, smoke: bool = False) -> None:
        self.tools = tools
        self.quick = quick
        self.smoke = smoke
        self.rounds = 3 if smoke else 5 if quick else 9
        self.manager = Manager([tools])
        self.w1: Sample | None = None
        self.per_entry: Sample | None = None
        self.chain_ratio: float | None = None

    async def invocations(self, ref: str, args: Any = None, **options: Any) -> int:
        """How many invocations one call of ``ref`` runs (invoke.start events), counted on a second manager."""
        seen: list[object] = []
        counter = Manager(
            [self.tools], on_event=lambda event: seen.append(event) if event.kind == "invoke.start" else None
        )
        await counter.invoke(ref, args, **options)
        return len(seen)

    def n(self, full: int) -> int:
        """Calls per batch: a fifth of ``full`` (at least 20) when quick, a hundredth (at least 5) for a smoke test."""
        if self.smoke:
            return max(5, full // 100)
        return max(20, full // 5) if self.quick else full

    async def tool(self, ref: str, args: Any = None, calls: int = 2_000) -> Sample:
        """µs per ``invoke(ref, args)`` on this run's manager, in batches of ``calls``."""
        manager = self.manager
        n = self.n(calls)
        return await measure(lambda: manager.invoke(ref, args), n, self.rounds)

    async def w1_table(self) -> Table:
        """W1: the trivial tool, default pipeline, beside a direct await and MAF."""
        table = Table("W1 trivial python tool, default pipeline")
        direct = await measure(baselines.bare, self.n(50_000), self.rounds)
        table.add("direct `await` of an async function", direct, ratios={"direct": direct / direct})
        maf = baselines.maf_call(0)
        maf_sample = await measure(maf, self.n(5_000), self.rounds) if maf else None
        table.add(
            "MAF: FunctionMiddlewarePipeline + FunctionTool.invoke",
            maf_sample,
            "public API, the tool call without the model",
            ratios={"direct": maf_sample / direct} if maf_sample else None,
        )
        loop = baselines.maf_loop_call(0)
        loop_sample = await measure(loop, self.n(5_000), self.rounds) if loop else None
        table.add(
            "MAF: function-calling loop step (_auto_invoke_function)",
            loop_sample,
            "what MAF's agent loop runs per tool call",
            ratios={"direct": loop_sample / direct} if loop_sample else None,
        )
        self.w1 = tc = await self.tool("noop")
        table.add(
            "toolcascade: `async def main(ctx)`, default pipeline",
            tc,
            f"invocations: {await self.invocations('noop')} (the tool + its built-ins with work)",
            ratios=self.ratios(tc, direct, maf_sample),
        )
        sync = await self.tool("noop-sync")
        table.add(
            "toolcascade: sync `def main(ctx)`, default pipeline",
            sync,
            "body runs in a worker thread, by design",
            ratios=self.ratios(sync, direct, maf_sample),
        )
        frozen = Manager([self.tools], watch_builtins=False)
        installed = await measure(lambda: frozen.invoke("noop"), self.n(2_000), self.rounds)
        table.add(
            "toolcascade: async, built-ins not watched",
            installed,
            "as an installed package runs",
            ratios=self.ratios(installed, direct, maf_sample),
        )
        if maf_sample:
            table.target("W1 ≤ 0.3x MAF invoking one function tool", f"{tc / maf_sample:.2f}x", tc / maf_sample <= 0.3)
        else:
            table.target("W1 ≤ 0.3x MAF invoking one function tool", "MAF not installed", None)
        return table

    @staticmethod
    def ratios(sample: Sample, direct: Sample, maf: Sample | None) -> dict[str, float]:
        found = {"direct": sample / direct}
        if maf is not None:
            found["MAF"] = sample / maf
        return found

    async def w2_table(self) -> Table:
        """W2: per extra middleware entry, the slope between 1 and 1 + STEPS entries."""
        table = Table("W2 each extra pass-through middleware")
        rounds, n = self.rounds, self.n(3_000)

        async def per_entry(make: Any, calls: int) -> Sample | None:
            low, high = make(1), make(1 + STEPS)
            if low is None or high is None:
                return None
            # Both ends in the same rounds, so a load burst on the shared machine falls on each alike.
            low_sample, high_sample = await measure_together([(low, calls), (high, calls)], rounds, warmup=calls)
            return slope(low_sample, high_sample, STEPS)

        manager = self.manager
        # Middleware declared in the tool's metadata: configured once, as MAF's pipeline and create_agent's are.
        # toolcascade's and MAF's ends are timed in the same rounds: their ratio is issue 26's W2 target.
        low_ref, high_ref = self.stack(1), self.stack(1 + STEPS)
        pairs: list[tuple[baselines.Call, int]] = [
            (lambda: manager.invoke(low_ref), self.n(500)),
            (lambda: manager.invoke(high_ref), self.n(100)),
        ]
        maf_low, maf_high = baselines.maf_call(1), baselines.maf_call(1 + STEPS)
        if maf_low is not None and maf_high is not None:
            pairs += [(maf_low, n), (maf_high, n)]
        samples = await measure_together(pairs, rounds, warmup=self.n(100))
        low, high = samples[:2]
        self.per_entry = tc = slope(low, high, STEPS)
        maf = slope(samples[2], samples[3], STEPS) if len(samples) == 4 else None
        koa = await per_entry(koa_call, n * 3)
        table.add("koa-style compose, per middleware", koa)
        table.add(
            "MAF function middleware, per middleware",
            maf,
            "FunctionMiddlewarePipeline.execute; timed in the same rounds as toolcascade's",
        )
        loop = await per_entry(baselines.maf_loop_call, n)
        table.add("MAF, per middleware, in the loop step", loop, "_auto_invoke_function")
        agent = await self.langchain_agent(table)
        toolnode = await per_entry(baselines.langchain_toolnode_call, self.n(500))
        table.add(
            "LangChain, per middleware, tool step alone (older figure)",
            toolnode,
            f"private `ToolNode._arun_one` of the same agent, no model; slope 1 -> {1 + STEPS}",
        )
        # The same entries passed with every call (``middleware=``, ``$middleware``): checked and sorted per call.
        entries: dict[int, dict[str, Any]] = {k: {f"pass{i}": {} for i in range(k)} for k in (1, 1 + STEPS)}
        passed_low, passed_high = await measure_together(
            [
                (lambda: manager.invoke("noop", middleware=entries[1]), self.n(500)),
                (lambda: manager.invoke("noop", middleware=entries[1 + STEPS]), self.n(100)),
            ],
            rounds,
            warmup=self.n(100),
        )
        passed = slope(passed_low, passed_high, STEPS)
        ratios: dict[str, float] = {}
        if koa:
            ratios["koa"] = tc / koa
        if maf:
            ratios["MAF"] = tc / maf
        if agent:
            ratios["LangChain agent"] = tc / agent
        if toolnode:
            ratios["LangChain tool step"] = tc / toolnode
        each = await self.invocations(low_ref) - await self.invocations("noop")
        table.add(
            "toolcascade, per pass-through middleware",
            tc,
            f"declared in the tool's metadata; {each} invocation(s) each: itself + its built-ins with work; "
            f"slope 1 -> {1 + STEPS}",
            ratios=ratios,
        )
        table.add(
            "toolcascade, per middleware passed with each call",
            passed,
            f"`middleware=` on every invoke: checked and sorted per call; slope 1 -> {1 + STEPS}",
            ratios={"MAF": passed / maf} if maf else None,
        )
        table.add("toolcascade, tool with 1 declared entry", low)
        table.add(f"toolcascade, tool with {1 + STEPS} declared entries", high)
        self.w2_targets(table, tc, maf, agent, toolnode)
        table.notes.append(
            "Per-middleware figures are slopes: (time with 1 + N entries - time with 1 entry) / N, "
            "medians from medians and mins from mins, so fixed per-call costs cancel."
        )
        await self.long_chains(table)
        return table

    async def langchain_agent(self, table: Table) -> Sample | None:
        """LangChain's per-middleware cost through its public API: ``agent.ainvoke`` at 0, 1 and 1 + STEPS.

        The three agents are timed in the same rounds, so a load burst falls
        on each alike; the slope between 1 and 1 + STEPS is the figure, the
        agent loop's fixed cost (two model steps, one tool step) cancels.
        """
        counts = (0, 1, 1 + STEPS)
        calls = [baselines.langchain_agent_call(count) for count in counts]
        if any(call is None for call in calls):
            table.add("LangChain `awrap_tool_call`, per middleware (`agent.ainvoke`)", None)
            return None
        n = self.n(200)
        samples = await measure_together([(call, n) for call in calls if call is not None], self.rounds)
        per = slope(samples[1], samples[2], STEPS)
        table.add(
            "LangChain `awrap_tool_call`, per middleware (`agent.ainvoke`)",
            per,
            f"public API: `create_agent` + fake chat model, model -> tool -> model; slope 1 -> {1 + STEPS}",
        )
        for count, sample in zip(counts, samples, strict=True):
            table.add(f"  LangChain `agent.ainvoke`, {count} middleware, whole call", sample)
        table.notes.append(
            "LangChain's per-middleware cost: `create_agent` wraps each middleware's `awrap_tool_call` in "
            "langsmith's `traceable`, whose async wrapper hands the run's setup and end to a worker thread "
            f"(two thread hops per middleware per call, with tracing off; langsmith {baselines.version('langsmith')}). "
            "The figure therefore moves with the machine's load more than the others."
        )
        return per

    def w2_targets(
        self, table: Table, tc: Sample, maf: Sample | None, agent: Sample | None, toolnode: Sample | None
    ) -> None:
        """W2's targets: issue 11's (5x MAF, 30x cheaper than LangChain) and issue 26's (3x MAF)."""
        versus_maf = f"{tc / maf:.1f}x ({fmt(tc.median, 'µs')} vs {fmt(maf.median, 'µs')})" if maf else ""
        for bound, issue in ((5, 11), (3, 26)):
            text = f"W2 ≤ {bound}x MAF's per-middleware cost"
            if maf and maf.median > 0:
                table.target(text, versus_maf, tc / maf <= bound, issue=issue)
            else:
                missing = "MAF's slope is below the noise: rerun" if maf else "MAF not installed"
                table.target(text, missing, None, issue=issue)
        if agent:
            both = (
                f"toolcascade {fmt(tc.median, 'µs')} vs LangChain {fmt(agent.median, 'µs')}: "
                f"{tc / agent:.3g}x, i.e. LangChain {agent / tc:.3g}x toolcascade"
            )
            table.target(
                "W2 ≥ 30x cheaper than LangChain's per-middleware cost (`agent.ainvoke`)", both, agent / tc >= 30
            )
            table.target(
                "W2 per middleware vs LangChain's (`agent.ainvoke`, public API)", both, None, issue=26, info=True
            )
        else:
            table.target("W2 ≥ 30x cheaper than LangChain's per-middleware cost", "LangChain not installed", None)
        if toolnode:
            table.target(
                "W2 per middleware vs LangChain's tool step alone (private `ToolNode._arun_one`, older figure)",
                f"toolcascade {tc / toolnode:.3g}x LangChain, i.e. LangChain {toolnode / tc:.3g}x toolcascade",
                None,
                issue=26,
                info=True,
            )

    def stack(self, count: int) -> str:
        """The ref of a trivial tool whose metadata declares ``count`` pass-through middleware."""
        return write_stack(self.tools, count)

    async def long_chains(self, table: Table) -> None:
        """A chain of LONG entries against LONG x the per-entry figure; a chain of LONGEST runs at all."""
        assert self.per_entry is not None and self.w1 is not None
        manager = self.manager
        long = self.stack(LONG)
        # Batches as long as the per-entry slope's, so both see the caches and the collector alike (ten-call
        # batches right after gc.collect() timed a cold start, not the chain).
        sample = await measure(lambda: manager.invoke(long), self.n(300), self.rounds)
        added = sample.median - self.w1.median
        expected = LONG * self.per_entry.median
        shown = f"added {fmt(added, 'µs')} = {added / expected:.2f}x ({LONG} x per-entry)"
        table.add(f"toolcascade, tool with {LONG} declared entries", sample, shown, ratios={"W1": sample / self.w1})
        table.target(
            f"a chain of {LONG} middleware costs {LONG}x the per-middleware figure, no more (10% noise allowed)",
            shown,
            added / expected <= 1.1,
        )
        longest = self.stack(LONGEST)
        start = time.perf_counter()
        try:
            await manager.invoke(longest)
        except OrchestratorError as exc:
            took = time.perf_counter() - start
            message = str(exc).splitlines()[0]
            table.add(
                f"toolcascade, tool with {LONGEST} declared entries",
                None,
                f"after {took:.2f} s: {message}",
                absent="fails",
            )
            table.target(
                f"a chain of {LONGEST} default-authority middleware works", f"{type(exc).__name__}: {message}", False
            )
            table.target(
                f"a chain of {LONGEST:,} middleware ≤ 1.2x {LONGEST:,} x the per-entry figure at {LONG}",
                f"fails: {message}",
                False,
                issue=26,
            )
            return
        took = (time.perf_counter() - start) * 1e6
        table.add(
            f"toolcascade, tool with {LONGEST} declared entries, first call", Sample(took, took), "loads its tools"
        )
        table.target(f"a chain of {LONGEST} default-authority middleware works", f"works, {fmt(took, 'µs')}", True)
        # Issue 26: the 1,000-entry chain against 1,000 x the per-entry figure at 100, all three timed in the
        # same rounds (W1's tool, the 100- and the 1,000-entry chain), so the fixed cost is W1's of this run.
        noop, hundred, thousand = await measure_together(
            [
                (lambda: manager.invoke("noop"), self.n(1_000)),
                (lambda: manager.invoke(long), self.n(200)),
                (lambda: manager.invoke(longest), self.n(30)),
            ],
            self.rounds,
        )
        at_100 = Sample((hundred.median - noop.median) / LONG, (hundred.min - noop.min) / LONG)
        at_1000 = Sample((thousand.median - noop.median) / LONGEST, (thousand.min - noop.min) / LONGEST)
        self.chain_ratio = at_1000 / at_100
        shown = (
            f"{fmt(at_1000.median, 'µs')} per entry at {LONGEST:,} vs {fmt(at_100.median, 'µs')} at {LONG}: "
            f"{self.chain_ratio:.2f}x"
        )
        table.add(f"toolcascade, tool with {LONGEST} declared entries, again", thousand, shown)
        table.add(f"  per entry at {LONG} (same rounds: ({LONG} entries - W1) / {LONG})", at_100)
        table.add(f"  per entry at {LONGEST:,} (same rounds: ({LONGEST:,} entries - W1) / {LONGEST:,})", at_1000)
        table.target(
            f"a chain of {LONGEST:,} middleware ≤ 1.2x {LONGEST:,} x the per-entry figure at {LONG}",
            shown,
            self.chain_ratio <= 1.2,
            issue=26,
        )

    async def w3_table(self) -> Table:
        """W3: a markdown page with interpolated metadata and two directives, against W1 and its parts alone."""
        assert self.w1 is not None
        table = Table("W3 markdown template with interpolated metadata and two directives")
        page, w1, floor = await self.page_and_parts(table)
        table.add("toolcascade: W1 (earlier in this run)", self.w1)
        table.target("W3 ≤ 3x W1", f"{page / w1:.2f}x", page / w1 <= 3)
        table.target(
            "W3 ≤ 2x the sum of its parts, each timed alone in the same rounds",
            f"{page / floor:.2f}x ({fmt(page.median, 'µs')} vs {fmt(floor.median, 'µs')})",
            page / floor <= 2,
            issue=26,
        )
        table.notes.append(
            f"The page's own work, each part timed alone, adds up to {floor / w1:.1f}x W1: its invocations "
            "(the page, the built-ins with work, one per directive tool) and what jinja2 and jsonschema cost per "
            f"call. The page costs {page / floor:.2f}x that sum (issue 26: at most 2x); the rest is the pipeline's "
            "own work per entry. Every row of this table is timed in the same rounds, one batch of each in turn."
        )
        return table

    async def page_and_parts(self, table: Table) -> tuple[Sample, Sample, Sample]:
        """The page, and its parts timed alone in the same rounds; rows added to ``table``; (page, W1, parts).

        The parts: W1 (finding the tool, its chain run for one invocation),
        one per-entry cost (the slope from 1 to 1 + STEPS declared entries) per
        further invocation, the page's two templates rendered and its args
        validated, each through the function the engine itself calls
        (``interpolate.render``, ``schema.check``).
        """
        from orchestrator.errors import ArgsValidationError
        from orchestrator.interpolate import render
        from orchestrator.schema import check

        manager = self.manager
        args = {"name": "Ada"}
        meta = {"greeting": "Hello, Ada", "city": "Paris"}
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        low_ref, high_ref = self.stack(1), self.stack(1 + STEPS)

        async def renders() -> None:
            render("Hello, {{ args.name }}", {"args": args})
            render("{{ meta.greeting }} from {{ meta.city }}!\nToday: [today]\n\n[footer]\n", {"meta": meta})

        async def validation() -> None:
            check(schema, args, ArgsValidationError, "page")

        page, w1, rendered, checked, low, high = await measure_together(
            [
                (lambda: manager.invoke("page", args), self.n(300)),
                (lambda: manager.invoke("noop"), self.n(2_000)),
                (renders, self.n(3_000)),
                (validation, self.n(3_000)),
                (lambda: manager.invoke(low_ref), self.n(500)),
                (lambda: manager.invoke(high_ref), self.n(100)),
            ],
            self.rounds,
        )
        invocations = await self.invocations("page", args)
        table.add(
            "toolcascade: page.md (params, templated metadata, 2 directives)",
            page,
            f"{invocations} invocations",
            ratios={"W1": page / w1},
        )
        further = invocations - 1
        entries = slope(low, high, STEPS).scaled(further)
        table.add("  part: W1, the trivial tool (same rounds)", w1)
        table.add("  part: its 2 templates rendered (jinja2 sandbox)", rendered, ratios={"W1": rendered / w1})
        table.add("  part: its args validated (jsonschema)", checked, ratios={"W1": checked / w1})
        table.add(
            f"  part: {further} more invocations at the per-entry cost",
            entries,
            f"slope 1 -> {1 + STEPS} declared entries, same rounds",
            ratios={"W1": entries / w1},
        )
        floor = Sample(
            w1.median + entries.median + rendered.median + checked.median,
            w1.min + entries.min + rendered.min + checked.min,
            self.rounds,
        )
        table.add("  the parts together (W1 + the three above)", floor, ratios={"W1": floor / w1, "page": floor / page})
        return page, w1, floor


async def tables(
    folder: Path, quick: bool, only: Collection[str] = ("W1", "W2", "W3"), smoke: bool = False
) -> tuple[list[Table], Invoke]:
    """Run the selected W1-W3 with tools written under ``folder``; return the tables and the figures.

    W2 and W3 need W1's figure, so W1 runs whenever either does. ``smoke`` runs every row with a
    hundredth of the calls: the tables' shape, not figures to read (the test suite's setting).
    """
    bench = Invoke(write_invoke_tools(folder / "invoke", LONGEST), quick, smoke)
    page = await bench.manager.invoke("page", {"name": "Ada"})
    if page != "Hello, Ada from Paris!\nToday: [today]\n\n[footer]":
        raise SystemExit(f"W3's page renders {page!r}: the workload no longer measures what it says")
    found = [await bench.w1_table()]
    if "W2" in only:
        found.append(await bench.w2_table())
    if "W3" in only:
        found.append(await bench.w3_table())
    return found, bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as name:
        found, _ = anyio.run(tables, Path(name), quick)
    for table in found:
        sys.stdout.write(table.markdown() + "\n")


if __name__ == "__main__":
    main()
