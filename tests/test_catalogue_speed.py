"""Issue 24, listing speed over large catalogues: the shortcuts a listing takes give the answers the long way gives.

The figures are measured in ``bench/catalog.py --cpu``; these tests hold the
shortcuts to their meaning, with real files (and symlinks) in ``tmp_path``.
"""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest

from orchestrator.collector import paused
from orchestrator.folders import real_paths


def test_real_paths_resolve_as_path_resolve_does(tmp_path: Path) -> None:
    (tmp_path / "tools" / "team").mkdir(parents=True)
    plain = tmp_path / "tools" / "team" / "a.md"
    plain.write_text("a\n")
    missing = tmp_path / "tools" / "gone.md"
    dotted = tmp_path / "tools" / "team" / ".." / "team" / "a.md"
    paths = [plain, None, missing, dotted, tmp_path / "tools" / "team" / "."]
    assert real_paths(paths) == [None if p is None else str(p.resolve()) for p in paths]


def test_real_paths_of_a_missing_folder_and_relative_paths(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "a.md").write_text("a\n")
    (tmp_path / "b.md").symlink_to(tmp_path / "tools" / "a.md")
    monkeypatch.chdir(tmp_path)
    paths = [tmp_path / "nowhere" / "x.md", Path("b.md"), Path("tools/a.md"), Path("a.md")]
    found = real_paths(paths)
    assert found == [str(p.resolve()) for p in paths]
    assert found[1] == found[2]  # the symlink in the working folder (read by its own listing) is followed


def test_real_paths_follow_a_symlinked_file_and_a_symlinked_folder(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "t.md").write_text("t\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "link.md").symlink_to(tmp_path / "shared" / "t.md")
    (tmp_path / "tools" / "folder").symlink_to(tmp_path / "shared", target_is_directory=True)
    paths = [tmp_path / "tools" / "link.md", tmp_path / "tools" / "folder" / "t.md", tmp_path / "shared" / "t.md"]
    found = real_paths(paths)
    assert found == [str(p.resolve()) for p in paths]
    assert len(set(found)) == 1  # one file reached three ways: a listing shows it once


# -- the collector, paused while a listing builds its heap (orchestrator.collector) ----------------------


def test_a_pause_turns_the_collector_off_and_back_on() -> None:
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()


def test_a_pause_leaves_a_collector_that_was_off_off() -> None:
    gc.disable()
    try:
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pause_ends_even_when_its_block_raises() -> None:
    with pytest.raises(ValueError), paused():
        raise ValueError("a listing failed")
    assert gc.isenabled()


def test_the_collector_comes_back_when_the_last_of_two_threads_pauses_ends() -> None:
    first_in, second_in, first_may_leave, first_left = (threading.Event() for _ in range(4))
    states: list[bool] = []

    def first() -> None:
        with paused():
            first_in.set()
            first_may_leave.wait(5)
        first_left.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with paused():
        second_in.set()
        first_may_leave.set()
        first_left.wait(5)
        states.append(gc.isenabled())  # the first pause ended, this one has not
    thread.join(5)
    states.append(gc.isenabled())
    assert states == [False, True]


def test_what_a_pause_made_is_in_the_oldest_generation_after_it() -> None:
    # The young generations' passes after a pause would walk all of it, to promote what the caches keep.
    with paused():
        kept = [[n] for n in range(1000)]  # lists: always tracked (a dict of ints is not)
    young = {id(o) for o in gc.get_objects(generation=0)} | {id(o) for o in gc.get_objects(generation=1)}
    assert not young & {id(o) for o in kept}
    assert any(o is kept[0] for o in gc.get_objects(generation=2))


def test_a_cycle_made_in_a_pause_is_collected_after_it() -> None:
    class Node:
        pass

    with paused():
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        gone = weakref.ref(node)
        del node
    assert gone() is not None  # not collected in the pause
    gc.collect()
    assert gone() is None


# -- the catalogue bench/catalog.py --cpu measures -----------------------------------------------------


def test_the_benchmarks_catalogue_lists_every_tool_and_checks_clean(tmp_path: Path, monkeypatch) -> None:
    # A broken generated tool would be listed as an error row, and the figures would time error paths.
    from bench.catalog import write_trust_catalog
    from orchestrator import Manager
    from orchestrator.check import check

    monkeypatch.setenv("TOOLCASCADE_CACHE", str(tmp_path / "cache"))
    catalog = write_trust_catalog(tmp_path / "catalog", 40, 4)
    infos = Manager([catalog]).list_tools()
    assert sorted(info.ref for info in infos) == sorted(
        f"group{f:02d}/tool{t:03d}" for f in range(4) for t in range(10)
    )
    assert [info for info in infos if info.error is not None] == []
    assert {info.kind for info in infos} == {"markdown", "python"}
    assert infos[0].params["required"] == ["topic"]
    assert check(Manager([catalog])) == []
