"""Faults: tool files edited while invocations run, and callers cancelled mid-invocation.

Edits: a writer thread rewrites a markdown template tool, a python tool and
the ``AUTHORITY.md`` above them, and adds and deletes a fourth tool, while
400 invocations start over time on the event loop. Each file carries a
version in its text (all versions of one file have the same size, as when a
constant is edited), so every result names exactly which version of each file
it saw. The writer runs in a thread so that the file system changes between
any two steps of the engine's synchronous lookup code, not only at awaits.

Cancellation: cancelling the caller while 100 invocations sit inside
middleware and tool bodies runs every ``finally`` and leaves no task behind.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from freshness_helpers import refresh

from orchestrator import Manager, ToolDefinitionError, ToolNotFoundError

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Started one after another, INTERVAL apart, while the writer edits: at least 2 s of calls, so at
# least ~90 edits (> 50 asserted) on the fastest machine, each overlapped by a few calls.
INVOCATIONS = 400
INTERVAL = 0.005  # seconds between two invocation starts
WRITE_PAUSE = 0.02  # seconds between two edits: longer than a coarse file-system timestamp tick
CANCELLED = 100  # invocations in flight when their caller is cancelled
LIMIT = 120  # seconds any one test may take: proves "does not hang"

PAGE = """---
description: A page.
metadata:
  params: {{type: object, properties: {{id: {{type: integer}}}}, required: [id]}}
---
page v{version:03d} {{{{ args.id }}}} {{{{ meta.get("tag", "none") }}}}
"""

CALC = """VERSION = "v{version:03d}"
frontmatter = {{"metadata": {{"params": {{"type": "object", "properties": {{"id": {{"type": "integer"}}}}}}}}}}


def main(ctx):
    return f"calc {{VERSION}} {{ctx.args['id']}} {{ctx.meta.get('tag', 'none')}}"
"""

EXTRA = """---
description: Comes and goes.
---
extra v{version:03d} {{{{ args.id }}}}
"""

AUTHORITY = """---
metadata:
  tag: a{version:03d}
---
"""

RESULT = re.compile(r"(page|calc|extra) v(\d{3}) (\d+)(?: (none|a\d{3}))?")


class Writer:
    """Edits the files of ``folder`` in a thread, recording what is on disk after each edit.

    ``done[file]`` is the version last completely written (``None``: deleted);
    ``authority`` lists every state ``AUTHORITY.md`` went through, in order.
    """

    def __init__(self, folder: Path, atomic: bool) -> None:
        self.folder = folder
        self.atomic = atomic
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.done: dict[str, int | None] = {}
        self.authority: list[str] = []  # tag values ("none" when deleted), one per edit
        self.edits = 0
        self.put("page.md", PAGE, 0)
        self.put("calc.py", CALC, 0)
        self.put("AUTHORITY.md", AUTHORITY, 0)
        self.remove("extra.md")

    def put(self, name: str, template: str, version: int) -> None:
        path = self.folder / name
        text = template.format(version=version)
        if self.atomic:
            temp = self.folder / f".{name}.tmp"
            temp.write_text(text, encoding="utf-8")
            os.replace(temp, path)
        else:
            path.write_text(text, encoding="utf-8")  # truncates, then writes: readers may see it half done
        self.record(name, version)

    def remove(self, name: str) -> None:
        (self.folder / name).unlink(missing_ok=True)
        self.record(name, None)

    def record(self, name: str, version: int | None) -> None:
        with self.lock:
            self.done[name] = version
            if name == "AUTHORITY.md":
                self.authority.append("none" if version is None else f"a{version:03d}")

    def snapshot(self) -> tuple[dict[str, int | None], int]:
        """What is on disk now: the versions, and how many authority states there have been."""
        with self.lock:
            return dict(self.done), len(self.authority)

    def run(self) -> None:
        """Edit until ``stop`` is set: page, calc, the authority (sometimes deleted), extra (added or deleted).

        Versions are three digits, so the writer stops on its own at 999.
        """
        version = 0
        while not self.stop.is_set() and version < 999:
            version += 1
            step = version % 4
            if step == 0:
                self.put("page.md", PAGE, version)
            elif step == 1:
                self.put("calc.py", CALC, version)
            elif step == 2:
                if version % 3 == 0:
                    self.remove("AUTHORITY.md")
                else:
                    self.put("AUTHORITY.md", AUTHORITY, version)
            elif version % 8 == 3:
                self.put("extra.md", EXTRA, version)
            else:
                self.remove("extra.md")
            self.edits += 1
            time.sleep(WRITE_PAUSE)


@pytest.fixture
def bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's default: imports write ``__pycache__`` (the test environment may turn it off)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


async def invoke_while_editing(tools: Path, atomic: bool) -> tuple[Writer, Manager, list[tuple[Any, ...]]]:
    """Run INVOCATIONS calls, spread over time, while a Writer edits ``tools/team``.

    Returns the writer, the manager and, per call, (ref, id, what was on disk
    when it started, authority states so far, result or exception).
    """
    folder = tools / "team"
    folder.mkdir(parents=True)
    writer = Writer(folder, atomic)
    manager = Manager([tools])
    refs = ("team/page", "team/calc", "team/extra")
    outcomes: list[tuple[Any, ...]] = []

    async def one(i: int) -> None:
        ref = refs[i % 3]
        before, states = writer.snapshot()
        refresh(manager)  # the writer's edits are the program's own: it says so (else seen within the interval)
        try:
            outcome: Any = await manager.invoke(ref, {"id": i})
        except Exception as exc:  # judged below, with everything else
            outcome = exc
        outcomes.append((ref, i, before, states, outcome))

    async def edit() -> None:
        await anyio.to_thread.run_sync(writer.run)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(edit)
            async with anyio.create_task_group() as calls:
                for i in range(INVOCATIONS):
                    calls.start_soon(one, i)
                    await anyio.sleep(INTERVAL)
            writer.stop.set()
    return writer, manager, outcomes


def parse(ref: str, i: int, result: Any) -> tuple[int, str | None]:
    """(version, tag) from a result, which must be exactly one version's output for call ``i``."""
    match = RESULT.fullmatch(result) if isinstance(result, str) else None
    assert match is not None, f"{ref} call {i}: not a valid version's output: {result!r}"
    kind, version, seen_id, tag = match.groups()
    assert (kind, int(seen_id)) == (ref.split("/")[1], i), f"{ref} call {i}: {result!r}"
    assert (tag is None) == (kind == "extra"), f"{ref} call {i}: {result!r}"
    return int(version), tag


async def recovered(manager: Manager, writer: Writer) -> None:
    """After the writer stopped, every tool gives its final version, with the final authority."""
    done, _ = writer.snapshot()
    refresh(manager)
    tag = writer.authority[-1]
    assert await manager.invoke("team/page", {"id": 7}) == f"page v{done['page.md']:03d} 7 {tag}"
    assert await manager.invoke("team/calc", {"id": 7}) == f"calc v{done['calc.py']:03d} 7 {tag}"
    if done["extra.md"] is None:
        with pytest.raises(ToolNotFoundError):
            await manager.invoke("team/extra", {"id": 7})
    else:
        assert await manager.invoke("team/extra", {"id": 7}) == f"extra v{done['extra.md']:03d} 7"


async def test_edits_while_running_atomic_writes_are_seen_whole_and_fresh(tools, bytecode):
    """os.replace edits: every call sees one whole version of each file, at least as new as when it started."""
    writer, manager, outcomes = await invoke_while_editing(tools, atomic=True)
    assert len(outcomes) == INVOCATIONS
    assert writer.edits > 50, writer.edits  # the calls really overlapped many edits
    for ref, i, before, states, outcome in outcomes:
        file = ref.split("/")[1] + (".py" if ref.endswith("calc") else ".md")
        if isinstance(outcome, ToolNotFoundError) and ref == "team/extra":
            continue  # deleted: a clean not-found
        assert not isinstance(outcome, BaseException), f"{ref} call {i} raised {outcome!r}"
        version, tag = parse(ref, i, outcome)
        floor = before[file]
        if floor is not None:  # what was on disk when the call started, or newer
            assert version >= floor, f"{ref} call {i}: v{version} after v{floor} was written"
        if tag is not None:  # an authority state written before the call started, or later
            assert tag in writer.authority[states - 1 :], f"{ref} call {i}: stale authority {tag}"
    await recovered(manager, writer)


async def test_edits_while_running_non_atomic_writes_recover(tools, bytecode):
    """Truncate-and-write edits: a call may see a half-written file, but the cache recovers afterwards."""
    writer, manager, outcomes = await invoke_while_editing(tools, atomic=False)
    assert len(outcomes) == INVOCATIONS
    assert writer.edits > 50, writer.edits
    for ref, i, _before, _states, outcome in outcomes:
        if isinstance(outcome, ToolNotFoundError) and ref == "team/extra":
            continue
        if isinstance(outcome, ToolDefinitionError):
            continue  # an empty or half-written file, reported as such
        assert not isinstance(outcome, BaseException), f"{ref} call {i} raised {outcome!r}"
        parse(ref, i, outcome)
    await recovered(manager, writer)


# -- cancellation -------------------------------------------------------------------------

# Two metadata middleware around a body that waits forever; each counts its
# entries and its finally blocks on a probe passed in through the context.
GUARD = """
import anyio

async def main(ctx):
    target = ctx.target
    probe = target.locals["probe"]
    probe.enter("{name}")
    try:
        await anyio.sleep(0)
        if "{name}" == "inner" and target.args["id"] % 2 == 0:
            probe.park()  # half the calls wait here, inside middleware, and never reach the body
            await anyio.sleep_forever()
        return await target.manager.next()
    finally:
        probe.exit("{name}")
"""

SLEEPER = """
import anyio

frontmatter = {"metadata": {"outer": {}, "inner": {}, "$order": {"inner": {"after": ["outer"]}}}}

async def main(ctx):
    probe = ctx.locals["probe"]
    probe.enter("body")
    try:
        probe.park()
        await anyio.sleep_forever()
    finally:
        probe.exit("body")
"""


class Probe:
    """Counts entries and finally blocks per place; ``ready`` is set once ``expected`` calls are parked."""

    def __init__(self, expected: int) -> None:
        self.entered: dict[str, int] = {}
        self.exited: dict[str, int] = {}
        self.parked = 0
        self.expected = expected
        self.ready = anyio.Event()

    def enter(self, where: str) -> None:
        self.entered[where] = self.entered.get(where, 0) + 1

    def park(self) -> None:
        self.parked += 1
        if self.parked == self.expected:
            self.ready.set()

    def exit(self, where: str) -> None:
        self.exited[where] = self.exited.get(where, 0) + 1


def live_tasks(backend: str) -> set[Any]:
    """Every task of the running event loop: asyncio's ``all_tasks``, or trio's whole task tree."""
    if backend == "asyncio":
        import asyncio

        return set(asyncio.all_tasks())
    import trio

    found: set[Any] = set()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        found.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


@pytest.fixture
def sleepers(write, tools: Path) -> Path:
    write("tools/outer.py", GUARD.replace("{name}", "outer"))
    write("tools/inner.py", GUARD.replace("{name}", "inner"))
    write("tools/sleeper.py", SLEEPER)
    return tools


@pytest.mark.parametrize("how", ["cancel", "deadline"])
async def test_r_inv_5_cancelled_invocations_run_every_finally_and_leave_no_task(sleepers, how, anyio_backend):
    manager = Manager([sleepers])
    probe = Probe(CANCELLED)
    context = {"locals": {"probe": probe}}
    before = live_tasks(anyio_backend)

    async def call(i: int) -> None:
        await manager.invoke("sleeper", {"id": i}, context=context)

    with anyio.fail_after(LIMIT):
        if how == "cancel":  # the caller cancels its own task group once everything is inside
            async with anyio.create_task_group() as tg:
                for i in range(CANCELLED):
                    tg.start_soon(call, i)
                await probe.ready.wait()
                tg.cancel_scope.cancel()
        else:  # a deadline around the caller's task group, due once everything is inside
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    for i in range(CANCELLED):
                        tg.start_soon(call, i)
                    await probe.ready.wait()
                    scope.deadline = anyio.current_time() + 0.05
                    await anyio.sleep_forever()
            assert scope.cancelled_caught
    assert probe.entered == {"outer": CANCELLED, "inner": CANCELLED, "body": CANCELLED // 2}
    assert probe.exited == probe.entered  # every finally ran
    assert live_tasks(anyio_backend) == before

    # the manager is unharmed: the same tool runs again, to its body
    probe.expected, probe.ready = CANCELLED + 1, anyio.Event()
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, CANCELLED + 1)  # an odd id: to the body
            await probe.ready.wait()
            tg.cancel_scope.cancel()
    assert probe.exited == probe.entered == {"outer": CANCELLED + 1, "inner": CANCELLED + 1, "body": CANCELLED // 2 + 1}
