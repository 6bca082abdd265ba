"""``SQLiteStore``: the default session store, one SQLite file (WAL mode, a busy timeout) shared by threads and
processes, every blocking call in a worker thread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from . import sessionlimits, sqlitefile
from .errors import ConfigurationError, InvocationError
from .sqlitefile import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS
from .storage import SessionInfo, alive, busy_error, check_size, encode, encode_state, lost_error

T = TypeVar("T")

# PRAGMA application_id of a toolcascade store ("tcs1"): any other SQLite file is refused, never altered.
APPLICATION_ID = 0x74637331

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, agent TEXT, created REAL NOT NULL, updated REAL NOT NULL,
    count INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (session TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS suspended (token TEXT PRIMARY KEY, created REAL NOT NULL, state TEXT NOT NULL);
"""
STORE = sqlitefile.Kind(APPLICATION_ID, _SCHEMA, "session store", "Manager(sessions=...)", "TOOLCASCADE_SESSIONS")


class SQLiteStore:
    """A store in one SQLite file: WAL mode, a busy timeout, safe for runs in threads and processes.

    The file is created (and its schema) on first use, once
    ``orchestrator.sqlitefile`` found it is a session store or empty. Every
    call opens its own connection in a worker thread, so the event loop
    never blocks and no connection crosses threads. Writes run in ``BEGIN IMMEDIATE``
    transactions: a second writer waits (``BUSY_TIMEOUT_MS``), never reads
    half a write.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._ready = False
        self._preparing = threading.Lock()  # one connection of this process prepares the file

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(self._call, work)

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on a fresh connection (the first one of this process checks and prepares the file).

        Raises:
            ConfigurationError: the file is not a toolcascade session store (corrupt, foreign, unreadable).
        """
        connection = sqlitefile.connect(self.path, STORE)
        try:
            if not self._ready:
                with self._preparing:
                    if not self._ready:
                        sqlitefile.prepare(connection, self.path, STORE)
                        self._ready = True
            return work(connection)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise InvocationError(f"the session store is busy: {exc}; try again", path=str(self.path)) from exc
            raise sqlitefile.unreadable(exc, self.path, STORE) from exc
        except (ValueError, KeyError, TypeError) as exc:  # a row that is not what we wrote
            raise ConfigurationError(f"the session store holds a corrupt row: {exc}", path=self.path) from exc
        finally:
            connection.close()

    # Each method below is the body of one worker-thread call.

    async def messages(self, session: str) -> list[dict[str, Any]]:
        def work(db: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = db.execute("SELECT body FROM messages WHERE session = ? ORDER BY seq", (session,)).fetchall()
            found = [json.loads(row[0]) for row in rows]
            if not all(isinstance(m, dict) for m in found):
                raise ValueError(f"session {session!r} has a message that is not an object")
            return found

        return await self._run(work)

    async def append(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        bodies = encode(messages, session)
        await self._run(lambda db: self._write(db, session, bodies, agent, lease, keep=True))

    async def replace(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        bodies = encode(messages, session)
        await self._run(lambda db: self._write(db, session, bodies, agent, lease, keep=False))

    def _write(
        self,
        db: sqlite3.Connection,
        session: str,
        bodies: list[str],
        agent: str | None,
        lease: str | None,
        *,
        keep: bool,
    ) -> None:
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            held = db.execute("SELECT owner, expires FROM leases WHERE session = ?", (session,)).fetchone()
            if lease is not None and (held is None or held[0] != lease):
                raise lost_error(session, agent)  # the fencing check: in this transaction, so no takeover slips between
            if lease is None and held is not None and held[1] > now and alive(held[0]):
                raise busy_error(session)
            row = db.execute("SELECT count, bytes FROM sessions WHERE id = ?", (session,)).fetchone()
            count, size = (int(row[0]), int(row[1])) if row and keep else (0, 0)
            added = sum(len(b.encode()) for b in bodies)
            check_size(session, count + len(bodies), size + added)
            if not keep:
                db.execute("DELETE FROM messages WHERE session = ?", (session,))
            db.executemany(
                "INSERT INTO messages (session, seq, body) VALUES (?, ?, ?)",
                [(session, count + i, body) for i, body in enumerate(bodies)],
            )
            db.execute(
                "INSERT INTO sessions (id, agent, created, updated, count, bytes) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET agent = coalesce(excluded.agent, agent), updated = excluded.updated, "
                "count = excluded.count, bytes = excluded.bytes",
                (session, agent, now, now, count + len(bodies), size + added),
            )
            if lease is not None:
                db.execute(
                    "UPDATE leases SET expires = ? WHERE session = ?", (now + sessionlimits.LEASE_SECONDS, session)
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def sessions(self) -> list[SessionInfo]:
        def work(db: sqlite3.Connection) -> list[SessionInfo]:
            rows = db.execute("SELECT id, agent, created, updated, count, bytes FROM sessions ORDER BY updated DESC")
            return [SessionInfo(*row) for row in rows.fetchall()]

        return await self._run(work)

    async def info(self, session: str) -> SessionInfo | None:
        def work(db: sqlite3.Connection) -> SessionInfo | None:
            sql = "SELECT id, agent, created, updated, count, bytes FROM sessions WHERE id = ?"
            row = db.execute(sql, (session,)).fetchone()
            return SessionInfo(*row) if row else None

        return await self._run(work)

    async def delete(self, session: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM messages WHERE session = ?", (session,))
            gone = db.execute("DELETE FROM sessions WHERE id = ?", (session,)).rowcount > 0
            db.execute("COMMIT")
            return gone

        return await self._run(work)

    async def acquire(self, session: str, owner: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT owner, expires FROM leases WHERE session = ?", (session,)).fetchone()
                if row is not None and row[1] > now and alive(row[0]):
                    return False
                db.execute(
                    "INSERT OR REPLACE INTO leases (session, owner, expires) VALUES (?, ?, ?)",
                    (session, owner, now + sessionlimits.LEASE_SECONDS),
                )
            finally:
                db.execute("COMMIT")
            return True

        return await self._run(work)

    async def renew(self, session: str, owner: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            sql = "UPDATE leases SET expires = ? WHERE session = ? AND owner = ?"
            return db.execute(sql, (time.time() + sessionlimits.LEASE_SECONDS, session, owner)).rowcount > 0

        return await self._run(work)

    async def release(self, session: str, owner: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM leases WHERE session = ? AND owner = ?", (session, owner)))

    async def suspend(self, token: str, state: Mapping[str, Any]) -> None:
        text = encode_state(state, token)
        await self._run(
            lambda db: db.execute(
                "INSERT INTO suspended (token, created, state) VALUES (?, ?, ?)", (token, time.time(), text)
            )
        )

    async def take(self, token: str) -> dict[str, Any] | None:
        def work(db: sqlite3.Connection) -> dict[str, Any] | None:
            # One statement reads and deletes: of two racing processes exactly one gets the row.
            row = db.execute("DELETE FROM suspended WHERE token = ? RETURNING state", (token,)).fetchone()
            if row is None:
                return None
            state = json.loads(row[0])
            if not isinstance(state, dict):
                raise ValueError(f"suspended run {token[:6]}... is not an object")
            return state

        return await self._run(work)
