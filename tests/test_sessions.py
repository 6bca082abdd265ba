"""Session stores (issue 14): SQLite and memory, open_store, limits, leases, corrupt and foreign files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from orchestrator import ConfigurationError, InvocationError, Manager, sessionlimits, sessions
from orchestrator.sessions import MemoryStore, SQLiteStore, Store, holding, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return SQLiteStore(tmp_path / "s.db") if request.param == "sqlite" else MemoryStore()


async def test_messages_append_in_order_and_replace_rewrites(store):
    assert await store.messages("a") == [] and await store.info("a") is None
    await store.append("a", [{"role": "user", "content": "hi"}], agent="chat")
    await store.append("a", [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "é"}])
    assert [m["content"] for m in await store.messages("a")] == ["hi", "hello", "é"]
    info = await store.info("a")
    assert info is not None and info.messages == 3 and info.agent == "chat" and info.created <= info.updated
    await store.replace("a", [{"role": "user", "content": "summary"}])
    assert await store.messages("a") == [{"role": "user", "content": "summary"}]
    await store.append("b", [{"role": "user", "content": "other"}])
    assert [s.id for s in await store.sessions()] == ["b", "a"]  # most recently updated first
    assert await store.delete("a") is True and await store.delete("a") is False
    assert await store.messages("a") == [] and [s.id for s in await store.sessions()] == ["b"]


async def test_a_suspended_state_is_taken_once(store):
    await store.suspend("t1", {"kind": "invoke", "args": {"x": [1, 2]}})
    assert await store.take("t1") == {"kind": "invoke", "args": {"x": [1, 2]}}
    assert await store.take("t1") is None and await store.take("never") is None


async def test_a_session_is_bounded_and_says_what_to_do(store, monkeypatch):
    monkeypatch.setattr(sessionlimits, "MAX_MESSAGES", 3)
    await store.append("a", [{"role": "user", "content": "x"}] * 3)
    with pytest.raises(InvocationError, match=r"would hold 4 messages; the limit is 3: compact it"):
        await store.append("a", [{"role": "user", "content": "x"}])
    monkeypatch.setattr(sessionlimits, "MAX_BYTES", 100)
    with pytest.raises(InvocationError, match="bytes of messages; the limit is 100"):
        await store.replace("b", [{"role": "user", "content": "x" * 200}])
    assert len(await store.messages("a")) == 3 and await store.messages("b") == []


async def test_messages_that_are_not_json_are_refused(store):
    with pytest.raises(InvocationError, match="not plain JSON"):
        await store.append("a", [{"role": "user", "content": object()}])
    with pytest.raises(InvocationError, match="must be a mapping"):
        await store.append("a", ["text"])  # type: ignore[list-item]
    with pytest.raises(InvocationError, match="state is not plain JSON"):
        await store.suspend("t", {"f": print})


async def test_a_lease_is_exclusive_and_released(store):
    assert await store.acquire("s", "host:1:a")
    assert not await store.acquire("s", "host:1:b")
    await store.release("s", "host:1:b")  # not the holder: nothing happens
    assert not await store.acquire("s", "host:1:b")
    await store.release("s", "host:1:a")
    assert await store.acquire("s", "host:1:b")


async def test_a_lease_of_a_dead_process_is_taken_over(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    owner = f"{sessions._HOST}:{dead.stdout.strip()}:x"
    assert await store.acquire("s", owner)
    with anyio.fail_after(10):
        async with holding(store, "s", wait=5) as lease:
            assert lease != owner


async def test_holding_waits_then_fails_with_the_session_named():
    store = MemoryStore()
    assert await store.acquire("s", "other")
    with pytest.raises(InvocationError, match="session 's' is in use by another run"):
        async with holding(store, "s", wait=0.05):
            pass


def test_two_threads_on_one_sqlite_session_are_serialised(write, tools, tmp_path):
    write("tools/slow.py", "import time\ndef main(ctx):\n    time.sleep(0.2)\n    return 'ok'\n")
    write(
        "tools/chat.md",
        "---\nmetadata:\n  model: {provider: scripted, script: [{calls: [{name: slow}]}, one, {calls: [{name: slow}]},"
        " two]}\n  tools: [slow]\n---\n{{ args.m }}\n",
    )
    db = tmp_path / "s.db"
    answers: list[str] = []

    def talk(text: str) -> None:
        manager = Manager([tools], sessions=db)  # one manager per thread, as separate programs would
        answers.append(manager.invoke_sync("chat", {"m": text, "$context": {"session": "x"}}))

    threads = [threading.Thread(target=talk, args=(t,)) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answers) == ["one", "two"]
    stored = anyio.run(SQLiteStore(db).messages, "x")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"] * 2


def test_open_store_picks_the_environment_then_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SESSIONS", str(tmp_path / "env" / "x.db"))
    found = open_store(None)
    assert isinstance(found, SQLiteStore) and found.path == tmp_path / "env" / "x.db"
    assert (tmp_path / "env").is_dir()
    monkeypatch.delenv("TOOLCASCADE_SESSIONS")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert open_store(None).path == tmp_path / "state" / "toolcascade" / "sessions.db"  # type: ignore[attr-defined]
    memory = MemoryStore()
    assert open_store(memory) is memory
    assert open_store(tmp_path / "p.db").path == tmp_path / "p.db"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="sessions must be a path to a SQLite file, a store"):
        open_store(42)
    assert Manager(sessions=memory).sessions is memory


async def test_a_corrupt_store_file_is_a_typed_error_naming_it(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(ConfigurationError, match=r"bad\.db: the session store is unreadable"):
        await SQLiteStore(bad).messages("a")


async def test_another_applications_sqlite_file_is_refused_and_left_alone(tmp_path):
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE sessions (x INTEGER)")
    with pytest.raises(ConfigurationError, match=r"app\.db: this SQLite file belongs to another application"):
        await SQLiteStore(foreign).sessions()
    with sqlite3.connect(foreign) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("sessions",)]


async def test_a_corrupt_row_is_a_typed_error(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.append("a", [{"role": "user", "content": "x"}])
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE messages SET body = '[1, 2'")
    with pytest.raises(ConfigurationError, match="corrupt row"):
        await store.messages("a")


async def test_the_store_file_uses_wal(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.append("a", [{"role": "user", "content": "x"}])
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert os.path.exists(tmp_path / "s.db")


def test_resume_tokens_are_hex_so_no_token_reads_as_an_option():
    from orchestrator.sessions import new_token

    tokens = {new_token() for _ in range(2_000)}
    assert len(tokens) == 2_000
    assert all(len(t) == 32 and set(t) <= set("0123456789abcdef") for t in tokens)
