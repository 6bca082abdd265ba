# ruff: noqa: F811  (pytest fixtures imported from ray_fixture are parameters here)
"""The Ray executor (issue 16), on one in-process Ray started once for this file (tests/ray_fixture.py).

Every test here is slow (Ray starts worker processes); together they stay
within a few minutes on 2 cores. The two-node cluster runs in a subprocess,
since ``ray.cluster_utils.Cluster`` needs a process where Ray is not running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from ray_fixture import pool, ray_session, shipped  # noqa: F401  (fixtures)

from orchestrator import ArgsValidationError, InvocationError, InvocationTimeout, Manager
from orchestrator.batch import run_batch
from orchestrator.cluster import RayExecutor
from orchestrator.executor import executor_for, unit_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 120  # seconds any one test may take; nothing waits longer

# First: the cluster needs a machine where this file's Ray has not started yet.
CLUSTER = """
    import json, sys
    import anyio, ray
    from ray.cluster_utils import Cluster
    from orchestrator import Manager
    from orchestrator.cluster import RayExecutor
    from orchestrator.executor import unit_for

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                      "object_store_memory": 80 * 1024 * 1024})
    cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        executor = RayExecutor(pool=2)
        executor.start()
        nodes = sorted(ray.get([actor.node.remote() for actor in executor.actors]))
        unit = unit_for(Manager([sys.argv[1]]), "where", {"n": 3})

        async def main():
            return [await executor.submit(unit) for _ in range(4)]

        results = anyio.run(main)
        print(json.dumps({"nodes": nodes, "n": [r["n"] for r in results]}))
    finally:
        ray.shutdown()
        cluster.shutdown()
    """


def test_two_node_cluster(write: Any, tmp_path: Path) -> None:
    write("tools/where.py", WHERE)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_gcs_server_port_wait_time_s": "120",  # three Ray nodes' processes start on 2 busy cores
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CLUSTER), str(tmp_path / "tools")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(set(report["nodes"])) == 2  # one actor on each node
    assert report["n"] == [3, 3, 3, 3]


WHERE = """
    import os

    frontmatter = {"metadata": {"params": {"type": "object", "properties": {"n": {"type": "integer"}}}}}

    async def main(ctx):
        return {"pid": os.getpid(), "n": ctx.args.get("n"), "file": str(ctx.tool.path), "depth": ctx.depth}
    """


async def test_actor_invokes_a_unit_in_another_process(pool: RayExecutor, write: Any, tmp_path: Path) -> None:
    write("tools/where.py", WHERE)
    manager = Manager([tmp_path / "tools"])
    with anyio.fail_after(LIMIT):
        result = await pool.submit(unit_for(manager, "where", {"n": 7}))
    assert result["n"] == 7 and result["pid"] != os.getpid()


async def test_errors_cross_ray_as_the_same_class(pool: RayExecutor, write: Any, tmp_path: Path) -> None:
    write("tools/where.py", WHERE)
    write("tools/raiser.py", "def main(ctx):\n    raise ValueError('bad input')\n")
    manager = Manager([tmp_path / "tools"])
    with anyio.fail_after(LIMIT):
        with pytest.raises(ArgsValidationError) as caught:
            await pool.submit(unit_for(manager, "where", {"n": "seven"}))
        with pytest.raises(InvocationError, match="ValueError: bad input") as foreign:
            await pool.submit(unit_for(manager, "raiser"))
    assert caught.value.tool == "where" and caught.value.errors[0][0] == "/n"
    assert any("raiser.py:2" in note for note in foreign.value.__notes__)


async def test_delegated_fan_out_of_1000_calls(ray_session: Any, write: Any, tmp_path: Path) -> None:
    write(
        "tools/leaf.py",
        """
        import os

        frontmatter = {"metadata": {"delegate": {"engine": "ray"}}}

        async def main(ctx):
            return [ctx.args["i"] * 2, os.getpid(), ctx.depth]
        """,
    )
    write(
        "tools/fan.py",
        """
        import anyio

        async def main(ctx):
            out = [None] * ctx.args["n"]

            async def one(i):
                out[i] = await ctx.manager.invoke("leaf", {"i": i})

            async with anyio.create_task_group() as tg:
                for i in range(ctx.args["n"]):
                    tg.start_soon(one, i)
            return out
        """,
    )
    with anyio.fail_after(LIMIT):
        out = await Manager([tmp_path / "tools"]).invoke("fan", {"n": 1000})
    assert [value for value, _, _ in out] == [i * 2 for i in range(1000)]
    assert {depth for _, _, depth in out} == {1}  # the depth travelled
    pids = {pid for _, pid, _ in out}
    assert os.getpid() not in pids and len(pids) == 2  # both actors of the pool `engine: ray` made
    await executor_for({"engine": "ray"}).aclose()


async def test_a_timeout_cancels_the_actor_task_and_its_finally_runs(
    pool: RayExecutor, write: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "finally.txt"
    write(
        "tools/slow.py",
        f"""
        import anyio

        frontmatter = {{"metadata": {{"delegate": {{}}}}}}

        async def main(ctx):
            try:
                await anyio.sleep(60)
            finally:
                with open({str(marker)!r}, "w") as handle:
                    handle.write("ran")
        """,
    )
    manager = Manager([tmp_path / "tools"], executor=pool)
    started = time.monotonic()
    with pytest.raises(InvocationTimeout):
        await manager.invoke("slow", {"$timeout": 1})
    assert time.monotonic() - started < 30
    with anyio.fail_after(30):
        while not marker.exists():
            await anyio.sleep(0.05)
    assert marker.read_text() == "ran"


async def test_working_dir_ships_the_tool_folder(pool: RayExecutor, shipped: Path) -> None:
    unit = unit_for(Manager([shipped / "tools"]), "where", {"n": 1}, root=pool.root)
    assert unit["folders"] == [{"path": "tools", "trusted": True}]  # relative: found in the worker's copy
    with anyio.fail_after(LIMIT):
        result = await pool.submit(unit)
    file = Path(result["file"])
    assert file.name == "where.py" and file.parent.name == "tools" and not file.is_relative_to(shipped)


CRASH = """
    import os

    async def main(ctx):
        if ctx.args.get("crash") and not os.path.exists(ctx.args["crash"]):
            open(ctx.args["crash"], "w").close()
            os._exit(1)  # the actor dies mid-batch, once
        return ctx.args["i"] + 1
    """


async def test_batch_of_10000_survives_a_killed_actor(pool: RayExecutor, write: Any, tmp_path: Path) -> None:
    write("tools/work.py", CRASH)
    source, output = tmp_path / "args.jsonl", tmp_path / "results.jsonl"
    marker = str(tmp_path / "crashed")
    with source.open("w") as handle:
        for i in range(10_000):
            handle.write(json.dumps({"i": i, "crash": marker} if i == 5_000 else {"i": i}) + "\n")
    base = unit_for(Manager([tmp_path / "tools"]), "work")
    with anyio.fail_after(LIMIT):
        summary = await run_batch(pool, base, source, output, concurrency=512)
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert Path(marker).exists()  # an actor really died
    assert [record["line"] for record in lines] == list(range(1, 10_001))  # each line once, in order
    assert [record.get("result") for record in lines] == [i + 1 for i in range(10_000)]
    assert (summary.results, summary.errors) == (10_000, 0)
