"""W1 and W2 in instructions, counted by valgrind's callgrind: repeatable on a noisy machine.

Each figure runs one script at N and 5N calls and divides the difference by
4N, so interpreter start-up and imports cancel. W1 is the trivial async tool
through the default pipeline (built-ins watched, as in a source checkout, and
not, as installed); W2 is the slope per extra pass-through middleware entry
declared in a tool's metadata, between 1 and 1 + STEPS entries; MAF invoking one function tool is the
baseline when it is installed. Slow (valgrind runs Python about 50x slower,
a few minutes in all), so it is not part of ``make bench``:

    make bench-instructions        # or: .venv/bin/python -m bench.instructions [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import baselines
from .invoke import write_stack
from .toolsets import write_invoke_tools

STEPS = 5

TOOLCASCADE = """
import sys, anyio
from orchestrator import Manager
n, watch, folder, entries = int(sys.argv[1]), sys.argv[2] == "watch", sys.argv[3], int(sys.argv[4])
manager = Manager([folder], watch_builtins=watch)
ref = f"stack{entries}" if entries else "noop"  # its metadata declares the entries (bench.invoke writes it)
async def main():
    for _ in range(n):
        await manager.invoke(ref)
anyio.run(main)
"""

MAF = """
import sys, anyio
from bench.baselines import maf_call
n, call = int(sys.argv[1]), maf_call(0)
async def main():
    for _ in range(n):
        await call()
anyio.run(main)
"""


def instructions(out: Path, script: str, n: int, *args: str) -> int:
    """Instructions callgrind counts for ``script`` run with ``n`` calls.

    Raises:
        subprocess.CalledProcessError: the script failed under valgrind.
    """
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", script, str(n), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
        # The file watcher starts after a second of use, which under valgrind falls inside one run and not
        # the other: its thread's instructions would swamp the per-call difference.
        # The first of the two runs would also save the built-ins' frontmatters for the second (orchestrator.index).
        # A fixed hash seed: with random ones the same script's count moves by ~20% between runs (dict and set
        # layouts), more than most changes being judged.
        env={**os.environ, "TOOLCASCADE_WATCH": "off", "TOOLCASCADE_INDEX": "off", "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no total:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_call(out: Path, script: str, n: int, *args: str) -> float:
    """Instructions per call: the difference between 5n and n calls, over 4n."""
    return (instructions(out, script, 5 * n, *args) - instructions(out, script, n, *args)) / (4 * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per run")
    quick = parser.parse_args().quick
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    n = 10 if quick else 40
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        written = write_invoke_tools(folder / "tools", 1 + STEPS)
        for count in (1, 1 + STEPS):
            write_stack(written, count)
        tools = str(written)
        out = folder / "callgrind.out"
        maf = per_call(out, MAF, n) if baselines.version("agent-framework-core") else None
        w1 = per_call(out, TOOLCASCADE, n, "watch", tools, "0")
        frozen = per_call(out, TOOLCASCADE, n, "frozen", tools, "0")
        low = per_call(out, TOOLCASCADE, n // 2, "watch", tools, "1")
        high = per_call(out, TOOLCASCADE, n // 2, "watch", tools, str(1 + STEPS))
    versus = f"{w1 / maf:.2f}x MAF" if maf else ""
    rows.append(("MAF: FunctionMiddlewarePipeline + FunctionTool.invoke", maf or 0.0, "" if maf else "not installed"))
    rows.append(("W1 toolcascade: async tool, default pipeline, built-ins watched", w1, versus))
    rows.append(
        ("W1 toolcascade: same, built-ins not watched (installed)", frozen, f"{frozen / maf:.2f}x MAF" if maf else "")
    )
    rows.append(
        (f"W2 toolcascade: per extra pass-through middleware (slope 1 -> {1 + STEPS})", (high - low) / STEPS, "")
    )
    sys.stdout.write(f"### Instructions per call (callgrind, {n} vs {5 * n} calls)\n\n")
    sys.stdout.write("| case | instructions | ratio |\n|---|---:|---|\n")
    for case, count, note in rows:
        sys.stdout.write(f"| {case} | {count:,.0f} | {note} |\n")


if __name__ == "__main__":
    main()
