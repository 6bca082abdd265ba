"""What recording costs (issue 31): ``batch`` and an MCP call, with the run log on and off, in one run.

- ``batch``: ``toolcascade batch`` (in process, as the command runs it)
  over ``--lines`` JSON lines (10,000) of a one-line template tool, with the
  run log on and with ``--no-log``, turn about; lines per second, median
  over rounds. Target: recording keeps at least 0.8x the throughput without
  it (the rows are written on the log's own thread, in batches).
- MCP: sequential ``tools/call`` of the same tool through the official
  client against two ``build_server`` servers in this process, open side by
  side, one whose Manager keeps a run log, called in turn in short rounds;
  milliseconds per call, median over rounds. Target: recording adds at
  most 10% to a call's latency. Beside it, the process's CPU milliseconds
  per call (both servers, the client and the log's writer thread share the
  process): other programs' load moves it far less than the wall clock, and
  a recording round's CPU counts its last rows' writing too.

    .venv/bin/python -m bench.runlog [--lines 10000] [--calls 200] [--rounds 5]

Prints a small markdown table and the two ratios against the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

BATCH_TARGET = 0.8  # lines per second with recording over without, at least
MCP_TARGET = 1.1  # ms per MCP call with recording over without, at most
MCP_ROUNDS = 4  # MCP rounds per round of the bench, each server in turn
NOTE = """---
description: Notes a text.
metadata:
  params: {type: object, properties: {text: {type: string}}, required: [text]}
---
Noted: {{ args.text }}
"""


def write_folder(root: Path, lines: int) -> tuple[Path, Path]:
    """A tools folder with ``note`` and an args file of ``lines`` lines."""
    tools = root / "tools"
    tools.mkdir()
    (tools / "note.md").write_text(NOTE)
    source = root / "args.jsonl"
    with source.open("w") as out:
        for number in range(lines):
            out.write(json.dumps({"text": f"line {number}"}) + "\n")
    return tools, source


def batch_rate(tools: Path, source: Path, work: Path, recording: bool) -> float:
    """Lines per second of one ``toolcascade batch`` run (a fresh results file and, recording, a fresh log)."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    stamp = f"{time.monotonic_ns()}"
    output = work / f"results-{stamp}.jsonl"
    log = work / f"runs-{stamp}.db"
    argv = ["batch", "note", str(source), "-o", str(output), "--path", str(tools)]
    if not recording:
        argv.append("--no-log")
    env = {"TOOLCASCADE_RUNLOG": str(log), "NO_COLOR": "1"}
    started = time.perf_counter()
    done = CliRunner(env=env).invoke(cli, argv)
    seconds = time.perf_counter() - started
    if done.exit_code != 0:
        raise RuntimeError(f"batch failed: {done.output}")
    lines = len(output.read_text().splitlines())
    if recording:
        from orchestrator.runlog import RunLog

        kept = len(RunLog(log).runs(None))
        if kept != lines:
            raise RuntimeError(f"the run log kept {kept} runs of {lines}")
    return lines / seconds


async def mcp_latency(tools: Path, log: Path, calls: int, rounds: int) -> dict[str, dict[bool, list[float]]]:
    """Milliseconds per sequential MCP call, per round, against two servers in this process: one recording in
    ``log``, one not, open side by side and called in turn (``calls`` each per round), so the machine's load
    weighs on both alike: ``wall`` (the latency) and ``cpu`` (the process's CPU time). The writer thread writes
    during a recording round; what is left at its end (at most the last 50 ms of rows) is written before the
    next round, so none of it lands in the other server's round (its CPU time counts in its own round)."""
    from contextlib import AsyncExitStack

    from mcp import Client

    from orchestrator import Manager
    from orchestrator.mcp import build_server

    figures: dict[str, dict[bool, list[float]]] = {"wall": {False: [], True: []}, "cpu": {False: [], True: []}}
    async with AsyncExitStack() as stack:
        clients = {}
        managers = {}
        for recording in (False, True):
            managers[recording] = stack.enter_context(Manager([tools], runlog=log if recording else None))
            clients[recording] = await stack.enter_async_context(Client(build_server(managers[recording])))
        runlog = managers[True].runlog
        assert runlog is not None
        for client in clients.values():  # warm-up: imports, caches, the writer thread
            for _ in range(max(20, calls)):
                await client.call_tool("note", {"text": "warm"})
        for index in range(rounds):
            for recording in (False, True) if index % 2 == 0 else (True, False):
                client = clients[recording]
                started, cpu = time.perf_counter(), time.process_time()
                for number in range(calls):
                    await client.call_tool("note", {"text": f"call {number}"})
                figures["wall"][recording].append((time.perf_counter() - started) / calls * 1e3)
                if recording:  # the last rows of the round are written before the other server's round
                    await anyio.to_thread.run_sync(runlog.flush)
                figures["cpu"][recording].append((time.process_time() - cpu) / calls * 1e3)
    return figures


def alternate(rounds: int, measure: Callable[[bool], float]) -> dict[bool, list[float]]:
    """``measure(recording)`` for recording off and on, turn about, ``rounds`` times each."""
    found: dict[bool, list[float]] = {False: [], True: []}
    for index in range(rounds):
        for recording in (False, True) if index % 2 == 0 else (True, False):
            found[recording].append(measure(recording))
    return found


def run(lines: int, calls: int, rounds: int) -> dict[str, Any]:
    """Every figure of the bench, measured in this process run."""
    with tempfile.TemporaryDirectory(prefix="bench-runlog-") as tmp:
        root = Path(tmp)
        tools, source = write_folder(root, lines)
        batch_rate(tools, source, root, False)  # warm-up: imports, the tool's plan, the index
        rates = alternate(rounds, lambda recording: batch_rate(tools, source, root, recording))
        latency = anyio.run(mcp_latency, tools, root / "mcp.db", calls, rounds * MCP_ROUNDS)
    batch_off, batch_on = statistics.median(rates[False]), statistics.median(rates[True])
    mcp_off, mcp_on = statistics.median(latency["wall"][False]), statistics.median(latency["wall"][True])
    cpu_off, cpu_on = statistics.median(latency["cpu"][False]), statistics.median(latency["cpu"][True])
    return {
        "lines": lines,
        "calls": calls,
        "rounds": rounds,
        "batch_off": batch_off,
        "batch_on": batch_on,
        "batch_ratio": batch_on / batch_off,
        "mcp_off": mcp_off,
        "mcp_on": mcp_on,
        "mcp_ratio": mcp_on / mcp_off,
        "mcp_cpu_off": cpu_off,
        "mcp_cpu_on": cpu_on,
        "mcp_cpu_ratio": cpu_on / cpu_off,
    }


def markdown(found: dict[str, Any]) -> str:
    """The figures as a markdown table, with the targets and verdicts."""
    batch_ok = found["batch_ratio"] >= BATCH_TARGET
    mcp_ok = found["mcp_ratio"] <= MCP_TARGET
    rows = [
        "| workload | run log off | run log on | ratio | target | verdict |",
        "|---|---|---|---|---|---|",
        f"| batch, {found['lines']:,} lines (lines/s) | {found['batch_off']:,.0f} | {found['batch_on']:,.0f} | "
        f"{found['batch_ratio']:.2f}x | ≥ {BATCH_TARGET}x | {'pass' if batch_ok else '**FAIL**'} |",
        f"| MCP call, sequential (ms/call) | {found['mcp_off']:.3f} | {found['mcp_on']:.3f} | "
        f"{found['mcp_ratio']:.2f}x | ≤ {MCP_TARGET}x | {'pass' if mcp_ok else '**FAIL**'} |",
        f"| MCP call, process CPU (ms/call) | {found['mcp_cpu_off']:.3f} | {found['mcp_cpu_on']:.3f} | "
        f"{found['mcp_cpu_ratio']:.2f}x | | |",
    ]
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    rounds = f"batch: medians over {found['rounds']} runs each; MCP: over {found['rounds'] * MCP_ROUNDS} rounds each"
    return "\n".join(rows) + f"\n\n{rounds}, on and off in turn; load average {load}.\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=10_000, help="JSON lines per batch run")
    parser.add_argument("--calls", type=int, default=200, help="MCP calls per round, to each server")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, on and off in turn")
    options = parser.parse_args()
    print(markdown(run(options.lines, options.calls, options.rounds)))


if __name__ == "__main__":
    main()
