"""Session leases cannot be lost silently (issue 24, finding 4).

A run that saves nothing for longer than the lease (a slow tool, an approver
waiting for a person) keeps it: a heartbeat renews it. A run whose lease was
taken over anyway (its process frozen, its store unreachable) is fenced: its
next write is refused with ``SessionLostError`` and nothing of it is stored,
and the run stops. Real SQLite files in tmp_path; the lease made short.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
import yaml

from orchestrator import InvocationError, Manager, sessionlimits, sessions
from orchestrator.errors import SessionLostError
from orchestrator.sessions import MemoryStore, SQLiteStore, Store, check_unchanged, holding

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
LEASE = 0.3  # seconds: every wait below is several leases long
USER = {"role": "user", "content": "mine"}


@pytest.fixture(params=["sqlite", "memory"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def two_stores(kind: str, tmp_path: Path) -> tuple[Store, Store]:
    """Two store objects on one session store, as two programs would have (the memory store is shared)."""
    if kind == "memory":
        shared = MemoryStore()
        return shared, shared
    return SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessionlimits, "LEASE_SECONDS", LEASE)


def agent(write, name: str, script: list, **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    front = yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}, sort_keys=False)
    write(f"tools/{name}.md", f"---\n{front}---\n{{{{ args.message }}}}\n")


def said(message: str, session: str) -> dict:
    return {"message": message, "$context": {"session": session}}


async def test_an_idle_holder_keeps_its_lease_and_a_second_run_waits(kind, tmp_path, short_lease):
    first, second = two_stores(kind, tmp_path)
    with anyio.fail_after(20):
        async with holding(first, "s") as lease:
            await anyio.sleep(LEASE * 4)  # saves nothing for four leases
            with pytest.raises(InvocationError, match="session 's' is in use by another run"):
                async with holding(second, "s", wait=LEASE * 2):
                    pytest.fail("a second run took a session that is still held")
            await first.append("s", [USER], lease=lease)
        async with holding(second, "s", wait=1) as other:  # released at the end of the block: free at once
            await second.append("s", [{"role": "user", "content": "theirs"}], lease=other)
    assert [m["content"] for m in await second.messages("s")] == ["mine", "theirs"]


async def test_a_write_after_a_takeover_is_refused_and_nothing_of_it_is_written(kind, tmp_path, short_lease):
    first, second = two_stores(kind, tmp_path)
    assert await first.acquire("s", "here:1:first")  # no heartbeat: this run's lease lapses
    await first.append("s", [USER], lease="here:1:first")
    await anyio.sleep(LEASE * 2)
    assert await second.acquire("s", "here:1:second")  # another run takes the lapsed lease over
    await second.append("s", [{"role": "user", "content": "theirs"}], lease="here:1:second")
    with pytest.raises(SessionLostError, match="session 's' was taken over by another run") as caught:
        await first.append("s", [{"role": "assistant", "content": "late"}], agent="chat", lease="here:1:first")
    assert caught.value.session == "s" and caught.value.tool == "chat" and caught.value.key == "session"
    with pytest.raises(SessionLostError):
        await first.replace("s", [{"role": "user", "content": "compacted"}], lease="here:1:first")
    assert not await first.renew("s", "here:1:first")
    assert [m["content"] for m in await second.messages("s")] == ["mine", "theirs"]
    info = await second.info("s")
    assert info is not None and info.messages == 2
    await second.release("s", "here:1:second")
    with pytest.raises(SessionLostError):  # a lease released by its new owner is still not the old one's
        await first.append("s", [{"role": "assistant", "content": "later"}], lease="here:1:first")


async def test_a_lapsed_lease_nobody_took_is_still_its_owners(kind, tmp_path, short_lease):
    store, _ = two_stores(kind, tmp_path)
    assert await store.acquire("s", "here:1:first")
    await anyio.sleep(LEASE * 2)
    await store.append("s", [USER], lease="here:1:first")  # nobody else wrote: the write is sound, and renews
    assert not await store.acquire("s", "here:1:second")


async def test_a_write_without_a_lease_is_refused_only_while_another_run_holds_the_session(kind, tmp_path, short_lease):
    store, _ = two_stores(kind, tmp_path)
    await store.append("s", [USER])  # nobody holds it: a program may write by hand
    assert await store.acquire("s", "here:1:run")
    with pytest.raises(InvocationError, match="session 's' is in use by another run") as caught:
        await store.append("s", [{"role": "user", "content": "by hand"}])
    assert not isinstance(caught.value, SessionLostError)
    with pytest.raises(InvocationError, match="in use by another run"):
        await store.replace("s", [])
    assert [m["content"] for m in await store.messages("s")] == ["mine"]
    await anyio.sleep(LEASE * 2)  # the holder stopped renewing: its lease lapsed
    await store.append("s", [{"role": "user", "content": "by hand"}])
    assert len(await store.messages("s")) == 2


async def test_a_resumed_run_finds_out_that_another_run_wrote_its_session_meanwhile(kind, tmp_path):
    store, other = two_stores(kind, tmp_path)
    await store.append("s", [USER, {"role": "assistant", "content": "saved before the pause"}])
    async with holding(store, "s"):
        await check_unchanged(store, "s", 2, agent="chat")  # nobody wrote while it waited: it may go on
    await check_unchanged(store, "new", 0)  # a session nothing was saved to yet
    async with holding(other, "s") as lease:  # another run while the first waits for a person
        await other.append("s", [{"role": "user", "content": "theirs"}], lease=lease)
    async with holding(store, "s"):
        with pytest.raises(SessionLostError, match="written by another run while this run waited") as caught:
            await check_unchanged(store, "s", 2, agent="chat")
    assert caught.value.session == "s" and caught.value.tool == "chat"


async def test_a_dead_processes_lease_is_taken_over_and_its_writes_are_fenced(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    owner = f"{sessions._HOST}:{dead.stdout.strip()}:x"
    assert await store.acquire("s", owner)
    await store.append("s", [{"role": "user", "content": "by hand"}])  # its process is gone: nobody holds it
    with anyio.fail_after(10):
        async with holding(store, "s", wait=5) as lease:  # taken over at once, long before the lease lapses
            await store.append("s", [USER], lease=lease)
    with pytest.raises(SessionLostError):
        await store.append("s", [{"role": "assistant", "content": "ghost"}], lease=owner)
    assert [m["content"] for m in await store.messages("s")] == ["by hand", "mine"]


async def test_a_holder_whose_lease_is_taken_over_is_stopped_with_the_error(kind, tmp_path, short_lease):
    first, second = two_stores(kind, tmp_path)
    reached = []
    with anyio.fail_after(20), pytest.raises(SessionLostError, match="session 's' was taken over"):
        async with holding(first, "s") as lease:
            await first.release("s", lease)  # what a lapse and a takeover look like to the store
            assert await second.acquire("s", "elsewhere:1:second")
            await anyio.sleep(60)  # the heartbeat finds the lease gone and cancels this wait
            reached.append("after the wait")
    assert reached == []
    assert not await second.acquire("s", "elsewhere:1:third")  # the new owner keeps its lease


class Flaky(MemoryStore):
    """A store whose first renewals fail, as a busy SQLite file would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def renew(self, session: str, owner: str) -> bool:
        if self.failures:
            self.failures -= 1
            raise InvocationError("the session store is busy; try again")
        return await super().renew(session, owner)


async def test_a_renewal_that_fails_is_tried_again_at_the_next_beat(short_lease, caplog):
    store = Flaky(failures=1)
    with anyio.fail_after(20):
        async with holding(store, "s") as lease:
            await anyio.sleep(LEASE * 3)  # one beat fails, the next ones renew in time
            assert not await store.acquire("s", "elsewhere:1:second")
            await store.append("s", [USER], lease=lease)
    assert store.failures == 0 and "cannot renew the lease" in caplog.text


async def test_holding_passes_the_blocks_own_errors_and_cancellation_through(kind, tmp_path, short_lease):
    store, other = two_stores(kind, tmp_path)
    with pytest.raises(KeyError):  # as itself, not in an ExceptionGroup
        async with holding(store, "s"):
            raise KeyError("mine")
    with anyio.move_on_after(LEASE) as scope:
        async with holding(store, "s"):
            await anyio.sleep(60)
    assert scope.cancelled_caught
    with anyio.fail_after(5):
        async with holding(other, "s", wait=0):  # both blocks gave the lease back
            pass


async def test_an_agent_with_a_slow_tool_keeps_its_session_from_a_second_run(write, tools, tmp_path, short_lease):
    started = tmp_path / "started"
    slow = f"""
import pathlib
import anyio
async def main(ctx):
    pathlib.Path({str(started)!r}).touch()
    await anyio.sleep({LEASE * 4})
    return 'slept'
"""
    write("tools/slow.py", slow)
    agent(
        write, "chat", [{"calls": [{"name": "slow"}]}, "first", {"calls": [{"name": "slow"}]}, "second"], tools=["slow"]
    )
    db = tmp_path / "s.db"
    answers: list[str] = []

    async def first() -> None:
        answers.append(await Manager([tools], sessions=db).invoke("chat", said("one", "x")))

    async def second() -> None:
        while not started.exists():  # the first run holds the session and is in its slow tool
            await anyio.sleep(0.01)
        await anyio.sleep(LEASE * 2)  # its lease would have lapsed by now without a heartbeat
        answers.append(await Manager([tools], sessions=db).invoke("chat", said("two", "x")))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            group.start_soon(second)
    assert answers == ["first", "second"]  # the second run waited, then continued the first's conversation
    stored = await SQLiteStore(db).messages("x")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"] * 2
    assert [stored[0]["content"], stored[4]["content"]] == ["one", "two"]


async def test_an_agent_whose_session_was_taken_over_stops_and_saves_nothing_more(write, tools, tmp_path):
    db = tmp_path / "s.db"
    take_over = f"""
import sqlite3
def main(ctx):
    with sqlite3.connect({str(db)!r}) as db:  # another run takes the session over in the middle of this one
        db.execute("UPDATE leases SET owner = 'elsewhere:1:other' WHERE session = 'x'")
    return 'done'
"""
    write("tools/take_over.py", take_over)
    agent(write, "chat", ["hello", {"calls": [{"name": "take_over"}]}, "never"], tools=["take_over"])
    manager = Manager([tools], sessions=db)
    assert await manager.invoke("chat", said("hi", "x")) == "hello"
    with anyio.fail_after(20), pytest.raises(SessionLostError, match="session 'x' was taken over") as caught:
        await manager.invoke("chat", said("again", "x"))
    assert caught.value.tool == "chat"
    stored = await manager.sessions.messages("x")
    assert [m["content"] for m in stored] == ["hi", "hello"]  # nothing of the run that lost its session


async def test_an_agent_waiting_in_a_tool_is_cancelled_when_its_lease_is_taken(write, tools, tmp_path, short_lease):
    db, finished = tmp_path / "s.db", tmp_path / "finished"
    waiting = f"""
import pathlib
import sqlite3
import anyio
async def main(ctx):
    with sqlite3.connect({str(db)!r}) as db:
        db.execute("UPDATE leases SET owner = 'elsewhere:1:other' WHERE session = 'x'")
    await anyio.sleep(60)  # a person who never answers
    pathlib.Path({str(finished)!r}).write_text("the tool ran to its end")
    return 'answered'
"""
    write("tools/waiting.py", waiting)
    agent(write, "chat", [{"calls": [{"name": "waiting"}]}, "never"], tools=["waiting"])
    manager = Manager([tools], sessions=db)
    with anyio.fail_after(20), pytest.raises(SessionLostError):
        await manager.invoke("chat", said("hi", "x"))
    assert await manager.sessions.messages("x") == [] and not finished.exists()


RACER = """
import sys
from orchestrator import Manager, sessionlimits

sessionlimits.LEASE_SECONDS = {lease}
manager = Manager([sys.argv[1]], sessions=sys.argv[2])
for turn in range(2):
    print(manager.invoke_sync("chat", {{"message": sys.argv[3] + str(turn), "$context": {{"session": "x"}}}}))
"""


def test_two_processes_racing_on_one_sqlite_file_never_interleave_turns(write, tools, tmp_path):
    write("tools/slow.py", f"import time\ndef main(ctx):\n    time.sleep({LEASE * 3})\n    return 'slept'\n")
    script = [{"calls": [{"name": "slow"}]}, "done"] * 4  # a turn holds its lease through a call 3 leases long
    agent(write, "chat", script, tools=["slow"])
    racer = tmp_path / "racer.py"
    racer.write_text(textwrap.dedent(RACER.format(lease=LEASE)), encoding="utf-8")
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    runs = [
        subprocess.Popen(
            [sys.executable, str(racer), str(tools), str(db), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("a", "b")
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _out, err in outputs]
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT body FROM messages WHERE session = 'x' ORDER BY seq").fetchall()
    stored = [json.loads(row[0]) for row in rows]
    turn = ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in stored] == turn * 4  # four whole turns, one after another
    asked = [m["content"] for m in stored if m["role"] == "user"]
    assert sorted(asked) == ["a0", "a1", "b0", "b1"]
    assert asked.index("a0") < asked.index("a1") and asked.index("b0") < asked.index("b1")
