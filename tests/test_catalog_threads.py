"""One Manager shared by many threads over a catalogue past every cache bound (issue 26, point 1).

A web app shares one Manager between its request threads, and sync tool
bodies run in worker threads that may call ``ctx.manager``. Past the
4,096-file bound the registry trims its caches, and the freshness
bookkeeping empties its own; with eight threads calling ``invoke_sync`` while
another rewrites files (same content, a new mtime) and calls ``refresh()``,
every call must return its own tool's answer: no raw ``KeyError``, no
``RuntimeError: dictionary changed size during iteration``, no wrong result.

Scaled to a CI machine: 9,000 tools, 8 callers, ``SECONDS`` of calls (the
issue's soak is 30 s; ``TOOLCASCADE_SOAK`` sets it), and every bound divided
by 32, so the calls a busy machine makes in that time (hundreds, mostly cold) trim
the caches again and again, as 30 s at the full bounds does.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import orchestrator.caches as caches_module
from orchestrator import Manager

TOOLS = 9_000
FOLDERS = 90
CALLERS = 8
SECONDS = float(os.environ.get("TOOLCASCADE_SOAK", "10"))


def ref(i: int) -> str:
    return f"f{i % FOLDERS:02d}/t{i:05d}"


def catalogue(root: Path) -> list[Path]:
    """``TOOLS`` markdown tools, each answering its own number, in ``FOLDERS`` folders."""
    files = []
    for f in range(FOLDERS):
        (root / f"f{f:02d}").mkdir(parents=True)
    for i in range(TOOLS):
        path = root / f"{ref(i)}.md"
        path.write_text(f"tool {i}\n", encoding="utf-8")
        files.append(path)
    return files


@pytest.fixture
def switching() -> Iterator[None]:
    """Switch threads often: races that take minutes at the default interval show within seconds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


@pytest.mark.slow
def test_threads_sharing_one_manager_past_every_bound_get_their_own_answers(
    tmp_path: Path, switching: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FILES_BOUND", "DERIVED_BOUND"):
        monkeypatch.setattr(caches_module, name, 128)
    monkeypatch.setattr(caches_module, "SEEN_BOUND", 512)
    files = catalogue(tmp_path / "tools")
    manager = Manager([tmp_path / "tools"])
    manager.registry.freshness.bound = 512
    stop = threading.Event()
    raw: list[BaseException] = []
    wrong: list[tuple[str, object]] = []
    calls = [0] * CALLERS
    rewrites = [0]

    def call(slot: int) -> None:
        pick = random.Random(slot)
        while not stop.is_set():
            i = pick.randrange(TOOLS)
            try:
                got = manager.invoke_sync(ref(i))
            except BaseException as exc:  # noqa: BLE001  (every exception is a finding: raw or typed)
                raw.append(exc)
                continue
            if got != f"tool {i}":
                wrong.append((ref(i), got))
            calls[slot] += 1

    def rewrite() -> None:
        pick = random.Random(-1)
        while not stop.is_set():
            for path in pick.sample(files, 20):
                # Saved as editors save: a new file moved over the old one, so a caller
                # reads the old text or the new, never a half-written (empty) file.
                stat = path.stat()
                saved = tmp_path / "saving.md"
                saved.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
                os.utime(saved, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
                os.replace(saved, path)
            try:
                manager.refresh()
            except BaseException as exc:  # noqa: BLE001
                raw.append(exc)
            rewrites[0] += 1
            time.sleep(0.05)

    threads = [threading.Thread(target=call, args=(slot,)) for slot in range(CALLERS)]
    threads.append(threading.Thread(target=rewrite))
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline and not raw:
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        manager.close()
    assert [f"{type(exc).__name__}: {exc}" for exc in raw[:5]] == [], f"{len(raw)} exceptions"
    assert wrong[:5] == [], f"{len(wrong)} wrong results"
    assert all(calls) and rewrites[0]  # every thread called, files were rewritten meanwhile
