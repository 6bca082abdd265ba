"""Session stores: conversations an agent continues, and runs suspended for a decision.

A store keeps two things:

- **sessions**: an id, when it was created and last updated, the agent that
  last wrote to it, and its messages in order (what an agent invoked with
  ``$context: {session: ID}`` loads before its loop and appends after every
  turn);
- **suspended runs**: the saved state of a run that waits for a decision,
  under an unguessable token. ``take`` reads and deletes it in one
  transaction, so a token resumes exactly once even when two processes race.

Two runs on one session are serialised, never interleaved: a run holds the
session's *lease* from loading to its last save. Another run (in this
process, another thread or another process) waits for it, up to ``wait``
seconds (default ``LEASE_WAIT``), then fails with an ``InvocationError``
naming the session. The lease cannot be lost silently:

- while a run holds it, a heartbeat task renews it every third of
  ``LEASE_SECONDS``, however long the run waits (a slow tool, an approver
  waiting for a person); it lapses only when the holder stops renewing it (a
  crash, a frozen process, a store it cannot reach), and another run may then
  take it over;
- the lease's owner id is a fencing token: every ``append`` / ``replace``
  with ``lease=`` checks, in the write's own transaction, that the lease is
  still that owner's. A run that lost it gets ``SessionLostError`` and
  nothing of its write is stored; its heartbeat also finds out and cancels
  the run, which stops with ``SessionLostError`` wherever it was waiting;
- a write with ``lease=None`` (a program writing a session by hand) is
  refused with ``InvocationError`` while another run holds the session, and
  allowed when nobody does.

A lease whose process is gone (same host) is taken over at once, and any
other lapses ``LEASE_SECONDS`` after its last renewal, so a crash never
locks a session for good. A crash mid-run leaves the session as its last
save did: the run's question and each tool round that ended (an assistant
message's tool calls are saved in one transaction with their results), never
a call without its result, and no answer. The round in flight is lost, but
the tools it called may have run: their effects stay. The next run on the
session continues from there.

``SQLiteStore`` is the default: one file (stdlib ``sqlite3``, WAL mode, a
busy timeout), every blocking call in a worker thread. ``MemoryStore`` keeps
everything in the process, for tests. ``open_store`` picks one from what
``Manager(sessions=...)`` was given.

A session holds at most ``MAX_MESSAGES`` messages and ``MAX_BYTES`` of JSON;
an append past either is an ``InvocationError`` that says to compact the
conversation (the ``compact`` middleware) or start a new session.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

from .errors import ConfigurationError, InvocationError, SessionLostError

T = TypeVar("T")
log = logging.getLogger("orchestrator.sessions")

ENVIRONMENT = "TOOLCASCADE_SESSIONS"
MAX_MESSAGES = 10_000
MAX_BYTES = 16_000_000
MAX_STATE_BYTES = 16_000_000
LEASE_SECONDS = 900.0
LEASE_WAIT = 60.0
BUSY_TIMEOUT_MS = 10_000
# PRAGMA application_id of a toolcascade store ("tcs1"): any other SQLite file is refused, never altered.
APPLICATION_ID = 0x74637331
_HOST = socket.gethostname()


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What ``sessions list`` shows of one session."""

    id: str
    agent: str | None
    created: float
    updated: float
    messages: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        """The info as plain JSON."""
        return {
            "id": self.id,
            "agent": self.agent,
            "created": self.created,
            "updated": self.updated,
            "messages": self.messages,
            "bytes": self.bytes,
        }


@runtime_checkable
class Store(Protocol):
    """Where conversations and suspended runs are kept (``SQLiteStore``, ``MemoryStore``, or your own)."""

    async def messages(self, session: str) -> list[dict[str, Any]]:
        """The session's messages in order (``[]`` for a new session)."""

    async def append(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        """Add messages at the end of the session (creating it), renewing ``lease``.

        Raises:
            SessionLostError: ``lease`` no longer holds the session; nothing was written.
            InvocationError: no ``lease``, and another run holds the session.
        """

    async def replace(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        """Make ``messages`` the session's whole conversation (a compacted one); fenced as ``append`` is."""

    async def sessions(self) -> list[SessionInfo]:
        """Every session, most recently updated first."""

    async def info(self, session: str) -> SessionInfo | None:
        """One session's info, or None when there is no such session."""

    async def delete(self, session: str) -> bool:
        """Delete a session and its messages; False when there was none."""

    async def acquire(self, session: str, owner: str) -> bool:
        """Take the session's lease for ``owner`` when it is free, expired or its process is gone."""

    async def renew(self, session: str, owner: str) -> bool:
        """Extend ``owner``'s lease by ``LEASE_SECONDS``; False when ``owner`` no longer holds it."""

    async def release(self, session: str, owner: str) -> None:
        """Give the lease back (only when ``owner`` holds it)."""

    async def suspend(self, token: str, state: Mapping[str, Any]) -> None:
        """Save a suspended run's state (plain JSON) under ``token``."""

    async def take(self, token: str) -> dict[str, Any] | None:
        """Read and delete a suspended run's state in one step; None when unknown or already taken."""


def open_store(value: Any) -> Store:
    """The store ``Manager(sessions=value)`` means.

    None: the file named by ``TOOLCASCADE_SESSIONS``, else
    ``$XDG_STATE_HOME/toolcascade/sessions.db`` (``~/.local/state/...``),
    its folders created. A path: a ``SQLiteStore`` on that file. A store: itself.

    Raises:
        ConfigurationError: anything else.
    """
    if value is None:
        value = os.environ.get(ENVIRONMENT) or default_path()
    if isinstance(value, (str, os.PathLike)):
        path = Path(value).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(f"cannot create the folder of the session store: {exc}", path=path) from exc
        return SQLiteStore(path)
    if isinstance(value, Store):
        return value
    raise ConfigurationError(
        f"sessions must be a path to a SQLite file, a store (SQLiteStore, MemoryStore) or None, "
        f"not {type(value).__name__}"
    )


def default_path() -> Path:
    """``$XDG_STATE_HOME/toolcascade/sessions.db``, else ``~/.local/state/toolcascade/sessions.db``."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state and Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "toolcascade" / "sessions.db"


def new_token() -> str:
    """An unguessable resume token (128 bits), in hex: never starting with ``-``, so ``resume TOKEN`` parses."""
    return secrets.token_hex(16)


def new_session_id() -> str:
    """A fresh session id: ``s-`` and 12 hex digits."""
    return "s-" + secrets.token_hex(6)


@asynccontextmanager
async def holding(store: Store, session: str, *, wait: float | None = None) -> AsyncIterator[str]:
    """Hold ``session``'s lease for the block (yielding the owner id, the writes' ``lease=``); waits up to ``wait`` s.

    ``wait`` defaults to ``LEASE_WAIT`` (read at each call, so a program may
    change it). A heartbeat renews the lease every third of ``LEASE_SECONDS``
    until the block ends; when it finds the lease taken over, it cancels the
    block.

    Raises:
        InvocationError: another run still holds the session after ``wait`` seconds.
        SessionLostError: another run took the session over while the block ran; the block was stopped.
    """
    wait = LEASE_WAIT if wait is None else wait
    owner = f"{_HOST}:{os.getpid()}:{secrets.token_hex(6)}"
    deadline = time.monotonic() + wait
    pause = 0.01
    while not await store.acquire(session, owner):
        if time.monotonic() >= deadline:
            raise InvocationError(
                f"session {session!r} is in use by another run (waited {wait:g} s); "
                "try again when it ends, or use another session id",
                key="session",
            )
        await anyio.sleep(pause)
        pause = min(pause * 2, 0.2)
    beat = _Heartbeat(store, session, owner)
    failure: Exception | None = None
    finished = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(beat.run, group.cancel_scope)
            try:
                yield owner
                finished = True
            except Exception as exc:  # kept out of the task group, which would wrap it in an ExceptionGroup
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if beat.lost and not finished and not isinstance(failure, SessionLostError):  # stopped by the heartbeat
            raise _lost(session) from failure
        if failure is not None:
            raise failure
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled run still frees its session
            await store.release(session, owner)


class _Heartbeat:
    """Renews a held lease every third of ``LEASE_SECONDS``; cancels the holder when the lease is gone."""

    def __init__(self, store: Store, session: str, owner: str) -> None:
        self.store = store
        self.session = session
        self.owner = owner
        self.every = LEASE_SECONDS / 3
        self.lost = False

    async def run(self, holder: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(self.every)
            try:
                kept = await self.store.renew(self.session, self.owner)
            except Exception as exc:  # a busy store: the next beat tries again; writes stay fenced meanwhile
                log.warning("session %r: cannot renew the lease (%s); trying again", self.session, exc)
                continue
            if not kept:
                self.lost = True
                holder.cancel()
                return


def _lost(session: str, agent: str | None = None) -> SessionLostError:
    """The error of a run whose lease on ``session`` another run took over."""
    return SessionLostError(
        f"session {session!r} was taken over by another run after this run's lease lapsed; this run stops "
        "and nothing more of it is saved: run again to continue from what the session holds now, "
        "or use another session id",
        session=session,
        tool=agent,
        key="session",
    )


async def check_unchanged(store: Store, session: str, count: int, *, agent: str | None = None) -> None:
    """Raise unless ``session`` still holds the ``count`` messages a run saved before it suspended.

    A suspended run holds no lease while it waits for a decision; another run
    may write the session meanwhile. The resumed run calls this once it holds
    the lease again, before it saves anything.

    Raises:
        SessionLostError: the session holds another number of messages: another run wrote it.
    """
    info = await store.info(session)
    found = info.messages if info is not None else 0
    if found != count:
        raise SessionLostError(
            f"session {session!r} was written by another run while this run waited for a decision "
            f"(it holds {found} messages, not {count}); this run stops and saves nothing: run again to "
            "continue from what the session holds now, or use another session id",
            session=session,
            tool=agent,
            key="session",
        )


def _busy(session: str) -> InvocationError:
    """The error of a write without a lease on a session another run holds."""
    return InvocationError(
        f"session {session!r} is in use by another run: write with the lease of holding(store, session), "
        "or when that run ends",
        key="session",
    )


# -- shared checks ---------------------------------------------------------------


def encode(messages: Sequence[Mapping[str, Any]], session: str) -> list[str]:
    """Each message as JSON text.

    Raises:
        InvocationError: a message that is not a mapping of plain JSON.
    """
    bodies = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise InvocationError(f"session {session!r}: a message must be a mapping, not {type(message).__name__}")
        try:
            bodies.append(json.dumps(dict(message), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise InvocationError(f"session {session!r}: a message is not plain JSON: {exc}") from exc
    return bodies


def check_size(session: str, count: int, size: int) -> None:
    """Refuse a session past ``MAX_MESSAGES`` or ``MAX_BYTES``.

    Raises:
        InvocationError: over a limit; says which and what to do.
    """
    if count > MAX_MESSAGES:
        what = f"{count:,} messages; the limit is {MAX_MESSAGES:,}"
    elif size > MAX_BYTES:
        what = f"{size:,} bytes of messages; the limit is {MAX_BYTES:,}"
    else:
        return
    raise InvocationError(
        f"session {session!r} would hold {what}: compact it (the compact middleware in model-pipeline) "
        "or start a new session",
        key="session",
    )


def encode_state(state: Mapping[str, Any], token: str) -> str:
    """A suspended run's state as JSON text.

    Raises:
        InvocationError: not plain JSON, or over ``MAX_STATE_BYTES``.
    """
    try:
        text = json.dumps(dict(state), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvocationError(f"cannot save the suspended run: its state is not plain JSON: {exc}") from exc
    if len(text.encode()) > MAX_STATE_BYTES:
        raise InvocationError(f"cannot save the suspended run: its state is over {MAX_STATE_BYTES:,} bytes")
    return text


def _alive(owner: str) -> bool:
    """Whether the process named in a lease owner (``host:pid:nonce``) may still run."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != _HOST or not pid.isdigit() or os.name != "posix":
        return True  # another machine's process: only its lease's expiry tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


# -- in memory -------------------------------------------------------------------


class MemoryStore:
    """A store in this process's memory (tests, short-lived programs); safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, tuple[SessionInfo, list[str]]] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._suspended: dict[str, str] = {}

    async def messages(self, session: str) -> list[dict[str, Any]]:
        with self._lock:
            found = self._sessions.get(session)
            bodies = list(found[1]) if found else []
        return [json.loads(body) for body in bodies]

    async def append(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        self._write(session, encode(messages, session), agent, lease, keep=True)

    async def replace(
        self, session: str, messages: Sequence[Mapping[str, Any]], *, agent: str | None = None, lease: str | None = None
    ) -> None:
        self._write(session, encode(messages, session), agent, lease, keep=False)

    def _write(self, session: str, bodies: list[str], agent: str | None, lease: str | None, *, keep: bool) -> None:
        now = time.time()
        with self._lock:
            held = self._leases.get(session)
            if lease is not None and (held is None or held[0] != lease):
                raise _lost(session, agent)
            if lease is None and held is not None and held[1] > time.monotonic():
                raise _busy(session)
            info, old = self._sessions.get(session, (SessionInfo(session, agent, now, now, 0, 0), []))
            kept = [*old, *bodies] if keep else bodies
            size = sum(len(b.encode()) for b in kept)
            check_size(session, len(kept), size)
            self._sessions[session] = (
                SessionInfo(session, agent or info.agent, info.created, now, len(kept), size),
                kept,
            )
            if lease is not None:
                self._leases[session] = (lease, time.monotonic() + LEASE_SECONDS)

    async def sessions(self) -> list[SessionInfo]:
        with self._lock:
            infos = [info for info, _ in self._sessions.values()]
        return sorted(infos, key=lambda i: i.updated, reverse=True)

    async def info(self, session: str) -> SessionInfo | None:
        with self._lock:
            found = self._sessions.get(session)
        return found[0] if found else None

    async def delete(self, session: str) -> bool:
        with self._lock:
            return self._sessions.pop(session, None) is not None

    async def acquire(self, session: str, owner: str) -> bool:
        with self._lock:
            held = self._leases.get(session)
            if held is not None and held[1] > time.monotonic():
                return False
            self._leases[session] = (owner, time.monotonic() + LEASE_SECONDS)
            return True

    async def renew(self, session: str, owner: str) -> bool:
        with self._lock:
            held = self._leases.get(session)
            if held is None or held[0] != owner:
                return False
            self._leases[session] = (owner, time.monotonic() + LEASE_SECONDS)
            return True

    async def release(self, session: str, owner: str) -> None:
        with self._lock:
            held = self._leases.get(session)
            if held is not None and held[0] == owner:
                del self._leases[session]

    async def suspend(self, token: str, state: Mapping[str, Any]) -> None:
        text = encode_state(state, token)
        with self._lock:
            self._suspended[token] = text

    async def take(self, token: str) -> dict[str, Any] | None:
        with self._lock:
            text = self._suspended.pop(token, None)
        return json.loads(text) if text is not None else None


# -- SQLite ----------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, agent TEXT, created REAL NOT NULL, updated REAL NOT NULL,
    count INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (session TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS suspended (token TEXT PRIMARY KEY, created REAL NOT NULL, state TEXT NOT NULL);
"""


class SQLiteStore:
    """A store in one SQLite file: WAL mode, a busy timeout, safe for runs in threads and processes.

    The file is created (and its schema) on first use. Every call opens its
    own connection in a worker thread, so the event loop never blocks and no
    connection crosses threads. Writes run in ``BEGIN IMMEDIATE``
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
        """Run ``work`` on a fresh connection.

        Raises:
            ConfigurationError: the file is not a toolcascade session store (corrupt, foreign, unreadable).
        """
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the session store: {exc}", path=self.path) from exc
        try:
            if not self._ready:
                with self._preparing:
                    if not self._ready:
                        self._prepare(connection)
            return work(connection)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise InvocationError(f"the session store is busy: {exc}; try again", path=str(self.path)) from exc
            raise ConfigurationError(
                f"the session store is unreadable ({exc}): is it a toolcascade session store? "
                "Move it away or point TOOLCASCADE_SESSIONS at another file",
                path=self.path,
            ) from exc
        except (ValueError, KeyError, TypeError) as exc:  # a row that is not what we wrote
            raise ConfigurationError(f"the session store holds a corrupt row: {exc}", path=self.path) from exc
        finally:
            connection.close()

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """Check the file is ours (or empty), switch to WAL and create the schema.

        The schema and the application id are written in one transaction, so
        a process that opens the file meanwhile sees either nothing or all of it.

        Raises:
            ConfigurationError: another application's SQLite file.
        """
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if connection.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            connection.execute("BEGIN")  # one snapshot: another process may be preparing the file right now
            try:
                self._refuse_foreign(connection)
            finally:
                connection.execute("COMMIT")
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # switching needs the file alone
                connection.execute("PRAGMA journal_mode = WAL")  # persistent in the file; not inside a transaction
            connection.execute("BEGIN IMMEDIATE")
            try:
                if connection.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                    self._refuse_foreign(connection)
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        connection.execute(statement)
                    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        self._ready = True

    def _refuse_foreign(self, connection: sqlite3.Connection) -> None:
        """Raise when a file without our application id already holds tables (someone else's database).

        Raises:
            ConfigurationError: it does.
        """
        ours = connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        if not ours and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise ConfigurationError(
                "this SQLite file belongs to another application, not a toolcascade session store; "
                "choose another file (Manager(sessions=...), TOOLCASCADE_SESSIONS)",
                path=self.path,
            )

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
                raise _lost(session, agent)  # the fencing check: in this transaction, so no takeover slips between
            if lease is None and held is not None and held[1] > now and _alive(held[0]):
                raise _busy(session)
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
                db.execute("UPDATE leases SET expires = ? WHERE session = ?", (now + LEASE_SECONDS, session))
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
                if row is not None and row[1] > now and _alive(row[0]):
                    return False
                db.execute(
                    "INSERT OR REPLACE INTO leases (session, owner, expires) VALUES (?, ?, ?)",
                    (session, owner, now + LEASE_SECONDS),
                )
            finally:
                db.execute("COMMIT")
            return True

        return await self._run(work)

    async def renew(self, session: str, owner: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            sql = "UPDATE leases SET expires = ? WHERE session = ? AND owner = ?"
            return db.execute(sql, (time.time() + LEASE_SECONDS, session, owner)).rowcount > 0

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
