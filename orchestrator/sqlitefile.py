"""One toolcascade SQLite file (the session store, the run log): opened, checked as ours, prepared.

Each kind of file (``Kind``) has its own ``PRAGMA application_id`` and
schema. A file is ours when it carries our id, or empty when it holds no
table; any other SQLite file (another application's) is refused with a
``ConfigurationError`` and never altered, and a file SQLite cannot read
(corrupt) is refused the same way. Preparing an empty file switches it to
WAL mode, then writes the schema and the id in one transaction, so a process
that opens the file meanwhile sees either nothing or all of it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError

BUSY_TIMEOUT_MS = 10_000  # how long a writer waits for another (thread or process) before the file is busy


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of toolcascade SQLite file: its id, its schema (``;``-separated statements), and its names in errors.

    ``what``: ``session store``; ``option``: where a program chooses the
    file (``Manager(sessions=...)``); ``environment``: the variable that does.
    """

    application_id: int
    schema: str
    what: str
    option: str
    environment: str


def connect(path: Path, kind: Kind, *, create: bool = False) -> sqlite3.Connection:
    """An autocommit connection to ``path`` with a busy timeout; nothing checked yet (see ``prepare``).

    ``create``: a missing file is created first, mode 0600 (its folder too).

    Raises:
        ConfigurationError: the file cannot be created or opened.
    """
    if create and not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise ConfigurationError(f"cannot create the {kind.what}: {exc}", path=path) from exc
    try:
        return sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        raise ConfigurationError(f"cannot open the {kind.what}: {exc}", path=path) from exc


def ours(db: sqlite3.Connection, kind: Kind) -> bool:
    """Whether the file carries ``kind``'s application id (it was prepared)."""
    return bool(db.execute("PRAGMA application_id").fetchone()[0] == kind.application_id)


def prepare(db: sqlite3.Connection, path: Path, kind: Kind, *, create: bool = True) -> None:
    """Check the file is ``kind``'s (or empty); with ``create``, make an empty one ``kind``'s: WAL, schema, id.

    Raises:
        ConfigurationError: another application's file.
        sqlite3.DatabaseError: a file SQLite cannot read (``unreadable`` says it for a person).
    """
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if ours(db, kind):
        return
    db.execute("BEGIN")  # one snapshot: another process may be preparing the file right now
    try:
        refuse_foreign(db, path, kind)
    finally:
        db.execute("COMMIT")
    if not create:
        return
    if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # switching needs the file alone
        db.execute("PRAGMA journal_mode = WAL")  # persistent in the file; not inside a transaction
    db.execute("BEGIN IMMEDIATE")
    try:
        if not ours(db, kind):
            refuse_foreign(db, path, kind)
            for statement in filter(str.strip, kind.schema.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA application_id = {kind.application_id}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def refuse_foreign(db: sqlite3.Connection, path: Path, kind: Kind) -> None:
    """Raise when a file without ``kind``'s id already holds tables (someone else's database).

    Raises:
        ConfigurationError: it does.
    """
    if not ours(db, kind) and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise ConfigurationError(
            f"this SQLite file belongs to another application, not a toolcascade {kind.what}; "
            f"choose another file ({kind.option}, {kind.environment}) or move it away",
            path=path,
        )


def unreadable(exc: sqlite3.DatabaseError, path: Path, kind: Kind) -> ConfigurationError:
    """The error of a file SQLite cannot read (corrupt, or not a database)."""
    return ConfigurationError(
        f"the {kind.what} is unreadable ({exc}): is it a toolcascade {kind.what}? "
        f"Move it away or point {kind.environment} at another file",
        path=path,
    )


def open_checked(path: Path, kind: Kind, *, create: bool = False) -> sqlite3.Connection:
    """``connect`` then ``prepare``: a connection to a file that is ``kind``'s (or, without ``create``, empty).

    Raises:
        ConfigurationError: the file cannot be opened or created, is corrupt, or is another application's.
    """
    db = connect(path, kind, create=create)
    try:
        prepare(db, path, kind, create=create)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise unreadable(exc, path, kind) from exc
    except BaseException:
        db.close()
        raise
    return db
