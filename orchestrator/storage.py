"""What every session store shares: ``SessionInfo``, the ``Store`` protocol, messages and states as JSON within
the limits, and the errors of a lost or busy lease.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from . import sessionlimits
from .errors import InvocationError, SessionLostError

HOST = socket.gethostname()
"""This machine's name, the first part of a lease owner id (``host:pid:nonce``)."""


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


def lost_error(session: str, agent: str | None = None) -> SessionLostError:
    """The error of a run whose lease on ``session`` another run took over."""
    return SessionLostError(
        f"session {session!r} was taken over by another run after this run's lease lapsed; this run stops "
        "and nothing more of it is saved: run again to continue from what the session holds now, "
        "or use another session id",
        session=session,
        tool=agent,
        key="session",
    )


def busy_error(session: str) -> InvocationError:
    """The error of a write without a lease on a session another run holds."""
    return InvocationError(
        f"session {session!r} is in use by another run: write with the lease of holding(store, session), "
        "or when that run ends",
        key="session",
    )


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
    if count > sessionlimits.MAX_MESSAGES:
        what = f"{count:,} messages; the limit is {sessionlimits.MAX_MESSAGES:,}"
    elif size > sessionlimits.MAX_BYTES:
        what = f"{size:,} bytes of messages; the limit is {sessionlimits.MAX_BYTES:,}"
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
    if len(text.encode()) > sessionlimits.MAX_STATE_BYTES:
        raise InvocationError(
            f"cannot save the suspended run: its state is over {sessionlimits.MAX_STATE_BYTES:,} bytes"
        )
    return text


def alive(owner: str) -> bool:
    """Whether the process named in a lease owner (``host:pid:nonce``) may still run."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != HOST or not pid.isdigit() or os.name != "posix":
        return True  # another machine's process: only its lease's expiry tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
