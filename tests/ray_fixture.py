"""One in-process Ray for a test module (import ``ray_session`` from it: tests/test_ray.py does).

Ray starts once, on 2 CPUs, without the dashboard, with usage stats off and
``HOME`` in a temporary folder (Ray writes an auth token there), and shuts
down when the module's last test ends: kept to the end of the session, its
processes (GCS, raylet, the pool's actors) went on using ~3 s of CPU a minute
on the worker's machine while other files ran. ``ray start`` is never run.
``pool`` is a ``RayExecutor`` of 2 actors shared by the tests that need no
special actors.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_gcs_server_port_wait_time_s": "120",  # a busy 2-core machine starts GCS slowly
}
OBJECT_STORE = 100 * 1024 * 1024


WHERE = """\
import os

frontmatter = {"metadata": {"params": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


async def main(ctx):
    return {"pid": os.getpid(), "n": ctx.args.get("n"), "file": str(ctx.tool.path), "depth": ctx.depth}
"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder Ray ships to every worker as the job's ``working_dir``: ``tools/where.py`` inside."""
    folder = tmp_path_factory.mktemp("shipped")
    (folder / "tools").mkdir()
    (folder / "tools" / "where.py").write_text(WHERE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def ray_session(shipped: Path) -> Iterator[Any]:
    """``ray`` initialised in this process for the module, shipping ``shipped`` as its working_dir."""
    home = tempfile.mkdtemp(prefix="ray-home-")
    saved = {key: os.environ.get(key) for key in (*ENV, "HOME")}
    os.environ.update(ENV)
    os.environ["HOME"] = home
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=OBJECT_STORE,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"working_dir": str(shipped)},
    )
    restore(saved)  # Ray's processes have their environment now; the other tests keep theirs
    try:
        yield ray
    finally:
        ray.shutdown()


def restore(saved: dict[str, str | None]) -> None:
    """Put the environment variables back as they were."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def pool(ray_session: Any, shipped: Path) -> Iterator[Any]:
    """A RayExecutor of 2 actors, started once; folders under ``shipped`` travel as relative paths."""
    from orchestrator.cluster import RayExecutor

    executor = RayExecutor(pool=2, working_dir=shipped)
    executor.start()
    yield executor
    for actor in executor.actors:
        ray_session.kill(actor)
