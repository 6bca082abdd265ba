"""Timing: repeated batches, median and min per call, and the markdown tables the suite prints.

Every figure is microseconds per call over ``rounds`` batches of ``n`` calls:
the median says what a call usually costs, the min what it costs when the
shared machine leaves the process alone. Ratios divide medians measured in
the same process run, so they compare across machines.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Sample:
    """Microseconds per call: the median and the min over repeated batches."""

    median: float
    min: float
    rounds: int = 1

    def __truediv__(self, other: Sample) -> float:
        return self.median / other.median if other.median else float("inf")

    def scaled(self, factor: float) -> Sample:
        """This sample with both figures multiplied by ``factor`` (per-entry figures from batch slopes)."""
        return Sample(self.median * factor, self.min * factor, self.rounds)


def slope(low: Sample, high: Sample, steps: int) -> Sample:
    """The marginal cost of one step between two samples ``steps`` apart (medians and mins apart)."""
    return Sample((high.median - low.median) / steps, (high.min - low.min) / steps, min(low.rounds, high.rounds))


async def measure(call: Callable[[], Awaitable[object]], n: int, rounds: int, warmup: int | None = None) -> Sample:
    """Await ``call()`` in ``rounds`` batches of ``n``; µs per call, median and min over the batches.

    A warm-up batch fills every cache first; the garbage collector runs
    between batches, never inside one, so a batch times the calls alone.
    """
    for _ in range(n if warmup is None else warmup):
        await call()
    samples = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            await call()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return Sample(statistics.median(samples), min(samples), rounds)


async def measure_together(
    calls: Sequence[tuple[Callable[[], Awaitable[object]], int]], rounds: int, warmup: int = 3
) -> list[Sample]:
    """Time several calls in the same rounds: each round runs one batch of each, in turn.

    ``calls`` pairs a call with its batch size. A load burst on the shared
    machine then falls on every call's batch of a round alike, not on one
    call's whole measurement, so the ratios and slopes between them hold.
    """
    for call, _ in calls:
        for _ in range(warmup):
            await call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for (call, n), found in zip(calls, samples, strict=True):
            gc.collect()
            start = time.perf_counter()
            for _ in range(n):
                await call()
            found.append((time.perf_counter() - start) / n * 1e6)
    return [Sample(statistics.median(found), min(found), rounds) for found in samples]


def measure_each(call: Callable[[], float], rounds: int) -> Sample:
    """Run ``call`` (which returns seconds it took) ``rounds`` times; µs, median and min."""
    samples = [call() * 1e6 for _ in range(rounds)]
    return Sample(statistics.median(samples), min(samples), rounds)


@dataclass(slots=True)
class Row:
    """One line of a workload table: what was measured, its figures, and its ratios to baselines."""

    case: str
    sample: Sample | None
    ratios: dict[str, float] = field(default_factory=dict)
    note: str = ""
    unit: str = "µs"
    absent: str = "not installed"


@dataclass(frozen=True, slots=True)
class Target:
    """One target: what was measured against what bound, and whether it held (None: not measured).

    ``issue`` names the issue that set it (11: the first targets, 26: the
    rebuilt core's). ``info`` marks a figure reported beside the targets
    without a bound of its own.
    """

    workload: str
    text: str
    measured: str
    passed: bool | None
    issue: int = 11
    info: bool = False

    @property
    def verdict(self) -> str:
        if self.info:
            return "(figure, no bound)"
        return "not measured" if self.passed is None else ("pass" if self.passed else "**FAIL**")


@dataclass(slots=True)
class Table:
    """A workload's rows and targets, printed as markdown."""

    title: str
    rows: list[Row] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self,
        case: str,
        sample: Sample | None,
        note: str = "",
        *,
        ratios: Mapping[str, float] | None = None,
        unit: str = "µs",
        absent: str = "not installed",
    ) -> Row:
        """Append a row; ``ratios`` map a baseline's label to this row's median divided by the baseline's.

        A row without a sample prints ``absent`` (a baseline that is not installed, a run that failed).
        """
        row = Row(case, sample, dict(ratios or {}), note, unit, absent)
        self.rows.append(row)
        return row

    def target(self, text: str, measured: str, passed: bool | None, *, issue: int = 11, info: bool = False) -> None:
        """Record a target of ``issue`` with its verdict (``info``: a figure without a bound)."""
        self.targets.append(Target(self.title.split(" ", 1)[0], text, measured, passed, issue, info))

    def markdown(self) -> str:
        """The table as markdown: one row per case, ratios in one column."""
        lines = [
            f"### {self.title}",
            "",
            "| case | median | min | ratios (median / median) | note |",
            "|---|---:|---:|---|---|",
        ]
        for row in self.rows:
            if row.sample is None:
                lines.append(f"| {row.case} | {row.absent} | | | {row.note} |")
                continue
            ratios = ", ".join(f"{ratio:.3g}x {label}" for label, ratio in row.ratios.items())
            lines.append(
                f"| {row.case} | {fmt(row.sample.median, row.unit)} | {fmt(row.sample.min, row.unit)} | {ratios} "
                f"| {row.note} |"
            )
        lines += ["", *self.notes] if self.notes else []
        return "\n".join(lines) + "\n"


def fmt(value: float, unit: str) -> str:
    """A figure with its unit, at a precision that suits its size."""
    if unit == "µs" and abs(value) >= 1_000_000:
        return f"{value / 1e6:,.2f} s"
    if unit == "µs" and abs(value) >= 10_000:
        return f"{value / 1000:,.1f} ms"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:.3g} {unit}"


def targets_markdown(tables: Sequence[Table], issue: int = 11, extra: Sequence[Target] = ()) -> str:
    """The targets ``issue`` set, from every table and then ``extra``, with pass / fail / not measured."""
    lines = ["| workload | target | measured | verdict |", "|---|---|---|---|"]
    for t in [*(t for table in tables for t in table.targets), *extra]:
        if t.issue == issue:
            lines.append(f"| {t.workload} | {t.text} | {t.measured} | {t.verdict} |")
    return "\n".join(lines) + "\n"
