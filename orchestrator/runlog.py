"""The run log: every top-level call, kept in a local SQLite file for ``toolcascade logs``.

A ``RunLog`` is the store: one SQLite file (stdlib ``sqlite3``, WAL mode, a
busy timeout, mode 0600), ``runs.db`` in the user state folder unless
``TOOLCASCADE_RUNLOG`` names another file (``off``: the CLI records
nothing); ``orchestrator.sqlitefile`` opens, checks and prepares it, as it
does the session store's. A file that is not a toolcascade run log (corrupt, or another
application's database) is refused with a ``ConfigurationError`` and never
written. Calls are written on the log's own writer thread, in batches, never
on the event loop; a write that fails is a warning of the
``orchestrator.runlog`` logger and never fails the call it records. With
every batch, rows past ``keep_runs`` (10,000) and older than ``keep_days``
are pruned, and ``secure_delete`` overwrites what is pruned.

A run's row: the run id, ref, tool, caller, status (``ok``, ``error``,
``interrupted``), error type, model, total tokens, start and duration; its
body (JSON) holds the args, the result or the error's type and message, the
merged metadata's hash (``meta_hash``), the cascade levels of the tool's
plan (``levels``; a call's own overrides are not among them), the token
usage, and the model turns (``turns``: each ``model.request`` with how many
messages it held, each ``model.response`` with its text, tool calls, finish
reason and usage, each tool call's arguments and outcome; a request's
messages as sent when its event carries them), its ``cost`` in US dollars
and the price table it came from (``prices``): null without the ``prices``
extra or for a model the table does not know. ``runlog: false`` in a
tool's metadata (an ``AUTHORITY.md`` sets it for its folder) keeps its runs
out of the log (``orchestrator.recorder``). What is
redacted, and what never reaches the file, is ``orchestrator.redaction``'s;
who hands the calls over, ``orchestrator.recorder``'s.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import sqlitefile
from .cachefolder import state_folder
from .errors import ConfigurationError
from .redaction import row, secret_environment

if TYPE_CHECKING:
    from .events import Event

log = logging.getLogger("orchestrator.runlog")

ENVIRONMENT = "TOOLCASCADE_RUNLOG"
KEEP_ENVIRONMENT = "TOOLCASCADE_RUNLOG_KEEP"
LOG_FILE = "runs.db"
OFF = ("off", "0", "false", "no")
KEEP_RUNS = 10_000
# PRAGMA application_id of a toolcascade run log ("tcrl"): any other SQLite file is refused, never altered.
APPLICATION_ID = 0x7463726C
MAX_PENDING = 10_000  # calls waiting for the writer; past it a call is dropped (with one warning)
BATCH = 256  # calls per write, at most
GATHER_SECONDS = 0.05  # how long the writer waits after a call for more to write with it
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, started REAL NOT NULL, seconds REAL NOT NULL,
    ref TEXT NOT NULL, tool TEXT, caller TEXT, status TEXT NOT NULL, error TEXT, model TEXT, tokens INTEGER,
    body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_id ON runs (id);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started);
"""
RUNLOG = sqlitefile.Kind(APPLICATION_ID, _SCHEMA, "run log", "Manager(runlog=...)", ENVIRONMENT)
_COLUMNS = "id, started, seconds, ref, tool, caller, status, error, model, tokens"
# A row (redaction.row) says a missing tool, caller, error type or model with "" and missing tokens with -1:
# NULLIF stores NULL. Bound as None, each costs sqlite3's adapter lookup (a third of binding a row).
_VALUES = "(?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, NULLIF(?, ''), NULLIF(?, ''), NULLIF(?, -1), ?)"
# Rows per INSERT, at most: one statement for many rows costs SQLite a third less per row than a statement per
# row (executemany). A batch is written in statements of 256, 128, ... 2 or 1 rows (its length in binary), each
# prepared once per connection, not one for every length a batch may have (a 50-row one costs a millisecond);
# 64 at most where SQLite takes at most 999 parameters a statement (builds older than 3.32).
ROWS_PER_INSERT = 256
_PARAMETERS = 11  # per row
_SELECT = _COLUMNS + ", json_extract(body, '$.cost')"  # a run's cost lives in its body: older files have no column


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One line of ``toolcascade logs``: a run without its args, result and turns.

    ``status`` is ``ok``, ``error`` or ``interrupted`` (paused for a
    decision); ``error_type`` the error's type; ``tokens`` the run's total tokens
    (None for a run that asked no model); ``cost`` its price in US dollars (None
    when no answer could be priced: see ``orchestrator.costs``).
    """

    id: str
    started: float
    seconds: float
    ref: str
    tool: str | None
    caller: str | None
    status: str
    error_type: str | None
    model: str | None
    tokens: int | None
    cost: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The info as plain JSON."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class Call:
    """One finished top-level call as the recorder hands it to the log: raw, redacted on the writer thread.

    ``params`` and ``returns`` are the tool's schemas (redaction), ``meta``
    its merged metadata (hashed), ``levels`` its plan's cascade levels,
    ``events`` the run's model turns, ``env`` whether its templates saw the
    environment, ``lookup`` how to find a called tool's ``params``. A call
    handed over with a ``context`` (what the recorder took from the call's
    context, never the context itself) is completed by ``fill`` on the
    writer thread (``Recorder.fill``: False when the call is not to be
    kept), given a dict that lives for one batch of rows (what it looked up
    once for the batch).
    """

    id: str
    ref: str
    args: Any
    started: float
    seconds: float
    result: Any = None
    error: BaseException | None = None
    tool: str | None = None
    caller: str | None = None
    meta: Mapping[str, Any] | None = None
    levels: Sequence[Any] = ()
    events: Sequence[Event] = ()
    usage: Mapping[str, Any] | None = None
    env: bool = False
    lookup: Callable[[str], Any] | None = None
    params: Any = None
    returns: Any = None
    secrets: list[Any] = field(default_factory=list)
    context: Any = None
    fill: Callable[[Call, dict[Any, Any]], bool] | None = None


class RunLog:
    """A run log in one SQLite file; ``add`` from any thread, read with ``runs``, ``get`` and ``export``.

    ``keep_runs`` rows are kept (the oldest go first), and none older than
    ``keep_days`` days when it is set. The file is created on the first
    write, mode 0600. ``close()`` (idempotent) writes what is pending.

    Raises:
        ConfigurationError: ``keep_runs`` or ``keep_days`` is not a positive number.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, keep_runs: int | None = KEEP_RUNS, keep_days: float | None = None
    ) -> None:
        if keep_runs is not None and (not isinstance(keep_runs, int) or isinstance(keep_runs, bool) or keep_runs < 1):
            raise ConfigurationError(
                f"keep_runs must be a positive integer or None, not {keep_runs!r}", key="keep_runs"
            )
        if keep_days is not None and (not isinstance(keep_days, (int, float)) or keep_days <= 0):
            raise ConfigurationError(f"keep_days must be a positive number or None, not {keep_days!r}", key="keep_days")
        self.path = Path(path).expanduser()
        self.keep_runs = keep_runs
        self.keep_days = keep_days
        self.closed = False
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._broken = False  # the file was refused: nothing more is written to it
        self._dropped = 0
        # The writer thread's, for its connection: rows per INSERT, and the lowest seq the file may hold (None:
        # unknown): at most the first seq, so the last seq written minus it says when to prune (see _prune).
        self._rows_per_insert = ROWS_PER_INSERT
        self._first: int | None = None

    def __repr__(self) -> str:
        return f"RunLog({str(self.path)!r})"

    # -- writing ---------------------------------------------------------------

    def add(self, call: Call) -> None:
        """Queue ``call`` for the writer thread; never blocks, never raises (a closed log drops it)."""
        if self.closed or self._broken:
            return
        if self._queue.qsize() >= MAX_PENDING:
            self._dropped += 1
            if self._dropped == 1:
                log.warning("run log %s: more than %d runs wait to be written; dropping runs", self.path, MAX_PENDING)
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="toolcascade-runlog", daemon=True)
                    self._thread.start()
                    atexit.register(self.close)
        self._queue.put(call)

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every call added before is written (or failed with a warning)."""
        if self._thread is None or not self._thread.is_alive():
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        """Write what is pending and stop the writer thread; idempotent. Later ``add`` calls are dropped."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(30.0)
            atexit.unregister(self.close)

    def _work(self) -> None:
        """The writer thread: takes calls off the queue and writes them, a power of two at a time while they stream.

        Each write costs the writer the GIL once per SQLite statement (and
        again after each pause), and every time it waits for the GIL while
        the event loop holds it, both threads pay for waking it. So while
        calls stream in, it writes the largest power of two of those it
        holds (256 at most) in one statement, on its own (no BEGIN nor
        COMMIT), and carries the rest over to its next write, one pause
        later. A flush, a close, or a pause after which no new call came
        writes every call it holds (a kill loses at most those: the last
        batch, and what came in its pause).
        """
        db: sqlite3.Connection | None = None
        carried: list[Call] = []
        try:
            while True:
                try:
                    first = self._queue.get(timeout=GATHER_SECONDS) if carried else self._queue.get()
                except queue.Empty:
                    first = _ALL  # nothing more came: the calls carried over are written now
                batch = [first]
                if isinstance(first, Call) and len(carried) + self._queue.qsize() < BATCH - 1:
                    # Let a burst of calls gather: few statements, few thread switches. Not when a batch is
                    # already waiting: a backlog (a fast batch, a flush at the end) is written without pauses.
                    time.sleep(GATHER_SECONDS)
                while len(carried) + len(batch) < BATCH:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                calls = carried + [item for item in batch if isinstance(item, Call)]
                whole = len(calls) < len(carried) + len(batch)  # a flush, a close or _ALL: every call is written
                count = len(calls) if whole else 1 << (len(calls).bit_length() - 1)
                carried = calls[count:]
                if count and not self._broken:
                    db = self._write(db, calls[:count])
                for item in batch:
                    if isinstance(item, threading.Event):
                        item.set()
                if any(item is None for item in batch):
                    return
        finally:
            if db is not None:
                db.close()

    def _write(self, db: sqlite3.Connection | None, calls: list[Call]) -> sqlite3.Connection | None:
        """Write ``calls`` (one statement on its own, or several in one transaction) and prune; the connection
        to keep (None after a failure)."""
        rows = []
        environment = secret_environment()
        looked: dict[Any, Any] = {}  # what the calls' fill looked up, for this batch
        for call in calls:
            try:
                if call.fill is not None and not call.fill(call, looked):
                    continue  # its metadata keeps it out of the log
                rows.append(row(call, environment))
            except Exception as exc:  # a value we cannot encode: that run is lost, never the call
                log.warning("run log %s: cannot record a run of %r: %s", self.path, call.ref, exc)
        if not rows:
            return db
        try:
            if db is None:
                db = self._connect(create=True)
                self._rows_per_insert = _rows_per_insert(db)
                self._first = db.execute("SELECT min(seq) FROM runs").fetchone()[0]
            last = self._insert(db, rows)
            self._prune(db, last)
        except ConfigurationError as exc:
            self._broken = True
            log.warning("run log %s: %s; nothing is recorded", self.path, exc)
            return None
        except (sqlite3.Error, OSError) as exc:
            log.warning("run log %s: %d runs not recorded: %s", self.path, len(rows), exc)
            if db is not None:
                db.close()
            return None
        return db

    def _insert(self, db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> int:
        """Insert ``rows`` in statements of a power of two rows each, in one transaction; the last row's seq."""
        most = self._rows_per_insert
        if len(rows) <= most and len(rows) & (len(rows) - 1) == 0:  # one statement: its own transaction
            return db.execute(_insert(len(rows)), [value for one in rows for value in one]).lastrowid or 0
        db.execute("BEGIN IMMEDIATE")
        try:
            start = 0
            while start < len(rows):
                size = min(most, 1 << ((len(rows) - start).bit_length() - 1))
                part = rows[start : start + size]
                last = db.execute(_insert(size), [value for one in part for value in one]).lastrowid or 0
                start += size
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return last

    def _prune(self, db: sqlite3.Connection, last: int) -> None:
        """Drop the runs older than ``keep_days``, then all but the newest ``keep_runs``; ``last``: the last seq.

        A log whose first and last ``seq`` are at most ``keep_runs`` apart
        holds at most ``keep_runs`` rows: then nothing is counted (counting
        walks the rows: a write would cost as much as the log is long). The
        first seq is the writer's to know (``_first``: read when it connects
        and after it deletes; another process's rows only raise it), so a
        write that leaves nothing to prune costs no query.
        """
        stale = self._first is None  # the file held no run when the writer connected
        if self.keep_days is not None:
            cutoff = time.time() - self.keep_days * 86_400
            stale |= db.execute("DELETE FROM runs WHERE started < ?", (cutoff,)).rowcount > 0
        if stale:
            self._first = db.execute("SELECT min(seq) FROM runs").fetchone()[0]
        if self.keep_runs is not None and self._first is not None and last - self._first >= self.keep_runs:
            # maybe more rows than kept: find the newest one past them
            found = db.execute("SELECT seq FROM runs ORDER BY seq DESC LIMIT 1 OFFSET ?", (self.keep_runs,))
            past = found.fetchone()
            if past is not None:
                db.execute("DELETE FROM runs WHERE seq <= ?", past)
            self._first = db.execute("SELECT min(seq) FROM runs").fetchone()[0]

    # -- the file --------------------------------------------------------------

    def _connect(self, *, create: bool) -> sqlite3.Connection:
        """A connection to a checked (and, with ``create``, prepared) run log.

        Raises:
            ConfigurationError: the file is corrupt, another application's, or cannot be opened.
        """
        db = sqlitefile.open_checked(self.path, RUNLOG, create=create)
        try:
            db.execute("PRAGMA secure_delete = ON")  # pruned runs are overwritten, not left in free pages
            db.execute("PRAGMA synchronous = NORMAL")  # WAL: a power cut may lose the last runs, never the file
        except sqlite3.DatabaseError as exc:
            db.close()
            raise sqlitefile.unreadable(exc, self.path, RUNLOG) from exc
        return db

    def _read(self, sql: str, parameters: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Rows of a query on the file as it is; no file, or one never written, has none.

        Raises:
            ConfigurationError: the file is not a toolcascade run log.
        """
        self.flush()
        if not self.path.exists():
            return []
        db = self._connect(create=False)
        try:
            if not sqlitefile.ours(db, RUNLOG):
                return []  # an empty file: nothing was ever written
            return db.execute(sql, tuple(parameters)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise ConfigurationError(f"the run log is unreadable ({exc})", path=self.path) from exc
        finally:
            db.close()

    # -- reading ---------------------------------------------------------------

    def runs(
        self,
        limit: int | None = 20,
        *,
        tool: str | None = None,
        since: float | None = None,
        status: str | None = None,
    ) -> list[RunInfo]:
        """The last ``limit`` runs, newest first: of ``tool`` (its name or ref), started at ``since`` or later,
        with ``status`` (``ok``, ``error``, ``interrupted``).

        Raises:
            ConfigurationError: the file is not a toolcascade run log.
        """
        where, parameters = _filters(tool, since, status)
        sql = f"SELECT {_SELECT} FROM runs{where} ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            parameters.append(limit)
        return [RunInfo(*found) for found in self._read(sql, parameters)]

    def get(self, run: str) -> dict[str, Any] | None:
        """The whole run whose id is ``run`` (or starts with it, when only one does); None when there is none.

        Raises:
            ConfigurationError: the file is not a toolcascade run log, or ``run`` is the start of several ids.
        """
        found = self._read(f"SELECT {_SELECT}, body FROM runs WHERE id = ? ORDER BY seq DESC LIMIT 1", [run])
        if not found and run:
            sql = f"SELECT {_SELECT}, body FROM runs WHERE substr(id, 1, ?) = ? ORDER BY seq DESC LIMIT 2"
            found = self._read(sql, [len(run), run])
            if len({entry[0] for entry in found}) > 1:
                raise ConfigurationError(f"{run!r} starts more than one run id: give more of it", key="run")
        return _whole(found[0]) if found else None

    def export(
        self, *, tool: str | None = None, since: float | None = None, status: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every run (filtered as ``runs`` does), oldest first, as the dicts ``get`` returns.

        Raises:
            ConfigurationError: the file is not a toolcascade run log.
        """
        where, parameters = _filters(tool, since, status)
        for found in self._read(f"SELECT {_SELECT}, body FROM runs{where} ORDER BY seq", parameters):
            yield _whole(found)


@functools.lru_cache(maxsize=ROWS_PER_INSERT.bit_length())
def _insert(count: int) -> str:
    """The INSERT statement of ``count`` rows (a power of two: sqlite3 caches each prepared statement)."""
    return f"INSERT INTO runs ({_COLUMNS}, body) VALUES " + ", ".join([_VALUES] * count)


def _rows_per_insert(db: sqlite3.Connection) -> int:
    """The most rows (a power of two) one INSERT of ``db`` may bind: ``ROWS_PER_INSERT``, or fewer on an old SQLite."""
    rows = min(ROWS_PER_INSERT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // _PARAMETERS)
    return 1 << (max(rows, 1).bit_length() - 1)


_ALL = object()  # the writer's own marker: write every call it holds


def _filters(tool: str | None, since: float | None, status: str | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    parameters: list[Any] = []
    if tool is not None:
        clauses.append("(tool = ? OR ref = ?)")
        parameters += [tool, tool]
    if since is not None:
        clauses.append("started >= ?")
        parameters.append(since)
    if status is not None:
        clauses.append("status = ?")
        parameters.append(status)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), parameters


def _whole(found: tuple[Any, ...]) -> dict[str, Any]:
    body = json.loads(found[-1])
    if not isinstance(body, dict):
        raise ConfigurationError("the run log holds a corrupt row: its body is not an object")
    return {**RunInfo(*found[:-1]).to_json(), **body}


def default_runlog() -> RunLog | None:
    """The log the CLI records in: ``TOOLCASCADE_RUNLOG`` (``off``: none), else ``runs.db`` in the state folder.

    None as well when no home folder is known. Retention comes from
    ``TOOLCASCADE_RUNLOG_KEEP``: a row count (``5000``), days (``30d``),
    or both (``5000,30d``).

    Raises:
        ConfigurationError: a malformed ``TOOLCASCADE_RUNLOG_KEEP``.
    """
    chosen = os.environ.get(ENVIRONMENT, "").strip()
    if chosen.lower() in OFF:
        return None
    if chosen:
        path = Path(chosen)
    else:
        folder = state_folder()
        if folder is None:
            return None
        path = folder / LOG_FILE
    keep_runs: int | None = KEEP_RUNS
    keep_days: float | None = None
    for part in filter(None, (p.strip() for p in os.environ.get(KEEP_ENVIRONMENT, "").split(","))):
        try:
            if part.endswith("d"):
                keep_days = float(part[:-1])
            else:
                keep_runs = int(part)
        except ValueError:
            raise ConfigurationError(
                f"{KEEP_ENVIRONMENT} must be a row count (5000), days (30d) or both (5000,30d), not {part!r}"
            ) from None
    return RunLog(path, keep_runs=keep_runs, keep_days=keep_days)
