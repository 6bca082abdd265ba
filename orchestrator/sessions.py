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

The parts: ``storage`` (``Store``, ``SessionInfo``, the shared checks),
``memorystore``, ``sqlitestore``, ``leases`` (``holding``,
``check_unchanged``) and ``sessionlimits``, whose limits are read at each
use (change them there: ``sessionlimits.LEASE_WAIT = 5``); this module
opens a store and re-exports the rest.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from .cachefolder import state_folder
from .errors import ConfigurationError
from .leases import check_unchanged as check_unchanged
from .leases import holding as holding
from .memorystore import MemoryStore as MemoryStore
from .sessionlimits import LEASE_SECONDS as LEASE_SECONDS
from .sessionlimits import LEASE_WAIT as LEASE_WAIT
from .sessionlimits import MAX_BYTES as MAX_BYTES
from .sessionlimits import MAX_MESSAGES as MAX_MESSAGES
from .sessionlimits import MAX_STATE_BYTES as MAX_STATE_BYTES
from .sqlitestore import APPLICATION_ID as APPLICATION_ID
from .sqlitestore import BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS
from .sqlitestore import SQLiteStore
from .storage import HOST as _HOST  # noqa: F401  # tests name a lease owner of this machine with sessions._HOST
from .storage import SessionInfo as SessionInfo
from .storage import Store
from .storage import check_size as check_size
from .storage import encode as encode
from .storage import encode_state as encode_state

ENVIRONMENT = "TOOLCASCADE_SESSIONS"
STORE_FILE = "sessions.db"


def open_store(value: Any) -> Store:
    """The store ``Manager(sessions=value)`` means.

    None: the file named by ``TOOLCASCADE_SESSIONS``, else ``default_path()``
    (``sessions.db`` in the user state folder), its folders created. A path: a ``SQLiteStore`` on that file. A store: itself.

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
    """``sessions.db`` in the user state folder ``platformdirs`` names (``cachefolder.state_folder``).

    On Linux that is ``$XDG_STATE_HOME/toolcascade/sessions.db``, else
    ``~/.local/state/toolcascade/sessions.db``, as before. Elsewhere, a
    store already kept at that old place (and none yet at the platform's)
    stays where it is, so an upgrade loses no conversation.

    Raises:
        ConfigurationError: no home folder is known; name the file with ``TOOLCASCADE_SESSIONS``.
    """
    folder = state_folder()
    if folder is None:
        raise ConfigurationError(f"no home folder to keep the session store in: set {ENVIRONMENT} to a file")
    path = folder / STORE_FILE
    legacy = _legacy_path()
    if legacy is not None and legacy != path and legacy.is_file() and not path.exists():
        return legacy
    return path


def _legacy_path() -> Path | None:
    """Where versions before platformdirs kept the store: the XDG state folder on every platform."""
    state = os.environ.get("XDG_STATE_HOME")
    if state and Path(state).is_absolute():
        return Path(state, "toolcascade", STORE_FILE)
    try:
        return Path.home() / ".local" / "state" / "toolcascade" / STORE_FILE
    except RuntimeError:
        return None


def new_token() -> str:
    """An unguessable resume token (128 bits), in hex: never starting with ``-``, so ``resume TOKEN`` parses."""
    return secrets.token_hex(16)


def new_session_id() -> str:
    """A fresh session id: ``s-`` and 12 hex digits."""
    return "s-" + secrets.token_hex(6)
