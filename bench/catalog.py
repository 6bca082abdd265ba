"""W4: ``list`` and ``check`` over a catalog of 10,000 tools, ``import orchestrator``, the first invoke.

``list`` is ``Manager.list_tools()`` (what ``toolcascade list`` prints):
cold on a new Manager, warm as the same Manager's second listing, both in
this process (python modules imported, the OS file cache warm). ``check``
is ``orchestrator.check.check`` on a new Manager. Imports and the first
invoke run in fresh interpreters: ``python -c 'import X'`` minus
``python -c pass``, and the time from ``import orchestrator`` returning to a
first ``invoke_sync`` returning.

    .venv/bin/python -m bench.catalog [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator import Manager
from orchestrator.check import check

from . import baselines
from .timing import Sample, Table, fmt, measure_each
from .toolsets import write_catalog, write_invoke_tools

FULL = (10_000, 100)
QUICK = (1_000, 10)

FIRST_INVOKE = """
import sys, time
start = time.perf_counter()
import orchestrator
imported = time.perf_counter()
orchestrator.Manager([sys.argv[1]]).invoke_sync("noop")
print(imported - start, time.perf_counter() - imported)
"""


def run_python(code: str, *args: str) -> float:
    """Seconds a fresh interpreter takes to run ``code``, start-up included."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True)
    return time.perf_counter() - start


def import_time(module: str, rounds: int) -> Sample:
    """µs ``import module`` adds to a bare interpreter start: interleaved rounds, median and min of the differences."""
    differences = []
    for _ in range(rounds):
        bare = run_python("pass")
        differences.append((run_python(f"import {module}") - bare) * 1e6)
    return Sample(statistics.median(differences), min(differences), rounds)


def first_invoke(tools: Path, rounds: int) -> tuple[Sample, Sample]:
    """(import orchestrator, first invoke after it) in µs, each measured inside a fresh interpreter."""
    imports, invokes = [], []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_INVOKE, str(tools)], check=True, capture_output=True, text=True
        ).stdout.split()
        imports.append(float(out[0]) * 1e6)
        invokes.append(float(out[1]) * 1e6)
    return (
        Sample(statistics.median(imports), min(imports), rounds),
        Sample(statistics.median(invokes), min(invokes), rounds),
    )


def seconds(call: object) -> float:
    """Seconds one call of ``call()`` takes."""
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - start


def w4_table(folder: Path, quick: bool) -> Table:
    """W4 with a catalog (and the W1 tools) written under ``folder``."""
    count, groups = QUICK if quick else FULL
    table = Table(f"W4 list / check over {count:,} tools in {groups} folders; imports; first invoke")
    catalog = write_catalog(folder / "catalog", count, groups)
    listed = Manager([catalog]).list_tools()
    broken = [info for info in listed if info.error is not None]
    if broken:
        raise SystemExit(f"the generated catalog has broken tools: {broken[0].error}")

    # Seconds per call, so one round each (two for warm): the whole W4 table stays near a minute.
    cold = measure_each(lambda: seconds(Manager([catalog]).list_tools), 1)
    warm_manager = Manager([catalog])
    warm_manager.list_tools()
    warm = measure_each(lambda: seconds(warm_manager.list_tools), 1 if quick else 2)
    problems: list[object] = []
    checked = measure_each(lambda: seconds(lambda: problems.extend(check(Manager([catalog])))), 1)
    table.add("`list` cold (new Manager)", cold, f"{len(listed):,} tools listed (the catalog and visible built-ins)")
    table.add("`list` warm (same Manager, second listing)", warm, "", ratios={"cold": warm / cold})
    table.add("`check` (new Manager)", checked, f"{len(problems)} problems found")

    rounds = 3 if quick else 7
    ours = import_time("orchestrator", rounds)
    theirs = import_time("agent_framework", rounds) if baselines.version("agent-framework-core") else None
    table.add("`import agent_framework` (fresh interpreter)", theirs)
    table.add(
        "`import orchestrator` (fresh interpreter)", ours, ratios={"agent_framework": ours / theirs} if theirs else None
    )
    imported, invoked = first_invoke(write_invoke_tools(folder / "first", 0), 3 if quick else 5)
    table.add("`import orchestrator`, timed inside the interpreter", imported)
    table.add("first `invoke_sync('noop')` after import (new Manager)", invoked)

    if theirs:
        table.target(
            "`import orchestrator` ≤ 1.5x `import agent_framework`", f"{ours / theirs:.2f}x", ours / theirs <= 1.5
        )
    else:
        table.target("`import orchestrator` ≤ 1.5x `import agent_framework`", "MAF not installed", None)
    full = count == FULL[0]
    for text, sample, bound in (
        ("`list` over 10,000 tools ≤ 1.5 s cold", cold, 1.5),
        ("`list` over 10,000 tools ≤ 0.3 s warm", warm, 0.3),
        ("`check` over 10,000 tools ≤ 5 s", checked, 5.0),
    ):
        shown = fmt(sample.median, "µs")
        table.target(
            text,
            shown if full else f"{shown} over {count:,} tools (--quick)",
            sample.median <= bound * 1e6 if full else None,
        )
    table.target("first invoke ≤ 50 ms after import", fmt(invoked.median, "µs"), invoked.median <= 50_000)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK[0]:,} tools, one round")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as name:
        sys.stdout.write(w4_table(Path(name), quick).markdown())


if __name__ == "__main__":
    main()
