"""Stuck worker threads do not take the engine or the server with them (issue 24, finding 6).

A sync tool that never returns used to spin on after its timeout, holding
the GIL in turn with the event loop: with a few dozen of them every call
slowed to seconds and timeouts fired late, for good. Python cannot stop a
thread, so a thread whose caller stopped waiting is **stuck** until it ends;
once ``Limits.stuck_threads`` (at most ``limits.threads``) are, a new sync
call fails at once with ``InvocationError`` instead of adding to them, so
async tools and prompts keep their latency. ``serve`` ends on SIGTERM within
``--grace``. CPU-bound tools that may never return run in worker processes
that are killed at the deadline (``tests/test_process_engine.py``).

The spinning tools loop until the test's ``stop`` event is set, so a failing
test still leaves no thread spinning into the next one.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from servers import free_port, listening, stop

from orchestrator import InvocationError, InvocationTimeout, Manager
from orchestrator.limits import Limits

pytestmark = pytest.mark.anyio

SLACK = 2.0  # generous: a timeout must fire within its seconds plus this, whatever its thread does
QUICK = 1.5  # generous: a prompt or an async call while threads are stuck (about 1 ms when idle)

# Python code that never returns unless the test stops it: a pure-Python loop, as a CPU-bound tool runs.
SPIN = """
def main(ctx):
    box = ctx.nonlocals
    with box["lock"]:
        box["running"] += 1
    try:
        spins = 0
        while not box["stop"].is_set():
            spins += 1
        return spins
    except BaseException as exc:
        box["raised"].append(type(exc).__name__)
        raise
    finally:
        with box["lock"]:
            box["running"] -= 1
"""
# The same loop, swallowing whatever is raised in it: nothing stops it but the test.
RESIST = """
def main(ctx):
    box = ctx.nonlocals
    with box["lock"]:
        box["running"] += 1
    try:
        while True:
            try:
                spins = 0
                while not box["stop"].is_set():
                    spins += 1
                return spins
            except BaseException as exc:
                box["raised"].append(type(exc).__name__)
    finally:
        with box["lock"]:
            box["running"] -= 1
"""
# Waits inside one C call (a lock acquire), then records whether it went on.
WAIT = """
import threading

def main(ctx):
    box = ctx.nonlocals
    with box["lock"]:
        box["running"] += 1
    try:
        box["thread"] = threading.get_ident()
        box["started"].set()
        box["gate"].wait(10)
        box["after"] = True
        return "waited"
    except BaseException as exc:
        box["raised"].append(type(exc).__name__)
        raise
    finally:
        with box["lock"]:
            box["running"] -= 1
"""
GREET = "---\ndescription: Greets.\n---\nHello, {{ args.name | default('you') }}!\n"
FAST = "async def main(ctx):\n    return 'fast'\n"
FAST_SYNC = "import threading\n\ndef main(ctx):\n    return threading.get_ident()\n"


def write_tools(write) -> None:
    write("tools/spin.py", textwrap.dedent(SPIN))
    write("tools/resist.py", textwrap.dedent(RESIST))
    write("tools/wait.py", textwrap.dedent(WAIT))
    write("tools/greet.md", GREET)
    write("tools/fast.py", FAST)
    write("tools/fast-sync.py", FAST_SYNC)


@pytest.fixture
def box() -> Iterator[dict[str, Any]]:
    """Shared with the tools through nonlocals; at the end every loop is told to stop and waited for."""
    shared: dict[str, Any] = {
        "stop": threading.Event(),
        "gate": threading.Event(),
        "started": threading.Event(),
        "lock": threading.Lock(),
        "running": 0,
        "raised": [],
        "after": False,
    }
    yield shared
    shared["stop"].set()
    shared["gate"].set()
    deadline = time.monotonic() + 10
    while shared["running"] and time.monotonic() < deadline:
        time.sleep(0.01)


async def timed(call: Any) -> tuple[Any, float]:
    """``(await call, seconds it took)``."""
    started = time.monotonic()
    value = await call
    return value, time.monotonic() - started


async def until_sync_serves(manager: Manager) -> None:
    """Wait until a sync call runs again: a thread's slot comes back on the loop a moment after it ends."""
    with anyio.fail_after(5):
        while True:
            try:
                await manager.invoke("fast-sync")
                return
            except InvocationError:
                await anyio.sleep(0.01)


async def until_idle(box: dict[str, Any]) -> None:
    """Wait until no tool thread runs any more (the threads were stopped, not the test's loops)."""
    with anyio.fail_after(5):
        while box["running"]:
            await anyio.sleep(0.01)


async def test_a_spinning_sync_call_times_out_on_time_and_keeps_its_slot_until_it_ends(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools], limits=Limits(threads=2))
    for ref in ("greet", "fast", "fast-sync"):  # compiled and planned: what follows times the calls alone
        await manager.invoke(ref)
    seconds = 0.5
    late: list[float] = []

    async def spin() -> None:
        started = time.monotonic()
        with pytest.raises(InvocationTimeout):
            await manager.invoke("spin", {"$timeout": seconds}, context={"nonlocals": box})
        late.append(time.monotonic() - started)

    async with anyio.create_task_group() as group:
        for _ in range(3):  # more than the 2 threads: one waits for a slot, and times out waiting
            group.start_soon(spin)
    assert len(late) == 3 and max(late) < seconds + SLACK, late
    assert (await timed(manager.invoke("greet", {"name": "Ada"})))[1] < QUICK
    assert (await timed(manager.invoke("fast")))[1] < QUICK
    with pytest.raises(InvocationError, match="'spin'"):  # both slots are held by stuck threads
        await manager.invoke("fast-sync", {"$timeout": 30})
    box["stop"].set()  # the loops end: the slots come back
    await until_idle(box)
    await until_sync_serves(manager)


async def test_when_every_worker_is_stuck_a_new_sync_call_fails_at_once(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools], limits=Limits(threads=8, stuck_threads=4))  # refused with 4 of 8 slots free
    for ref in ("greet", "fast", "fast-sync"):
        await manager.invoke(ref)

    async def resist() -> None:
        with pytest.raises(InvocationTimeout):
            await manager.invoke("resist", {"$timeout": 0.3}, context={"nonlocals": box})

    with anyio.fail_after(20):
        while box["running"] < 4:  # a thread that did not start before its timeout never runs: call again
            async with anyio.create_task_group() as group:
                for _ in range(4 - box["running"]):
                    group.start_soon(resist)

    started = time.monotonic()
    with pytest.raises(InvocationError) as info:
        await manager.invoke("fast-sync", {"$timeout": 30})
    assert time.monotonic() - started < SLACK  # refused, not queued behind the stuck threads for 30 s
    assert type(info.value) is InvocationError
    assert info.value.tool == "fast-sync" and "'resist'" in str(info.value) and "stuck" in str(info.value)
    assert (await timed(manager.invoke("greet", {"name": "Ada"})))[1] < QUICK
    assert (await timed(manager.invoke("fast")))[1] < QUICK

    box["stop"].set()  # the stuck threads end: their slots come back
    await until_idle(box)
    await until_sync_serves(manager)


async def test_a_thread_waiting_in_c_finishes_unharmed_and_its_worker_serves_on(write, tools: Path, box: dict):
    write_tools(write)
    manager = Manager([tools], limits=Limits(threads=1))
    manager.explain("wait")  # planned now: the 0.2 s below is for its body, not a cold start
    with anyio.fail_after(20):
        while not box["started"].is_set():  # a thread that did not start before its timeout never runs: call again
            with pytest.raises(InvocationTimeout):
                await manager.invoke("wait", {"$timeout": 0.2}, context={"nonlocals": box})
    assert box["running"] == 1  # inside the C call, where nothing can stop it
    with pytest.raises(InvocationError, match="'wait'"):  # its one slot is stuck: refused, not queued
        await manager.invoke("fast-sync", {"$timeout": 30})
    box["gate"].set()
    await until_idle(box)
    assert box["raised"] == [] and box["after"] is True  # it ran to its end; its result was dropped
    await until_sync_serves(manager)  # its slot serves the next calls


# -- the real server: ``toolcascade serve --http`` ----------------------------------------------

SERVED = {
    # The red team's tool, as it was: nothing stops it but the end of the process.
    "spin.py": "def main(ctx):\n    while True:\n        pass\n",
    "resist.py": "def main(ctx):\n    while True:\n        try:\n            spins = 0\n            while True:\n"
    "                spins += 1\n        except BaseException:\n            pass\n",
    "sleep.py": "import time\n\ndef main(ctx):\n    time.sleep(600)\n",
    "greet.md": GREET,
    "fast.py": FAST,
    "fast-sync.py": "def main(ctx):\n    return 'fast sync'\n",
}


def start_server(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """``toolcascade serve --http`` on a free port with the SERVED tools; (process, MCP url)."""
    folder = tmp_path / "served"
    folder.mkdir(exist_ok=True)
    for name, text in SERVED.items():
        (folder / name).write_text(text, encoding="utf-8")
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    command = [sys.executable, "-m", "orchestrator", "serve", "--path", str(folder), "--http", f"127.0.0.1:{port}"]
    process = subprocess.Popen([*command, *options], stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    if not listening(process, port, 30):
        stop(process)
        raise RuntimeError(f"the server did not start: {(tmp_path / 'server.log').read_text()}")
    return process, f"http://127.0.0.1:{port}/mcp"


def text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.slow
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's HTTP client leaves a generator open on trio
async def test_a_served_spinning_tool_times_out_on_time_and_the_server_keeps_answering(tmp_path: Path):
    from mcp import Client

    process, url = start_server(tmp_path, "--max-timeout", "1")
    try:
        with anyio.fail_after(60):
            async with Client(url) as client:
                for name in ("greet", "fast", "fast-sync"):
                    assert not (await client.call_tool(name, {})).is_error
                results: list[tuple[Any, float]] = []

                async def call(name: str) -> None:
                    results.append(await timed(client.call_tool(name, {})))

                async with anyio.create_task_group() as group:
                    for _ in range(6):  # more than Limits.stuck_threads: all start before any is stuck
                        group.start_soon(call, "spin")
                assert all(text(r).startswith("InvocationTimeout:") for r, _ in results)
                assert max(seconds for _, seconds in results) < 1 + SLACK
                for name in ("greet", "fast"):
                    result, seconds = await timed(client.call_tool(name, {}))
                    assert not result.is_error and seconds < QUICK, (name, seconds)

                refused, seconds = await timed(client.call_tool("fast-sync", {}))
                assert text(refused).startswith("InvocationError:") and "stuck" in text(refused)
                assert seconds < SLACK
    finally:
        stop(process)


@pytest.mark.slow
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sigterm_ends_a_server_with_stuck_threads_within_its_grace(tmp_path: Path):
    from mcp import Client

    grace = 2.0
    # Calls in flight would hold the normal shutdown for the whole --max-timeout (60 s).
    process, url = start_server(tmp_path, "--max-timeout", "60", "--grace", str(grace))
    try:
        async with anyio.create_task_group() as group:

            async def call(name: str) -> None:
                try:
                    async with Client(url) as client:
                        await client.call_tool(name, {})
                except Exception:  # the server goes away mid-call: that is the point
                    pass

            for name in ("sleep", "sleep", "resist"):
                group.start_soon(call, name)
            await anyio.sleep(1)  # the calls are in their threads
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = await anyio.to_thread.run_sync(process.wait, 30)
            took = time.monotonic() - started
            group.cancel_scope.cancel()
        assert code == 128 + signal.SIGTERM
        assert grace - 0.5 < took < grace + 5, took
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
