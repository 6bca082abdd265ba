"""Issue 24, finding 7: a listing scales with the folder, and a folder cannot grow without bound.

The red team put 100,000 files in a served folder: every listing took ~40 s
(the bounded caches thrashed) and the first MCP call waited for one. Here:

- a search path holding more than ``Limits.folder_files`` files and folders
  stops ``list_tools``, ``check`` and the ``list``/``check`` commands with a
  ``FolderLimitError`` naming the folder and the limit; a call to a tool in
  a folder within the limit still works (a lookup scans its own folder only);
- every cache bound follows the catalogue, so a warm listing past the
  module's bounds re-parses nothing and drops no cache (the generation
  stays put), counted, not timed;
- a listing on a worker thread and calls on the event loop share one
  registry safely, and the calls do not wait for the listing;
- ``list`` into a pipe prints plain tab-separated rows, not a drawn table.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from click.testing import CliRunner
from freshness_helpers import eager

import orchestrator.caches as caches_module
import orchestrator.cli as cli_module
import orchestrator.folders as folders_module
from orchestrator import ConfigurationError, FolderLimitError, Limits, Manager, OrchestratorError
from orchestrator.check import check
from orchestrator.cli import cli

Write = Callable[[str, str], Path]

SMALL = Limits(folder_files=50)


def many(folder: Path, count: int, start: int = 0) -> None:
    """``count`` markdown tools (a one-line body, no frontmatter) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        (folder / f"t{i:06d}.md").write_text(f"tool {i}\n", encoding="utf-8")


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count parses (the registry's loads of tool files) from now on."""
    counts = {"parses": 0}
    load = folders_module.load_tool

    def counted(*args: object, **kwargs: object) -> object:
        counts["parses"] += 1
        return load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(folders_module, "load_tool", counted)
    return counts


# -- the folder limit -------------------------------------------------------------


def test_a_search_path_past_the_limit_stops_a_listing_naming_the_folder_and_the_limit(tools: Path) -> None:
    many(tools / "crowd", 60)
    manager = Manager([tools], limits=SMALL)
    with pytest.raises(FolderLimitError) as caught:
        manager.list_tools()
    error = caught.value
    assert isinstance(error, ConfigurationError)
    assert error.folder == str(tools.resolve()) and error.limit == 50
    assert str(tools.resolve()) in str(error) and "Limits.folder_files" in str(error)


def test_check_stops_with_the_same_error(tools: Path) -> None:
    many(tools / "crowd", 60)
    with pytest.raises(FolderLimitError) as caught:
        check(Manager([tools], limits=SMALL))
    assert caught.value.folder == str(tools.resolve())


def test_files_and_folders_count_up_to_the_limit_and_no_further(tools: Path) -> None:
    many(tools, 48)
    (tools / "team").mkdir()
    many(tools / "team", 1, start=100)  # 48 files, a folder and a file in it: 50 entries
    assert len(Manager([tools], limits=SMALL).list_tools()) == 49
    many(tools / "team", 1, start=200)  # 51
    with pytest.raises(FolderLimitError):
        Manager([tools], limits=SMALL).list_tools()


@pytest.mark.anyio
async def test_a_call_to_a_tool_in_a_folder_within_the_limit_still_works(tools: Path, write: Write) -> None:
    many(tools / "crowd", 60)
    write("tools/known.md", "---\ndescription: known\n---\nknown body\n")
    manager = Manager([tools], limits=SMALL)
    with pytest.raises(FolderLimitError):
        manager.list_tools()
    assert await manager.invoke("known") == "known body"  # its folder holds 2 entries: scanned, found
    with pytest.raises(FolderLimitError) as caught:
        await manager.invoke("crowd/t000001")  # scanning this folder alone reads past the limit
    assert caught.value.folder == str(tools.resolve() / "crowd")


@pytest.mark.parametrize("command", ["list", "check"])
def test_the_commands_print_one_error_line_naming_the_folder(
    tools: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    many(tools, 60)
    monkeypatch.setattr(cli_module, "Manager", functools.partial(Manager, limits=SMALL))
    result = CliRunner().invoke(cli, [command, "--path", str(tools)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    line = next(line for line in result.stderr.splitlines() if "FolderLimitError" in line)
    assert line.startswith("error: ") and str(tools.resolve()) in line and "Limits.folder_files" in line


# -- cache bounds follow the catalogue ----------------------------------------------


def test_a_warm_listing_past_every_default_bound_redoes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every bound scaled down 64 times (16,384 -> 256 stat signatures, 4,096 -> 64 entries) and 640 tools: the
    # shape of the red team's 100,000 files, where the stat signatures (never raised) emptied every derived cache.
    for name in ("FILES_BOUND", "DERIVED_BOUND"):
        monkeypatch.setattr(caches_module, name, 64)
    monkeypatch.setattr(caches_module, "SEEN_BOUND", 256)
    for f in range(10):
        many(tmp_path / "tools" / f"f{f}", 64, start=f * 64)
    manager = Manager([tmp_path / "tools"])
    manager.registry.freshness.bound = 256  # its bookkeeping, scaled down alike
    counts = counting(monkeypatch)
    assert len(manager.list_tools()) == 640
    assert 640 <= counts["parses"] <= 640 + 50  # each file once (and the built-ins)
    counts["parses"] = 0
    generation = manager.registry.generation
    for _ in range(2):
        assert len(manager.list_tools()) == 640
    assert counts["parses"] == 0
    assert manager.registry.generation == generation  # no cache was dropped: nothing re-planned


# -- a listing on a worker thread ---------------------------------------------------


@pytest.mark.anyio
async def test_calls_run_while_a_listing_runs_on_a_worker_thread(tmp_path: Path, write: Write) -> None:
    many(tmp_path / "tools" / "crowd", 1_500)
    write("tools/known.md", "---\ndescription: known\n---\nknown body\n")
    manager = Manager([tmp_path / "tools"])
    assert await manager.invoke("known") == "known body"
    listed: list[int] = []
    during = 0

    async def listing() -> None:
        listed.append(len(await anyio.to_thread.run_sync(manager.list_tools)))

    async with anyio.create_task_group() as group:
        group.start_soon(listing)
        while not listed:
            assert await manager.invoke("known") == "known body"
            during += 0 if listed else 1
            # Not sleep(0): a loop that never waits keeps the GIL, and the listing's every file stat then waits
            # a switch interval for it (minutes for 1,500 tools). A server's loop waits for its clients.
            await anyio.sleep(0.01)
    assert listed == [1_501]
    assert during >= 1  # a call finished while the listing (seconds of parsing) was still running


@pytest.mark.anyio
async def test_listings_on_two_threads_and_calls_with_edits_share_the_caches_safely(
    tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small bounds, so the caches drop their oldest half again and again while both threads use them.
    for name in ("FILES_BOUND", "DERIVED_BOUND"):
        monkeypatch.setattr(caches_module, name, 32)
    monkeypatch.setattr(caches_module, "SEEN_BOUND", 64)
    many(tmp_path / "tools" / "crowd", 300)
    edited = write("tools/known.md", "---\ndescription: known\n---\nbody 0\n")
    manager = eager(Manager([tmp_path / "tools"]))  # every lookup stats: a stale answer is a race, not latency
    results: list[list[str]] = []
    stale: list[int] = []

    async def listing() -> None:
        for _ in range(3):
            infos = await anyio.to_thread.run_sync(manager.list_tools)
            results.append(sorted(info.ref for info in infos))

    async with anyio.create_task_group() as group:
        group.start_soon(listing)
        group.start_soon(listing)
        for i in range(1, 40):
            stat = edited.stat()
            edited.write_text(f"---\ndescription: known\n---\nbody {i}\n", encoding="utf-8")
            os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
            # Even racing a listing's stat of the same file on another thread, the first lookup sees the edit
            # (issue 26: the thread that saw the change dropped the caches before any lookup may trust its stat).
            seen = await manager.invoke("known")
            if seen != f"body {i}":
                stale.append(i)
            await anyio.sleep(0.005)
    assert stale == []  # never the previous version, not even once
    expected = sorted(["known", *(f"crowd/t{i:06d}" for i in range(300))])
    assert results == [expected] * 6
    assert all(info.error is None for info in manager.list_tools())


def test_a_listing_that_ends_while_another_runs_leaves_the_other_its_folder_cache(tmp_path: Path) -> None:
    many(tmp_path / "tools" / "crowd", 5)
    manager = Manager([tmp_path / "tools"])
    registry = manager.registry
    first = registry.discover(manager.paths, parse=True)
    next(first)  # one listing is running (on another thread, in a server) ...
    second = [ref for ref, _path, _sp in registry.discover(manager.paths, parse=True)]  # ... when another one runs
    assert sum(ref.startswith("crowd/") for ref in second) == 5
    # The first still resolves each folder once; it once found the shared cache gone between its test and its read.
    assert registry.real_folders is not None
    assert registry.exists("crowd/t000003", manager.paths)
    assert len(list(first)) == len(second) - 1
    assert registry.real_folders is None  # the last listing to end drops it


# -- list into a pipe ---------------------------------------------------------------


def test_list_into_a_pipe_prints_plain_tab_separated_rows(tools: Path, write: Write) -> None:
    write("tools/greet.md", "---\ndescription: |\n  Greets someone.\n  On two lines.\n---\nhi\n")
    write("tools/secret.md", "---\ndescription: Not for listing.\nmetadata: {visibility: hidden}\n---\nx\n")
    write("tools/broken.md", "---\nmetadata: [1\n---\nhi\n")
    result = CliRunner().invoke(cli, ["list", "--path", str(tools)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "NAME\tKIND\tDESCRIPTION"
    assert "greet\tmarkdown\tGreets someone. On two lines." in lines  # one line per tool
    broken = next(line for line in lines if line.startswith("broken\t"))
    assert broken.split("\t")[1] == "error" and "broken.md:2" in broken
    assert all(line.count("\t") == 2 for line in lines) and len(lines) == 3
    every = CliRunner().invoke(cli, ["list", "--all", "--path", str(tools)]).stdout.splitlines()
    assert every[0] == "NAME\tKIND\tHIDDEN\tDESCRIPTION"
    assert "secret\tmarkdown\thidden\tNot for listing." in every
    assert "greet\tmarkdown\t\tGreets someone. On two lines." in every


# -- 30,000 files ----------------------------------------------------------------------


@pytest.mark.slow
def test_30000_files_list_warm_without_redoing_anything_and_a_lower_limit_refuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100 folders of 200 tools and 100 other files (resources, notes): 20,000 tools, more than the 16,384 stat
    # signatures the registry held, so every listing emptied every derived cache; the other files are what
    # anyone who can write to the folder adds at no cost to themselves.
    root = tmp_path / "tools"
    for f in range(100):
        folder = root / f"f{f:02d}"
        many(folder, 200, start=f * 1_000)
        for i in range(100):
            (folder / f"note{i:03d}.txt").write_text("x\n", encoding="utf-8")
    manager = Manager([root])
    assert len(manager.list_tools()) == 20_000
    counts = counting(monkeypatch)
    generation = manager.registry.generation
    start = time.process_time()
    assert len(manager.list_tools()) == 20_000
    warm = time.process_time() - start
    assert counts["parses"] == 0 and manager.registry.generation == generation
    assert warm < 10.0  # about 0.2 s here; thrashing caches re-planned every tool, seconds more at this size
    # A lower limit refuses the same folder at once, naming it: counting stops at the limit.
    start = time.process_time()
    with pytest.raises(OrchestratorError) as caught:
        Manager([root], limits=Limits(folder_files=30_000)).list_tools()
    assert isinstance(caught.value, FolderLimitError) and caught.value.folder == str(root.resolve())
    assert time.process_time() - start < 10.0  # a walk of the folders, nothing parsed
