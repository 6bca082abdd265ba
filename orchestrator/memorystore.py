"""``MemoryStore``: a session store in this process's memory, for tests and short-lived programs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from . import sessionlimits
from .storage import SessionInfo, busy_error, check_size, encode, encode_state, lost_error


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
                raise lost_error(session, agent)
            if lease is None and held is not None and held[1] > time.monotonic():
                raise busy_error(session)
            info, old = self._sessions.get(session, (SessionInfo(session, agent, now, now, 0, 0), []))
            kept = [*old, *bodies] if keep else bodies
            size = sum(len(b.encode()) for b in kept)
            check_size(session, len(kept), size)
            self._sessions[session] = (
                SessionInfo(session, agent or info.agent, info.created, now, len(kept), size),
                kept,
            )
            if lease is not None:
                self._leases[session] = (lease, time.monotonic() + sessionlimits.LEASE_SECONDS)

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
            self._leases[session] = (owner, time.monotonic() + sessionlimits.LEASE_SECONDS)
            return True

    async def renew(self, session: str, owner: str) -> bool:
        with self._lock:
            held = self._leases.get(session)
            if held is None or held[0] != owner:
                return False
            self._leases[session] = (owner, time.monotonic() + sessionlimits.LEASE_SECONDS)
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
