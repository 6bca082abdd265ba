"""The benchmark suite's entry (``make bench``): W1-W7 side by side, then every target's verdict.

W1-W6 run in this process; W7 (units on Ray beside in process) in its own, as Ray starts fresh.

    .venv/bin/python -m bench.run [--quick] [--only W1,W4] [--targets] [--instructions] [--write FILE]

Prints markdown: the machine, the date, package versions and the commit,
one table per workload, then the targets of issue 11 and of issue 26
("Speed must not regress") with pass / fail. ``--targets`` runs only the
workloads issue 26's targets need (W1-W3; ``--quick --targets`` takes about
two minutes), for a check after each step of the core's rebuild.
``--instructions`` adds the callgrind counts (``bench.instructions``, the
1,000-entry chain left out when quick) and their targets: a few minutes
more, and the figures that hold on a shared machine. ``--write`` also
writes the report to a file.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread

import orchestrator

from . import baselines, catalog, graph, instructions, invoke, load
from .timing import Table, Target, targets_markdown

PACKAGES = (
    "toolcascade",
    "anyio",
    "agent-framework-core",
    "langchain",
    "langchain-core",
    "langgraph",
    "langgraph-prebuilt",
    "langsmith",
)
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")
ISSUE_26 = ("W1", "W2", "W3")  # the workloads issue 26's targets are measured on


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo, or what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def commit() -> str:
    """The commit of the measured engine (where ``orchestrator`` was imported from), marked when modified."""
    source = Path(orchestrator.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "orchestrator", "tools", "authorities"],
            cwd=source,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        head, dirty = "", ""
    if not head:
        return f"unknown: {source} is not a git checkout (pass --commit)"
    return f"{head}{' with engine files modified in the work tree' if dirty else ''}"


def header(quick: bool, measured: str) -> str:
    """Machine, date, versions, commit and load: what a reader needs to judge the figures."""
    load_avg = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = ", ".join(f"{name} {baselines.version(name) or 'not installed'}" for name in PACKAGES)
    return "\n".join(
        [
            "## Run",
            "",
            f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- commit: {measured}",
            f"- engine imported from: {Path(orchestrator.__file__).resolve().parent}",
            f"- machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu_model()}, "
            f"{platform.system()} {platform.release()}",
            f"- python: {platform.python_implementation()} {platform.python_version()}, anyio backend asyncio",
            f"- packages: {versions}",
            f"- load average at start (1 / 5 / 15 min): {load_avg} (a shared machine: other jobs run beside this one)",
            f"- mode: {'--quick (fewer tools, calls and rounds)' if quick else 'full'}",
            "",
        ]
    )


async def run(only: set[str], quick: bool, folder: Path) -> list[Table]:
    """Every selected workload's table, in order, in this one process."""
    tables: list[Table] = []
    if only & {"W1", "W2", "W3"}:
        found, _ = await invoke.tables(folder, quick, only)
        tables += found
    if "W4" in only:
        tables.append(await anyio.to_thread.run_sync(catalog.w4_table, folder, quick))
    if "W5" in only:
        tables.append(await load.w5_table(folder, quick))
    if "W6" in only:
        tables.append(await graph.w6_table(folder, quick))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tools, calls and rounds (about a minute)")
    parser.add_argument("--only", help=f"workloads to run, e.g. W1,W2 (default: all, {','.join(WORKLOADS)})")
    parser.add_argument(
        "--targets", action="store_true", help=f"run only what issue 26's targets need ({','.join(ISSUE_26)})"
    )
    parser.add_argument("--instructions", action="store_true", help="also count instructions (callgrind)")
    parser.add_argument("--write", type=Path, help="also write the report to this file")
    parser.add_argument("--commit", help="the commit measured, when the engine is not a git checkout")
    options = parser.parse_args()
    chosen = options.only or ",".join(ISSUE_26 if options.targets else WORKLOADS)
    only = {name.strip().upper() for name in chosen.split(",")}
    if unknown := only - set(WORKLOADS):
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}")
    top = header(options.quick, options.commit or commit())
    sys.stdout.write(top + "\n")
    sys.stdout.flush()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="toolcascade-bench-") as name:
        # The index and kept frontmatters of this run (and its subprocesses) stay out of the user's cache.
        os.environ.setdefault("TOOLCASCADE_CACHE", str(Path(name) / "cache"))
        tables = anyio.run(run, only, options.quick, Path(name))
    parts = [top]
    for table in tables:
        sys.stdout.write(table.markdown() + "\n")
        parts.append(table.markdown())
    if "W7" in only:  # Ray starts in its own process: units on 2 actors beside in process (bench/ray_units.py)
        w7 = subprocess.run(
            [sys.executable, "-m", "bench.ray_units", *(["--quick"] if options.quick else [])],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        section = w7.stdout if w7.returncode == 0 else f"## W7\n\nfailed: {w7.stderr.strip()[-2000:]}\n"
        sys.stdout.write(section)
        parts.append(section)
    counted: list[Target] = []
    if options.instructions:  # after the timings, so valgrind never shares the machine with them
        engine = Path(orchestrator.__file__).resolve().parent.parent  # the engine the timings measured
        counts = instructions.count(longest=not options.quick, engine=engine)
        counted = instructions.targets(counts)
        section = instructions.markdown(counts)
        sys.stdout.write(section + "\n")
        parts.append(section)
    load_avg = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    summary = (
        f"## Targets (issue 11)\n\n{targets_markdown(tables, 11)}\n"
        f"## Targets (issue 26: speed must not regress)\n\n{targets_markdown(tables, 26, counted)}\n"
        f"{'' if options.instructions else 'Instruction counts: add --instructions (callgrind, a few minutes).'}\n"
        f"Suite took {time.perf_counter() - started:.0f} s; load average at the end: {load_avg}.\n"
    )
    sys.stdout.write(summary)
    parts.append(summary)
    if options.write:
        options.write.write_text("\n".join(parts))


if __name__ == "__main__":
    main()
