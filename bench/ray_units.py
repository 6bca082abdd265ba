"""W7: units on Ray beside the in-process executor, in one run (issue 16).

    .venv/bin/python -m bench.ray_units [--quick]

Per-unit overhead: µs per sequential call of
- a bare Ray async-actor round trip (``actor.echo.remote(x)``): the engine's floor;
- a delegated unit: ``manager.invoke`` of a tool whose ``delegate: {}`` sends
  the rest of its pipeline to the same actors (caller pipeline, unit, actor,
  worker pipeline, reply);
- the same tool delegated in process, and the tool invoked plainly.
Throughput: ``run_batch`` of 10,000 tiny units on 2 actors and in process.
Targets: delegated / bare <= 1.5; batch on 2 actors >= 1,000 units/s.
Ray starts here on 2 CPUs with usage stats off and ``HOME`` in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from .timing import Sample, measure

TINY = "async def main(ctx):\n    return ctx.args.get('n', 0) + 1\n"
DELEGATED = 'frontmatter = {"metadata": {"delegate": {}}}\n\n\n' + TINY
IN_PROCESS = 'frontmatter = {"metadata": {"delegate": {"engine": "inprocess"}}}\n\n\n' + TINY
UNITS = 10_000


def start_ray() -> Any:
    """Ray in this process: 2 CPUs, no dashboard, 100 MB object store, usage stats off, HOME in a temp folder."""
    os.environ.update(
        {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "HOME": tempfile.mkdtemp()}
    )
    import ray

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024, log_to_driver=False)
    return ray


async def batch_rate(executor: Any, base: dict[str, Any], folder: Path, name: str) -> float:
    """Units per second of a 10,000-line batch."""
    from orchestrator.batch import run_batch

    source, output = folder / f"{name}.jsonl", folder / f"{name}.out.jsonl"
    source.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(UNITS)))
    output.unlink(missing_ok=True)
    started = time.perf_counter()
    summary = await run_batch(executor, base, source, output, concurrency=512)
    seconds = time.perf_counter() - started
    assert summary.results == UNITS, summary
    return UNITS / seconds


async def run(folder: Path, quick: bool) -> list[tuple[str, Sample | float, str]]:
    """Every W7 figure, measured in one process run."""
    from orchestrator import Manager
    from orchestrator.cluster import RayExecutor
    from orchestrator.executor import InProcessExecutor, unit_for

    tools = folder / "tools"
    tools.mkdir()
    (tools / "tiny.py").write_text(TINY)
    (tools / "delegated.py").write_text(DELEGATED)
    (tools / "inprocess.py").write_text(IN_PROCESS)
    executor = RayExecutor(pool=2)
    executor.start()
    manager = Manager([tools], executor=executor)
    n, rounds = (100, 3) if quick else (300, 7)
    await executor.echo(0)
    await manager.invoke("delegated")  # every actor builds its Manager once
    await manager.invoke("delegated")
    # Rounds alternate between the rows, so a busy moment of the shared machine hits all of them.
    calls = {
        "bare": lambda: executor.echo({"n": 1}),
        "delegated": lambda: manager.invoke("delegated", {"n": 1}),
        "local": lambda: manager.invoke("inprocess", {"n": 1}),
        "plain": lambda: manager.invoke("tiny", {"n": 1}),
    }
    found: dict[str, list[Sample]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            found[name].append(await measure(call, n, 1, warmup=10))
    bare, delegated, local, plain = (
        Sample(statistics.median(s.median for s in found[name]), min(s.min for s in found[name]), rounds)
        for name in calls
    )
    ray_rate = await batch_rate(executor, unit_for(manager, "tiny"), folder, "ray")
    local_rate = await batch_rate(InProcessExecutor(), unit_for(manager, "tiny"), folder, "inprocess")
    await executor.aclose()
    return [
        ("bare Ray async-actor round trip (the floor)", bare, "µs/unit"),
        ("delegated unit on Ray (`delegate: {}`, 2 actors)", delegated, "µs/unit"),
        ("delegated unit in process (`engine: inprocess`)", local, "µs/unit"),
        ("the tool invoked plainly", plain, "µs/unit"),
        ("delegated / bare (target <= 1.5)", delegated / bare, "ratio"),
        ("`batch` of 10,000 on 2 Ray actors (target >= 1,000)", ray_rate, "units/s"),
        ("`batch` of 10,000 in process", local_rate, "units/s"),
    ]


def markdown(rows: list[tuple[str, Sample | float, str]]) -> str:
    """The W7 table."""
    lines = [
        "## W7: units on Ray beside in process",
        "",
        "| measure | median | min | unit |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, value, unit in rows:
        if isinstance(value, Sample):
            lines.append(f"| {name} | {value.median:,.0f} | {value.min:,.0f} | {unit} |")
        else:
            lines.append(f"| {name} | {value:,.2f} | | {unit} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    options = parser.parse_args()
    ray = start_ray()
    try:
        with tempfile.TemporaryDirectory(prefix="toolcascade-ray-bench-") as name:
            rows = anyio.run(run, Path(name), options.quick)
    finally:
        ray.shutdown()
    sys.stdout.write(markdown(rows))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    sys.stdout.write(f"\nLoad average at the end: {load}.\n")


if __name__ == "__main__":
    main()
