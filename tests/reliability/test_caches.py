"""Every cache has a size bound, and a full cache never serves a stale value.

Callers choose refs (and so the folders looked up), so the registry's caches
and the sorted-chain cache are bounded: ``FILES_BOUND`` parsed files,
``SEEN_BOUND`` stat signatures, ``DERIVED_BOUND`` entries per derived cache,
``SHAPE_CACHE_*`` for sorted chains.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from freshness_helpers import refresh

from orchestrator import Entry, Manager, ToolNotFoundError, caches, ordering
from orchestrator.authorities import DEFAULT_PHASES
from orchestrator.registry import Registry

pytestmark = pytest.mark.anyio

Write = Callable[[str, str], Path]


def bump(path: Path, text: str) -> None:
    """Rewrite a file so that its mtime surely changes."""
    stat = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))


def sizes(reg: Registry) -> dict[str, int]:
    return {"files": len(reg._files), "seen": len(reg._seen), **{k: len(v) for k, v in reg.derived.items()}}


def within_bounds(reg: Registry) -> bool:
    found = sizes(reg)
    derived = [n for name, n in found.items() if name not in ("files", "seen")]
    return (  # the module's bounds, read now: a test may have patched them down
        found["files"] <= caches.FILES_BOUND
        and found["seen"] <= caches.SEEN_BOUND
        and all(n <= caches.DERIVED_BOUND for n in derived)
    )


def deps_are_remembered(reg: Registry) -> bool:
    """The invariant that keeps derived values fresh: every path they depend on has a signature."""
    for cache in reg.derived.values():
        for entry in cache.values():
            if len(entry) != 3:
                continue  # not a memo entry ([value, deps, run])
            watched = {p for p in entry[1] if not (p in reg.frozen or p.startswith(reg._frozen_below))}
            if not watched <= reg._seen.keys():
                return False
    return True


MISSES = 2_000  # distinct missing refs: several times every bound below, as 20,000 were for the real bounds


@pytest.mark.slow
# The caches sit beside the event loop, not in it: the misses run on one backend.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_distinct_missing_refs_past_every_bound_keep_every_cache_bounded(
    write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MISSES distinct missing refs against bounds patched down: each bound is crossed several times.

    The bounds are read when the Manager is made, so the patch applies to
    this one. With the real bounds (4,096 and 16,384) it took 20,000 misses
    to cross them (the stat signatures emptied 3 times, the ref cache
    trimmed 6); 2,000 misses cross these 5 and 11 times.
    """
    monkeypatch.setattr(caches, "DERIVED_BOUND", 256)
    monkeypatch.setattr(caches, "SEEN_BOUND", 1_024)
    write("tools/real.md", "---\ndescription: real\n---\nreal body\n")
    manager = Manager([tools])
    reg = manager.registry
    assert await manager.invoke("real") == "real body"
    peak = {name: 0 for name in sizes(reg)}
    for i in range(MISSES):
        # Every other ref names its own folder: new stat signatures as well as new cache keys.
        ref = f"folder{i}/missing" if i % 2 else f"missing{i}"
        with pytest.raises(ToolNotFoundError):
            await manager.invoke(ref)
        if i % 50 == 0:
            assert within_bounds(reg), sizes(reg)
            peak = {name: max(peak[name], n) for name, n in sizes(reg).items()}
    assert within_bounds(reg), sizes(reg)
    assert MISSES > caches.DERIVED_BOUND and MISSES > caches.SEEN_BOUND // 2  # the bounds were reached
    assert peak["refs"] > caches.DERIVED_BOUND // 2
    assert deps_are_remembered(reg)
    assert await manager.invoke("real") == "real body"


async def test_a_full_seen_cache_still_notices_edits(
    write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(caches, "SEEN_BOUND", 8)
    tool = write("tools/t.md", "---\ndescription: t\n---\none\n")
    manager = Manager([tools])
    assert await manager.invoke("t") == "one"
    for i in range(40):  # empties _seen (and every derived cache) several times
        with pytest.raises(ToolNotFoundError):
            await manager.invoke(f"d{i}/missing")
        assert len(manager.registry._seen) <= 8
        assert deps_are_remembered(manager.registry)
    assert await manager.invoke("t") == "one"
    bump(tool, "---\ndescription: t\n---\ntwo\n")
    assert await manager.invoke("t") == "two"


async def test_a_run_that_overflows_seen_keeps_the_invariant(
    write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(caches, "SEEN_BOUND", 4)
    write("tools/inner.md", "---\ndescription: inner\n---\ninner\n")
    write(
        "tools/outer.py",
        "async def main(ctx):\n"
        "    for i in range(10):\n"
        "        try:\n"
        "            await ctx.manager.invoke(f'd{i}/missing')\n"
        "        except Exception:\n"
        "            pass\n"
        "    return await ctx.manager.invoke('inner')\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("outer") == "inner"
    assert deps_are_remembered(manager.registry)
    inner = tools / "inner.md"
    bump(inner, "---\ndescription: inner\n---\nedited\n")
    assert await manager.invoke("outer") == "edited"


async def test_parsed_files_are_bounded_and_reparsed_after_eviction(
    write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(caches, "FILES_BOUND", 16)
    for i in range(40):
        write(f"tools/t{i}.md", f"---\ndescription: t{i}\n---\nbody {i}\n")
    manager = Manager([tools])
    for _ in range(2):
        for i in range(40):
            assert await manager.invoke(f"t{i}") == f"body {i}"
            assert len(manager.registry._files) <= 16
    bump(tools / "t0.md", "---\ndescription: t0\n---\nedited\n")
    refresh(manager)
    assert await manager.invoke("t0") == "edited"


async def test_derived_caches_are_bounded(write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caches, "DERIVED_BOUND", 10)
    for i in range(30):
        write(f"tools/t{i}.md", f"---\ndescription: t{i}\n---\nbody {i}\n")
    manager = Manager([tools])
    for _ in range(2):
        for i in range(30):
            assert await manager.invoke(f"t{i}") == f"body {i}"
            assert all(len(cache) <= 10 for cache in manager.registry.derived.values())


def test_only_small_chains_are_kept_in_the_sorted_chain_cache() -> None:
    assert ordering._sorted_indexes.cache_parameters()["maxsize"] == ordering.SHAPE_CACHE_SIZE
    many = [Entry(f"m{i}", after=(f"m{i - 1}",) if i else ()) for i in range(ordering.SHAPE_CACHE_ENTRIES + 1)]
    before = ordering._sorted_indexes.cache_info().currsize
    for _ in range(3):
        assert [e.name for e in ordering.sort_entries(list(reversed(many)), DEFAULT_PHASES)] == [e.name for e in many]
    assert ordering._sorted_indexes.cache_info().currsize == before
    long_name = [Entry("x" * (ordering.SHAPE_CACHE_CHARS + 1)), Entry("y")]
    assert [e.name for e in ordering.sort_entries(long_name, DEFAULT_PHASES)] == [long_name[0].name, "y"]
    assert ordering._sorted_indexes.cache_info().currsize == before
    small = [Entry("b", after=("a",)), Entry("a")]
    assert [e.name for e in ordering.sort_entries(small, DEFAULT_PHASES)] == ["a", "b"]
    assert ordering._sorted_indexes.cache_info().currsize <= ordering.SHAPE_CACHE_SIZE
