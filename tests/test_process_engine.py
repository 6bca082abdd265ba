"""The process engine: CPU-bound tools run in worker processes a deadline kills (issue 24, finding 6).

A tool that spins in Python (``while True: pass``) holds the GIL: in the
server's own process, a burst of them starves the event loop, so every
timeout came back seconds late. With ``delegate: {engine: process}`` such a
tool runs in a worker process instead; a call whose deadline passes (or that
is cancelled) has its worker killed at once and replaced, so timeouts come
back on time and prompts and async tools keep answering meanwhile.

The pools are per process (``executor_for``); every test closes them at its
end and checks that no worker it saw is left, running or unreaped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from servers import free_port, listening, stop

from orchestrator import (
    ArgsValidationError,
    ConfigurationError,
    InvocationError,
    InvocationTimeout,
    Manager,
    OrchestratorError,
)
from orchestrator.executor import executor_for
from orchestrator.processes import ProcessExecutor, close_pools

pytestmark = pytest.mark.anyio

SLACK = 1.5  # generous: a killed call returns within its timeout plus this, however its worker spins
QUICK = 1.0  # generous: a prompt or an async tool while workers spin (about 1 ms when idle)
POOL = {"engine": "process", "pool": 2}

SPIN = 'frontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}\n\ndef main(ctx):\n' + (
    "    while True:\n        pass\n"
)
SPIN_ASYNC = (
    'frontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}\n\n'
    "async def main(ctx):\n    while True:\n        pass\n"
)
WORK = """
import os

frontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}

def main(ctx):
    print("a tool's own output")  # must not get mixed into the worker's replies
    return {"pid": os.getpid(), "square": ctx.args["n"] ** 2}
"""
NESTED = """
import os

frontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}

async def main(ctx):
    return {"pid": os.getpid(), "helper": await ctx.manager.invoke("helper", {"name": "Ada"})}
"""
FAIL = """
from orchestrator import SecurityError

frontmatter = {{"metadata": {{"delegate": {{"engine": "{engine}"}}}}}}

def main(ctx):
    if ctx.args.get("foreign"):
        raise ValueError("not an orchestrator error")
    raise SecurityError("not allowed here", key="secret")
"""
DIE = """
import os

frontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}

def main(ctx):
    os._exit(3)
"""
GREET = "---\ndescription: greets\n---\nHello {{ args.name }}!\n"
FAST = "async def main(ctx):\n    return 'fast'\n"


def alive(pid: int) -> bool:
    """True while ``pid`` runs or is a zombie nobody reaped (signal 0 reaches both)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pool() -> ProcessExecutor:
    found = executor_for(POOL)
    assert isinstance(found, ProcessExecutor)
    return found


@pytest.fixture(autouse=True)
def workers() -> Iterator[set[int]]:
    """The worker pids a test saw; at its end the pools close and none of them may be left."""
    seen: set[int] = set()
    yield seen
    seen |= set(pool().pids)
    close_pools()
    assert pool().pids == []
    assert [pid for pid in seen if alive(pid)] == []


@pytest.fixture
def manager(write: Any, tmp_path: Path) -> Manager:
    write("tools/spin.py", SPIN)
    write("tools/spin-async.py", SPIN_ASYNC)
    write("tools/work.py", WORK)
    write("tools/nested.py", NESTED)
    write("tools/fail-here.py", FAIL.format(engine="inprocess"))
    write("tools/fail-there.py", FAIL.format(engine="process"))
    write("tools/die.py", DIE)
    write("tools/greet.md", GREET)
    write("tools/fast.py", FAST)
    write("more/helper.md", GREET)
    return Manager([tmp_path / "tools", tmp_path / "more"])


async def timed(call: Any) -> tuple[Any, float]:
    """``(await call, seconds it took)``."""
    started = time.monotonic()
    value = await call
    return value, time.monotonic() - started


async def gone(pids: set[int]) -> None:
    """Wait until none of ``pids`` is left (killed workers are reaped by a thread of their own)."""
    with anyio.fail_after(5):
        while any(alive(pid) for pid in pids):
            await anyio.sleep(0.02)


async def test_a_burst_of_spinning_calls_times_out_on_time_and_the_loop_stays_free(
    manager: Manager, workers: set[int]
) -> None:
    for ref in ("greet", "fast"):  # compiled and planned: what follows times the calls alone
        await manager.invoke(ref, {"name": "Ada"})
    seconds = 1.0
    late: list[float] = []
    quick: list[float] = []

    async def spin(ref: str) -> None:
        started = time.monotonic()
        with pytest.raises(InvocationTimeout):
            await manager.invoke(ref, {"$timeout": seconds})
        late.append(time.monotonic() - started)

    async with anyio.create_task_group() as group:
        for index in range(8):  # four times the pool: six wait for a worker, and time out waiting
            group.start_soon(spin, "spin" if index % 2 else "spin-async")
        await anyio.sleep(0.5)
        spinning = set(pool().pids)
        for ref in ("greet", "fast", "greet", "fast"):
            quick.append((await timed(manager.invoke(ref, {"name": "Ada"})))[1])
    workers |= spinning
    assert len(spinning) == 2, spinning
    assert len(late) == 8 and max(late) < seconds + SLACK, late
    assert max(quick) < QUICK, quick
    await gone(spinning)  # killed and reaped, not left spinning
    result = await manager.invoke("work", {"n": 7})  # the pool starts new workers
    assert result["square"] == 49 and result["pid"] not in spinning and result["pid"] != os.getpid()
    workers.add(result["pid"])


SPIN_MARKED = (
    'import os\n\nfrontmatter = {"metadata": {"delegate": {"engine": "process", "pool": 2}}}\n\n'
    "def main(ctx):\n"
    "    with open(ctx.args['mark'], 'w') as mark:\n        mark.write(str(os.getpid()))\n"
    "    while True:\n        pass\n"
)


async def test_a_cancelled_call_kills_its_worker(manager: Manager, workers: set[int], write: Any, tmp_path: Path):
    """Cancelled once its worker is spinning (the worker says its pid: a loaded machine may take seconds to start it)."""
    write("tools/spin-marked.py", SPIN_MARKED)
    mark = tmp_path / "worker.pid"
    with anyio.CancelScope() as scope:  # no $timeout: the caller's own cancel scope
        async with anyio.create_task_group() as group:
            group.start_soon(manager.invoke, "spin-marked", {"mark": str(mark)})
            with anyio.fail_after(60):
                while not mark.exists() or not mark.read_text():
                    await anyio.sleep(0.02)
            scope.cancel()
    pid = int(mark.read_text())
    workers.add(pid)
    await gone({pid})


async def test_a_worker_serves_call_after_call_and_sees_the_callers_search_paths(
    manager: Manager, workers: set[int]
) -> None:
    first = await manager.invoke("work", {"n": 2})
    second = await manager.invoke("work", {"n": 3})
    nested = await manager.invoke("nested")  # helper is in the caller's second search path
    workers |= {first["pid"], second["pid"], nested["pid"]}
    assert (first["square"], second["square"]) == (4, 9)
    assert first["pid"] == second["pid"]  # one worker, kept: the second call did not start another
    assert nested["helper"].strip() == "Hello Ada!" and nested["pid"] != os.getpid()


async def test_a_tools_error_comes_back_typed_as_from_the_other_engines(manager: Manager) -> None:
    caught: dict[str, OrchestratorError] = {}
    foreign: dict[str, OrchestratorError] = {}
    for ref in ("fail-here", "fail-there"):
        with pytest.raises(OrchestratorError) as info:
            await manager.invoke(ref)
        caught[ref] = info.value
        with pytest.raises(OrchestratorError) as info:
            await manager.invoke(ref, {"foreign": True})
        foreign[ref] = info.value
    here, there = caught["fail-here"], caught["fail-there"]
    assert type(there) is type(here) and there.key == here.key == "secret"
    assert str(here) in str(there)
    assert type(foreign["fail-there"]) is type(foreign["fail-here"]) is InvocationError
    assert "ValueError" in str(foreign["fail-there"])


async def test_a_worker_that_dies_fails_its_call_and_is_replaced(manager: Manager, workers: set[int]) -> None:
    with pytest.raises(InvocationError) as info:
        await manager.invoke("die")
    assert info.value.tool == "die"
    result = await manager.invoke("work", {"n": 4})
    workers.add(result["pid"])
    assert result["square"] == 16


async def test_a_worker_killed_while_idle_is_never_handed_a_call(manager: Manager, workers: set[int]) -> None:
    first = await manager.invoke("work", {"n": 2})
    workers.add(first["pid"])
    os.kill(first["pid"], signal.SIGKILL)  # the OOM killer, say
    await anyio.sleep(0.2)
    second = await manager.invoke("work", {"n": 3})
    workers.add(second["pid"])
    assert second["square"] == 9 and second["pid"] != first["pid"]


def test_one_pool_serves_event_loops_of_both_backends_at_once(manager: Manager, workers: set[int]) -> None:
    one = {"delegate": {"engine": "process", "pool": 1}}  # one worker: the loops take turns on it
    results: dict[str, list[int]] = {"asyncio": [], "trio": []}

    def run(backend: str) -> None:
        async def calls() -> None:
            for n in range(4):
                result = await manager.invoke("work", {"n": n}, overrides=one)
                results[backend].append(result["square"])
                workers.add(result["pid"])

        anyio.run(calls, backend=backend)

    threads = [threading.Thread(target=run, args=(backend,)) for backend in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {"asyncio": [0, 1, 4, 9], "trio": [0, 1, 4, 9]}
    assert executor_for(one["delegate"]).pids == sorted(workers)  # the pool of one ran them all


def test_process_specs_are_checked() -> None:
    assert isinstance(executor_for("process"), ProcessExecutor)
    for spec in ({"engine": "process", "pool": 0}, {"engine": "process", "address": "ray://x"}):
        with pytest.raises(ConfigurationError):
            executor_for(spec)


HERE = 'frontmatter = {"metadata": {"delegate": {"engine": "inprocess"}}}\n\ndef main(ctx):\n    return ctx.args["n"] + 1\n'
LAST_CLOSE = """
import os, sys
from orchestrator import Manager
from orchestrator.executor import executor_for

def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

tools = sys.argv[1]
with Manager([tools]) as first:
    second = Manager([tools])
    pid = first.invoke_sync("work", {"n": 2})["pid"]
print(first.closed, alive(pid))  # the pools are shared: second may still use them
print(second.invoke_sync("work", {"n": 3}) == {"pid": pid, "square": 9})
second.close()
print(alive(pid), executor_for({"engine": "process", "pool": 2}).pids)  # killed and reaped
with Manager([tools]) as third:  # a later Manager starts new workers
    again = third.invoke_sync("work", {"n": 4})
print(again["square"], again["pid"] != pid, alive(again["pid"]))
# The in-process engine's Managers are closed with the last open Manager, and made anew for the next.
with Manager([tools]) as fourth:
    print(fourth.invoke_sync("here", {"n": 1}))
with Manager([tools]) as fifth:
    print(fifth.invoke_sync("here", {"n": 2}))
"""


def test_the_executors_end_when_the_last_open_manager_closes(write: Any, tmp_path: Path) -> None:
    """issue 26: ``Manager.close()`` ends the shared executors, unless another open Manager may still use them.

    In a process of its own: every Manager alive in this one (other tests') would count as open.
    """
    write("tools/work.py", WORK)
    write("tools/here.py", HERE)
    done = subprocess.run(
        [sys.executable, "-c", LAST_CLOSE, str(tmp_path / "tools")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True True", "True", "False []", "16 True False", "2", "3"]


async def test_delegate_checks_the_process_pool(write: Any, tmp_path: Path) -> None:
    write("tools/j.md", "---\nmetadata:\n  delegate: {engine: process, pool: 0}\n---\nx")
    with pytest.raises(ArgsValidationError, match="pool"):
        await Manager([tmp_path / "tools"]).invoke("j")


# -- the real server: ``toolcascade serve --http`` ----------------------------------------------

SERVED = {
    "spin.py": 'frontmatter = {"metadata": {"delegate": {"engine": "process"}}}\n\n'
    "def main(ctx):\n    while True:\n        pass\n",
    "square.py": 'frontmatter = {"metadata": {"delegate": {"engine": "process"}}}\n\n'
    "def main(ctx):\n    return ctx.args['n'] ** 2\n",
    "greet.md": GREET,
}


async def answered(client: Any, n: int, expected: str) -> None:
    """``square`` answers ``expected``: asked again when a worker still starting missed the 2 s bound.

    Starting a worker process (a Python that imports the engine) can take
    longer than the served ``--max-timeout`` on a loaded machine; what the
    test times is the burst that follows, not a start.
    """
    for _ in range(10):
        square = await client.call_tool("square", {"n": n})
        if not square.is_error:
            break
    assert not square.is_error and expected in square.content[0].text, square


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux /proc; empty elsewhere)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client leaves a generator open on trio
async def test_a_served_burst_of_spinning_process_tools_times_out_on_time(tmp_path: Path) -> None:
    from mcp import Client

    folder = tmp_path / "served"
    folder.mkdir()
    for name, text in SERVED.items():
        (folder / name).write_text(text, encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "orchestrator", "serve", "--path", str(folder), "--http", f"127.0.0.1:{port}"]
    with (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen([*command, "--max-timeout", "2"], stdout=subprocess.DEVNULL, stderr=log)
    if not listening(process, port, 30):
        stop(process)
        raise RuntimeError(f"the server did not start: {(tmp_path / 'server.log').read_text()}")
    seen: set[int] = set()
    try:
        with anyio.fail_after(60):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await answered(client, 3, "9")  # starts a worker: later calls time alone
                results: list[tuple[Any, float]] = []
                quick: list[float] = []

                async def call() -> None:
                    results.append(await timed(client.call_tool("spin", {})))

                async with anyio.create_task_group() as group:
                    for _ in range(10):
                        group.start_soon(call)
                    await anyio.sleep(0.5)
                    seen |= children(process.pid)
                    for _ in range(3):
                        result, seconds = await timed(client.call_tool("greet", {"name": "Ada"}))
                        assert not result.is_error
                        quick.append(seconds)
                assert all(r.content[0].text.startswith("InvocationTimeout:") for r, _ in results), results
                assert max(seconds for _, seconds in results) < 2 + SLACK + 1, results
                assert max(quick) < QUICK, quick
                await answered(client, 4, "16")  # new workers in the killed ones' place
                seen |= children(process.pid)
    finally:
        stop(process)
    assert seen
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in seen if alive(pid)] == []  # the server's workers ended with it
