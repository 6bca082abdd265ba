"""Leases: a run holds a session for the block (``holding``) while a heartbeat renews it, and a resumed run
checks nobody wrote the session while it waited (``check_unchanged``).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from . import sessionlimits
from .errors import InvocationError, SessionLostError
from .storage import HOST, Store, lost_error

log = logging.getLogger("orchestrator.sessions")


@asynccontextmanager
async def holding(store: Store, session: str, *, wait: float | None = None) -> AsyncIterator[str]:
    """Hold ``session``'s lease for the block (yielding the owner id, the writes' ``lease=``); waits up to ``wait`` s.

    ``wait`` defaults to ``sessionlimits.LEASE_WAIT`` (read at each call, so a
    program may change it). A heartbeat renews the lease every third of ``LEASE_SECONDS``
    until the block ends; when it finds the lease taken over, it cancels the
    block.

    Raises:
        InvocationError: another run still holds the session after ``wait`` seconds.
        SessionLostError: another run took the session over while the block ran; the block was stopped.
    """
    wait = sessionlimits.LEASE_WAIT if wait is None else wait
    owner = f"{HOST}:{os.getpid()}:{secrets.token_hex(6)}"
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
            raise lost_error(session) from failure
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
        self.every = sessionlimits.LEASE_SECONDS / 3
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
