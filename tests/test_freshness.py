"""Freshness: edits are seen through file notifications (or a stat at most every interval), never by
stat-ing every reachable file on every run (issue 11, point 3; R-FIND-3 caches).

Every test edits real files under tmp_path and invokes through ``Manager``.
Waits are bounded (``BOUND`` seconds) and only prove "does not hang":
the behaviour asserted is what the next invocation returns.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from time import monotonic
from typing import Any

import anyio
import pytest
from freshness_helpers import refresh
from heap_helpers import own_heap

import orchestrator.freshness
import orchestrator.planner
import orchestrator.registry
import orchestrator.searchpath
from orchestrator import Manager, ToolNotFoundError
from orchestrator.freshness import INTERVAL, START_AFTER, Freshness, network_mounts

Write = Callable[[str, str], Path]
pytestmark = pytest.mark.anyio

BOUND = 10.0  # seconds any wait below may take before the test fails: never reached when it works
NOOP = "async def main(ctx):\n    return 1\n"


class Clock:
    """A monotonic clock the test moves by hand, so 'within the interval' is exact."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = INTERVAL) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    monkeypatch.setattr(orchestrator.freshness, "monotonic", found)
    return found


@pytest.fixture(autouse=True)
def no_leaked_watchers() -> Iterator[None]:
    """Every watcher thread a test started is gone once its managers are closed or collected.

    Threads alive when the test starts are not its own: a manager an earlier file in this worker left for
    the collector still has its watcher, and the collection below walks only what this test made.
    """
    before = {t.ident for t in threading.enumerate()}
    with own_heap():  # the collection walks what the test made, not the worker's whole heap
        yield
        gc.collect()
    for thread in threading.enumerate():
        if thread.name == "toolcascade-watcher" and thread.ident not in before:
            thread.join(BOUND)
            assert not thread.is_alive(), "a watcher thread outlived its manager"


def wait_sync(check: Callable[[], Any]) -> None:
    """Sleep until ``check()`` is true; fail after BOUND seconds."""
    end = monotonic() + BOUND
    while not check():
        assert monotonic() < end, f"still waiting after {BOUND} s"
        threading.Event().wait(0.01)


async def until(check: Callable[[], Any]) -> Any:
    """Call ``check`` until it returns a true value; fail after BOUND seconds."""
    with anyio.fail_after(BOUND):
        while True:
            value = check()
            if value:
                return value
            await anyio.sleep(0.01)


async def result_until(manager: Manager, ref: str, wanted: Any, args: Any = None) -> None:
    """Invoke ``ref`` until it returns ``wanted`` (each attempt a new invocation); fail after BOUND seconds."""
    with anyio.fail_after(BOUND):
        while True:
            try:
                if await manager.invoke(ref, args) == wanted:
                    return
            except ToolNotFoundError:
                if wanted is ToolNotFoundError:
                    return
            await anyio.sleep(0.01)


@pytest.fixture
async def managed() -> Any:
    """Managers made through this fixture are closed (their watchers stopped) at the end of the test."""
    made: list[Manager] = []

    def make(*args: Any, **kwargs: Any) -> Manager:
        manager = Manager(*args, **kwargs)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.registry.freshness.close()


# -- edits are seen by the next invocation -------------------------------------------


async def twice(manager: Manager, ref: str, wanted: Any) -> None:
    """Two invokes with the same result: the second reuses cached values."""
    assert await manager.invoke(ref) == wanted
    assert await manager.invoke(ref) == wanted


async def started(manager: Manager, ref: str, wanted: Any) -> None:
    """Invoke ``ref`` until the watcher thread is past starting (live, or failed on this machine)."""
    freshness = manager.registry.freshness

    async def settled() -> bool:
        assert await manager.invoke(ref) == wanted
        watcher = freshness._watcher
        return freshness.watching or (watcher is not None and watcher.state == "failed") or not freshness.notify

    with anyio.fail_after(BOUND):
        while not await settled():
            await anyio.sleep(0.01)


async def test_an_edit_is_seen_by_the_next_invoke_within_the_bound(write: Write, tools: Path, managed: Any) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    path.write_text("---\n---\nnew text\n")
    await result_until(manager, "t", "new text")


async def test_an_invoke_after_the_watcher_saw_the_edit_sees_it(write: Write, tools: Path, managed: Any) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await started(manager, "t", "old")
    freshness = manager.registry.freshness
    if not freshness.watching:
        pytest.fail(f"no notifications here: watcher {freshness._watcher and freshness._watcher.state}")
    count = freshness._watcher.count if freshness._watcher else 0
    path.write_text("---\n---\nnew text\n")
    await until(lambda: freshness._watcher is not None and freshness._watcher.count > count)
    # The watcher thread only collected the path: nothing in the registry changed off its thread.
    assert manager.registry._seen[str(path)] != orchestrator.registry.signature(str(path))
    assert await manager.invoke("t") == "new text"


async def test_a_deleted_tool_is_not_found(write: Write, tools: Path, managed: Any) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    path.unlink()
    await result_until(manager, "t", ToolNotFoundError)


async def test_a_new_file_shadowing_a_builtin_takes_over(write: Write, tools: Path, managed: Any) -> None:
    write("tools/t.md", "---\nmetadata:\n  log: true\n---\nbody\n")
    manager = managed([tools])
    await twice(manager, "t", "body")
    write(
        "tools/log.py",
        'frontmatter = {"role": "middleware"}\n\n\nasync def main(ctx):\n'
        "    await ctx.target.manager.next()\n    return 'shadowed'\n",
    )
    await result_until(manager, "t", "shadowed")


async def test_a_tool_in_a_folder_created_later_is_found(write: Write, tools: Path, managed: Any) -> None:
    write("tools/t.md", "---\n---\nbody\n")
    manager = managed([tools])
    await twice(manager, "t", "body")
    with pytest.raises(ToolNotFoundError):
        await manager.invoke("team/deep/x")
    write("tools/team/deep/x.md", "---\n---\nfound\n")
    await result_until(manager, "team/deep/x", "found")


async def test_planning_a_previous_version_of_a_tool_never_changes_what_calls_see(
    write: Write, tools: Path, managed: Any
) -> None:
    """A run still holding a tool's previous version (a long agent run, the run log's writer thread) may plan
    and compile it after an edit: that is its own, and the next call still sees the file as it is now."""
    write("tools/page.md", "---\nmetadata:\n  tag: one\n---\n{{ meta.tag }}\n")
    manager = managed([tools])
    await twice(manager, "page", "one")
    held = manager.find_tool("page")
    write("tools/page.md", "---\nmetadata:\n  tag: two!\n---\n{{ meta.tag }}\n")
    manager.refresh()
    planner = manager.planner
    planner.compiled(held, planner.plan(held, manager.paths), manager.paths, None)
    await twice(manager, "page", "two!")
    assert planner.plan(held, manager.paths).raw.values["tag"] == "one"  # its own plan, as it was


async def test_a_change_seen_while_a_call_compiles_is_not_cached_past_it(
    write: Write, tools: Path, managed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's plan is made, then (before its pipeline is compiled) an edit is seen: that call may finish
    with what it read, but the pipeline compiled from its plan is not what the next call gets."""
    authority = write("tools/AUTHORITY.md", "---\nmetadata:\n  tag: one\n---\n")
    write("tools/page.md", "---\n---\n{{ meta.tag }}\n")
    manager = managed([tools])
    planning = orchestrator.planner.Planner._make_plan
    edited: list[bool] = []

    def plan_then_edit(planner: Any, tool: Any, paths: Any, deps: set[str]) -> Any:
        plan = planning(planner, tool, paths, deps)
        if not edited:  # the authority changes after this plan read it, and the change is seen at once
            edited.append(True)
            authority.write_text("---\nmetadata:\n  tag: two!\n---\n", encoding="utf-8")
            manager.refresh()
        return plan

    monkeypatch.setattr(orchestrator.planner.Planner, "_make_plan", plan_then_edit)
    assert await manager.invoke("page") == "one"  # it started before the edit
    await twice(manager, "page", "two!")


async def test_an_authority_edit_changes_the_cascade(write: Write, tools: Path, managed: Any) -> None:
    authority = write("tools/AUTHORITY.md", "---\nmetadata:\n  greeting: hi\n---\n")
    write("tools/t.md", "---\n---\n{{ meta.greeting }}\n")
    manager = managed([tools])
    await twice(manager, "t", "hi")
    authority.write_text("---\nmetadata:\n  greeting: bye\n---\n")
    await result_until(manager, "t", "bye")


async def test_an_edit_through_a_symlink_is_seen(write: Write, tools: Path, managed: Any) -> None:
    target = write("tools/real/target.md", "---\n---\nold\n")
    (tools / "t.md").symlink_to(target)
    manager = managed([tools])
    await twice(manager, "t", "old")
    target.write_text("---\n---\nnew text\n")
    await result_until(manager, "t", "new text")


# -- the interval, refresh() and clear_cache() ---------------------------------------


async def test_without_notifications_an_edit_is_seen_after_the_interval(
    write: Write, tools: Path, clock: Clock, managed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLCASCADE_WATCH", "off")
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    path.write_text("---\n---\nnew text\n")
    assert await manager.invoke("t") == "old"  # the same interval: the file is not looked at again
    clock.advance()
    assert await manager.invoke("t") == "new text"
    assert manager.registry.freshness._watcher is None  # TOOLCASCADE_WATCH=off: no thread


async def test_refresh_shows_an_edit_to_the_next_invoke_at_once(
    write: Write, tools: Path, clock: Clock, managed: Any
) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    path.write_text("---\n---\nnew text\n")
    refresh(manager)
    assert await manager.invoke("t") == "new text"


async def test_clear_cache_forgets_everything(
    write: Write, tools: Path, clock: Clock, managed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("tools/t.md", "---\n---\nbody\n")
    manager = managed([tools])
    await twice(manager, "t", "body")
    plans = []
    real = orchestrator.planner.Planner._make_plan
    monkeypatch.setattr(orchestrator.planner.Planner, "_make_plan", lambda *a: plans.append(1) or real(*a))
    assert await manager.invoke("t") == "body"
    assert plans == []
    manager.clear_cache()
    assert manager.registry._seen == {} and manager.registry._files == {}
    assert await manager.invoke("t") == "body"
    assert plans


async def test_a_failing_watcher_falls_back_to_the_interval(
    write: Write, tools: Path, clock: Clock, managed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import watchfiles._rust_notify

    def refuse(*args: Any) -> None:
        raise OSError(28, "OS file watch limit reached")

    monkeypatch.setattr(watchfiles._rust_notify, "RustNotify", refuse)
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    clock.advance(START_AFTER)
    await started(manager, "t", "old")
    assert await manager.invoke("t") == "old"  # the next lookup notices the failure
    freshness = manager.registry.freshness
    assert not freshness.watching and not freshness.notify  # failed once: not retried on every run
    path.write_text("---\n---\nnew text\n")
    clock.advance()
    assert await manager.invoke("t") == "new text"


async def test_no_watcher_starts_while_a_listing_runs(write: Write, tools: Path, clock: Clock, managed: Any) -> None:
    """A listing is one long operation: reuses during it start no thread (a one-shot ``list`` starts none)."""
    write("tools/t.md", "---\n---\nold\n")
    write("tools/u.md", "---\n---\nother\n")
    manager = managed([tools])
    await twice(manager, "t", "old")
    clock.advance(START_AFTER)
    freshness = manager.registry.freshness
    listing = manager.registry.discover(manager.paths, parse=True)
    next(listing)
    assert await manager.invoke("t") == "old"  # a reuse START_AFTER after the first lookup, during the listing
    assert freshness._watcher is None
    assert len(list(listing)) >= 1  # the listing ends
    clock.advance()
    await started(manager, "t", "old")  # after it, a reuse starts the watcher as before
    assert freshness._watcher is not None or not freshness.notify


# -- W6: the steady cost does not grow with the reachable graph -----------------------


def write_ring(write: Write, folder: str, size: int) -> Path:
    """``top`` and ``size - 1`` markdown tools naming each other in a ring (as bench/toolsets.py)."""
    top = write(f"{folder}/top.py", 'frontmatter = {"metadata": {"g0": {}}}\n\n\n' + NOOP)
    for i in range(size - 1):
        after = f"g{i + 1}" if i < size - 2 else "top"
        write(f"{folder}/g{i}.md", f"---\nmetadata:\n  {after}: {{}}\n---\nMember {i}.\n")
    return top.parent


class Counter:
    def __init__(self) -> None:
        self.stats = 0
        self.plans = 0


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Counter:
    found = Counter()
    real_stat = os.stat
    real_plan = orchestrator.planner.Planner._make_plan

    def stat(*args: Any, **kwargs: Any) -> Any:
        found.stats += 1
        return real_stat(*args, **kwargs)

    def plan(*args: Any) -> Any:
        found.plans += 1
        return real_plan(*args)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(orchestrator.planner.Planner, "_make_plan", plan)
    return found


def steady_counts(manager: Manager, clock: Clock, counter: Counter) -> tuple[tuple[int, int], int, bool]:
    """(stats, plans) over 20 steady invokes in one interval, stats of the first invoke of the next, live."""
    assert manager.invoke_sync("top") == 1
    clock.advance(START_AFTER)  # a reuse this long after the first lookup starts the watcher
    assert manager.invoke_sync("top") == 1
    freshness = manager.registry.freshness
    watcher = freshness._watcher
    if watcher is not None:
        wait_sync(lambda: watcher.state != "starting")
    clock.advance()  # a new interval: the first invoke in it looks at what needs looking at
    assert manager.invoke_sync("top") == 1
    counter.stats = counter.plans = 0
    for _ in range(20):
        assert manager.invoke_sync("top") == 1
    steady = (counter.stats, counter.plans)
    clock.advance()
    counter.stats = 0
    assert manager.invoke_sync("top") == 1
    swept, live = counter.stats, freshness.watching
    freshness.close()
    return steady, swept, live


@pytest.mark.slow
def test_w6_a_steady_invoke_stats_as_little_for_1000_tools_as_for_10(
    write: Write, clock: Clock, counter: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = steady_counts(Manager([write_ring(write, "ring10", 10)]), clock, counter)
    big = steady_counts(Manager([write_ring(write, "ring1000", 1_000)]), clock, counter)
    assert small[0] == big[0] == (0, 0), (small, big)
    if small[2] and big[2]:
        # Notifications cover the ring: a new interval stats only what lies outside the roots (authorities/).
        assert big[1] == small[1] < 10, (small, big)
    else:  # no notifications on this machine (inotify limit reached): the interval still bounds the cost
        assert big[1] <= 1_100, (small, big)


def test_without_notifications_each_file_is_stat_ed_once_per_interval_not_per_run(
    write: Write, clock: Clock, counter: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLCASCADE_WATCH", "off")
    small = steady_counts(Manager([write_ring(write, "ring10", 10)]), clock, counter)
    big = steady_counts(Manager([write_ring(write, "ring200", 200)]), clock, counter)
    assert small[0] == big[0] == (0, 0), (small, big)
    assert not small[2] and not big[2]
    assert 200 <= big[1] <= 200 + small[1], (small, big)  # the ring's files and folders, each once


# -- the watcher's lifetime -------------------------------------------------------------


async def test_the_watcher_stops_when_the_manager_is_collected(write: Write, tools: Path) -> None:
    write("tools/t.md", "---\n---\nbody\n")
    manager = Manager([tools])
    await started(manager, "t", "body")
    freshness = manager.registry.freshness
    thread = freshness._watcher.thread if freshness._watcher else None
    del manager, freshness
    gc.collect()
    if thread is not None:
        thread.join(BOUND)
        assert not thread.is_alive()


async def test_close_stops_the_watcher_and_edits_are_still_seen(
    write: Write, tools: Path, clock: Clock, managed: Any
) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = managed([tools])
    freshness = manager.registry.freshness
    await twice(manager, "t", "old")
    clock.advance(START_AFTER)
    await started(manager, "t", "old")
    watcher = freshness._watcher
    freshness.close()
    assert watcher is not None and not watcher.thread.is_alive()
    path.write_text("---\n---\nnew text\n")
    clock.advance()
    assert await manager.invoke("t") == "new text"
    assert freshness._watcher is watcher  # closed for good: no new thread


def test_builtin_folders_of_an_installed_package_are_never_watched(tools: Path) -> None:
    manager = Manager([tools], watch_builtins=False)
    builtin = manager.paths[-1].folder
    assert builtin not in manager.registry.freshness.roots
    assert manager.registry.freshness.covers(os.path.join(builtin, "execute.py"))  # never stat-ed
    assert str(tools) in manager.registry.freshness.roots


def test_nested_and_frozen_roots_are_watched_once(tmp_path: Path) -> None:
    inner = tmp_path / "a" / "b"
    freshness = Freshness([str(tmp_path / "a"), str(inner), "/frozen/tools"], ("/frozen/tools",))
    assert freshness.roots == (str(tmp_path / "a"),)


def test_a_root_on_a_network_file_system_is_not_watched(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text(
        "/dev/sda1 / ext4 rw 0 0\nserver:/export /mnt/share nfs4 rw 0 0\nbad line\n/dev/sdb1 /mnt/share/local ext4 rw 0 0\n"
    )
    roots = ["/home/me/tools", "/mnt/share/tools", "/mnt/share/local/tools", "/mnt/shared"]
    assert network_mounts(roots, str(table)) == {"/mnt/share/tools"}
    assert network_mounts(roots, str(tmp_path / "missing")) == set()


async def test_a_search_path_that_does_not_exist_yet_is_followed(write: Write, tmp_path: Path, managed: Any) -> None:
    later = tmp_path / "later"
    write("tools/t.md", "---\n---\nbody\n")
    manager = managed([later, tmp_path / "tools"])
    await twice(manager, "t", "body")
    write("later/t.md", "---\n---\nfrom later\n")
    await result_until(manager, "t", "from later")


# -- end to end: the CLI and an MCP server ---------------------------------------------


async def test_an_mcp_server_serves_an_edited_tool(write: Write, tools: Path) -> None:
    from mcp import Client

    from orchestrator.mcp import build_server

    path = write("tools/t.md", "---\ndescription: A tool.\n---\nold\n")
    manager = Manager([tools])
    server = build_server(manager, poll_interval=0.05)
    try:
        with anyio.fail_after(BOUND):
            async with Client(server, mode="legacy") as client:
                first = await client.call_tool("t", {})
                assert first.content[0].text == "old"
                path.write_text("---\ndescription: A tool.\n---\nnew text\n")
                while (await client.call_tool("t", {})).content[0].text != "new text":
                    await anyio.sleep(0.01)
    finally:
        manager.registry.freshness.close()


def test_the_cli_runs_the_file_as_it_is_now(write: Write, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write("tools/t.md", "---\n---\nold\n")
    command = [sys.executable, "-m", "orchestrator", "run", "t"]
    first = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert first.stdout.strip() == "old", first.stderr
    path.write_text("---\n---\nnew text\n")
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert again.stdout.strip() == "new text", again.stderr


def test_a_forked_child_follows_edits_without_its_parents_thread(write: Write, tools: Path) -> None:
    path = write("tools/t.md", "---\n---\nold\n")
    manager = Manager([tools])
    freshness = manager.registry.freshness
    wait_sync(lambda: manager.invoke_sync("t") == "old" and (freshness.watching or not freshness.notify))
    read, written = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its registry believed a watcher covered the files, but no thread came along
        try:
            path.write_text("---\n---\nnew text\n")
            end = monotonic() + BOUND
            while manager.invoke_sync("t") != "new text" and monotonic() < end:
                threading.Event().wait(0.01)
            os.write(written, manager.invoke_sync("t").encode())
        finally:
            os._exit(0)
    os.close(written)
    os.waitpid(child, 0)
    with os.fdopen(read) as got:
        assert got.read() == "new text"
    freshness.close()


def test_a_change_reported_while_refresh_stats_is_not_lost(tmp_path: Path) -> None:
    """A burst the watcher hands over while ``everything`` stats is applied by the next lookup, not dropped."""
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("a")
    second.write_text("b")
    freshness = Freshness([str(tmp_path)], notify=True)
    freshness.start()
    try:
        watcher = freshness._watcher
        assert watcher is not None
        deadline = monotonic() + 10
        while watcher.state != orchestrator.freshness.LIVE and monotonic() < deadline:
            threading.Event().wait(0.01)
        seen: dict[str, Any] = {str(first): orchestrator.searchpath.signature(str(first))}
        seen[str(second)] = orchestrator.searchpath.signature(str(second))
        assert freshness.settle(seen, 0, orchestrator.searchpath.signature)  # goes live: nothing changed yet

        def look(path: str) -> Any:
            if path == str(first):  # b.md was stat-ed already; now it is edited, and the edit reported
                os.utime(second, ns=(1, 1))
                with watcher.lock:
                    watcher.changes.add(str(second))
                    watcher.count += 1
            return orchestrator.searchpath.signature(path)

        seen = {str(second): seen[str(second)], str(first): seen[str(first)]}  # stat-ed in this order
        assert freshness.everything(seen, look)  # it stat-ed b.md before the edit
        assert freshness.settle(seen, 0, orchestrator.searchpath.signature) is False  # the report is applied
        assert seen[str(second)] == orchestrator.searchpath.signature(str(second))
    finally:
        freshness.close()
