"""The process engine: units run in worker processes that are killed when their call stops waiting.

For CPU-bound tools (``delegate: {engine: process, pool: N}``). Python code
that spins holds the GIL; in the caller's process a burst of such calls
starves the event loop, and every timeout comes back late. Here each unit
runs in a worker process of a pool of ``pool`` (default ``POOL``): one unit
per worker at a time, others wait their turn. When the call's deadline
passes or it is cancelled, the worker is killed at once (SIGKILL: the tool's
``finally`` blocks do not run) and reaped; the next call starts a new one.
A worker whose unit timed out on its own side is replaced too (a thread of
it may still spin). A unit runs at most once: a worker that dies mid-unit
fails that call with ``InvocationError``.

A worker is ``python -c`` running ``serve()``: one unit per line (JSON) on
its stdin, one reply per line on its stdout (``orchestrator.units``'s
units and replies, so it sees the caller's search paths and their trust,
as a Ray worker does). A tool's own prints go to stderr; a worker whose
stdin closes (its caller ended, however) exits, even mid-unit.

Pools are safe to share between event loops and threads (asyncio or trio):
waiting is done with anyio events woken from plain threads. ``close()`` ends
a pool's workers; ``close_pools()`` ends every pool's, when the process's
last open ``Manager`` closes (``executor.close_executors``) and at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio

from .errors import ConfigurationError, InvocationError
from .units import Managers, Unit, dump_unit, run_unit, unwrap

POOL = min(4, os.cpu_count() or 1)
"""Worker processes of a pool when its spec names none."""
REAP_SECONDS = 5.0  # how long close() waits for a killed worker to be reaped

_ROOT = str(Path(__file__).resolve().parent.parent)  # where the worker imports orchestrator from
_BOOT = f"import sys; sys.path[0] = {_ROOT!r}; from orchestrator.processes import serve; serve()"


def _soon() -> Callable[[Callable[[], object]], object]:
    """The running event loop's thread-safe ``call soon`` (asyncio's loop or trio's token)."""
    asyncio = sys.modules.get("asyncio")  # never imported: no asyncio loop can be running
    if asyncio is not None:
        try:
            return asyncio.get_running_loop().call_soon_threadsafe
        except RuntimeError:
            pass
    import trio  # only reached while trio runs this code

    return trio.lowlevel.current_trio_token().run_sync_soon


class _Signal:
    """An anyio event on the loop that made it, which any thread can set."""

    __slots__ = ("event", "soon")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.soon = _soon()

    def set(self) -> bool:
        """Set the event from any thread; False when its loop has ended (nobody waits)."""
        try:
            self.soon(self.event.set)
        except RuntimeError:  # the asyncio loop closed, or the trio run finished (RunFinishedError)
            return False
        return True


class _Worker:
    """One worker process, as its pool sees it."""

    __slots__ = ("process", "__weakref__")

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True
        )

    def exchange(self, line: bytes) -> bytes | None:
        """In a thread: send one unit, return its reply; None when the process ended first."""
        process = self.process
        assert process.stdin is not None and process.stdout is not None  # opened with PIPE
        try:
            process.stdin.write(line)
            process.stdin.flush()
            reply = process.stdout.readline()
        except (OSError, ValueError):  # the process ended (broken pipe), or close() closed the pipes
            reply = b""
        if reply.endswith(b"\n"):
            return reply
        try:
            process.wait(1)  # its exit code, for the error
        except subprocess.TimeoutExpired:
            pass
        return None

    def end(self) -> None:
        """Kill the process (SIGKILL; nothing if it ended) and reap it, so no zombie is left."""
        process = self.process
        process.kill()
        try:
            process.wait(REAP_SECONDS)
        except subprocess.TimeoutExpired:  # stuck in the kernel: Popen reaps it later
            return
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def ended(self) -> str:
        """How the process ended, for an error message."""
        code = self.process.returncode
        if code is None:
            return "it closed its output"
        return f"it was killed by signal {-code}" if code < 0 else f"it exited with code {code}"


def _reply(line: bytes | None) -> dict[str, Any] | None:
    """A worker's reply line as JSON; None when there is none, or it is not a reply."""
    if line is None:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class _Turn:
    """A call waiting for a worker: ``worker`` is handed over (None: start a new one) before ``ready`` is set."""

    __slots__ = ("ready", "handed", "worker")

    def __init__(self) -> None:
        self.ready = _Signal()
        self.handed = False
        self.worker: _Worker | None = None


class ProcessExecutor:
    """Runs units in a pool of ``pool`` worker processes, one unit per worker at a time.

    A call that stops waiting (its deadline, a cancellation) kills its
    worker; workers start when a call needs one. Usable from any event loop
    (asyncio or trio) and thread.
    """

    def __init__(self, pool: int | None = None) -> None:
        if pool is None:
            pool = POOL
        if not isinstance(pool, int) or isinstance(pool, bool) or not 1 <= pool <= 1024:
            raise ConfigurationError(f"pool must be an integer from 1 to 1024, not {pool!r}", key="pool")
        self.pool = pool
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._held = 0  # workers handed to calls (or being started for one)
        self._turns: deque[_Turn] = deque()
        self._live: set[_Worker] = set()  # every process not reaped yet
        _pools.add(self)

    @property
    def pids(self) -> list[int]:
        """The process ids of this pool's workers not reaped yet."""
        with self._lock:
            return sorted(worker.process.pid for worker in self._live)

    async def submit(self, unit: Unit) -> Any:
        """Run ``unit`` in a worker process and return its result.

        Raises:
            OrchestratorError: the unit's error, as the same subclass.
            InvocationError: no worker could start, or it died before replying.
        """
        line = dump_unit(unit).encode() + b"\n"
        worker = await self._take()
        data: dict[str, Any] | None = None
        try:
            data = _reply(await self._exchange(worker, line))
        finally:
            # Stopped waiting, died, or timed out on its side (where a thread of it may still spin): replaced.
            if data is None or (data.get("error") or {}).get("type") == "InvocationTimeout":
                self._stop(worker)
                self._give(None)
            else:
                self._give(worker)
        if data is None:
            raise InvocationError(
                f"the worker process running this unit ended before replying: {worker.ended()} "
                "(a crash, running out of memory, or its pool was closed)",
                tool=str(unit.get("tool")),
            )
        return unwrap(data)

    async def aclose(self) -> None:
        """``close()``."""
        self.close()

    def close(self) -> None:
        """Kill and reap every worker now; calls running on them fail. A later call starts new ones."""
        with self._lock:
            workers = list(self._live)
            self._idle.clear()
        for worker in workers:
            worker.end()
            with self._lock:
                self._live.discard(worker)

    # -- the pool ---------------------------------------------------------------------------

    async def _take(self) -> _Worker:
        """An idle worker, a new one, or the next one given back (in turn).

        Raises:
            InvocationError: a new worker could not start.
        """
        with self._lock:
            while self._idle:
                idle = self._idle.pop()
                if idle.process.poll() is None:
                    self._held += 1
                    return idle
                idle.end()  # died while idle (killed from outside, or by close): reaped, never handed a unit
                self._live.discard(idle)
            turn = None
            if self._held < self.pool:
                self._held += 1
            else:
                turn = _Turn()
                self._turns.append(turn)
        if turn is not None:
            try:
                await turn.ready.event.wait()
            except BaseException:
                with self._lock:
                    handed = turn.handed
                    if not handed:
                        self._turns.remove(turn)
                if handed:  # given a worker just as it stopped waiting: pass it on
                    self._give(turn.worker)
                raise
            if turn.worker is not None:
                return turn.worker
        try:
            worker = _Worker()
        except OSError as exc:
            self._give(None)
            raise InvocationError(f"cannot start a worker process: {exc}") from exc
        with self._lock:
            self._live.add(worker)
        return worker

    def _give(self, worker: _Worker | None) -> None:
        """A call is done with its worker (None: it was stopped): to the next call waiting, else idle."""
        while True:
            with self._lock:
                if not self._turns:
                    self._held -= 1
                    if worker is not None:
                        self._idle.append(worker)
                    return
                turn = self._turns.popleft()
                turn.handed, turn.worker = True, worker
            if turn.ready.set():
                return
            # That call's event loop has ended: nobody takes the worker, so the next call in turn does.

    def _stop(self, worker: _Worker) -> None:
        """Kill ``worker`` now, and reap it in a thread of its own (never blocking the loop)."""
        try:
            worker.process.kill()
        except OSError:  # already reaped
            pass

        def reap() -> None:
            worker.end()
            with self._lock:
                self._live.discard(worker)

        threading.Thread(target=reap, name="toolcascade-reaper", daemon=True).start()

    @staticmethod
    async def _exchange(worker: _Worker, line: bytes) -> bytes | None:
        """Send ``line`` to ``worker`` and wait for its reply, in a daemon thread (exit never waits for it)."""
        done = _Signal()
        box: list[bytes | None] = [None]

        def run() -> None:
            box[0] = worker.exchange(line)
            done.set()

        threading.Thread(target=run, name="toolcascade-process", daemon=True).start()
        await done.event.wait()
        return box[0]


_pools: weakref.WeakSet[ProcessExecutor] = weakref.WeakSet()


def close_pools() -> None:
    """Close every process pool of this process (run at exit)."""
    for found in list(_pools):
        found.close()


atexit.register(close_pools)


# -- the worker --------------------------------------------------------------------------------


def serve() -> None:
    """Run as a worker: units from stdin, replies to stdout, one JSON line each, until stdin closes."""
    units = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a tool reading stdin reads nothing, never the next unit
    os.close(null)
    os.dup2(2, 1)  # a tool's prints go to stderr, never into the replies
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it kills us
    lines: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    threading.Thread(target=_read, args=(units, lines), name="toolcascade-units", daemon=True).start()
    anyio.run(_work, lines, replies)


def _read(units: IO[bytes], lines: queue.SimpleQueue[bytes]) -> None:
    """Pass each unit on; when stdin closes, end this process at once, even while a unit spins."""
    for line in units:
        lines.put(line)
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


async def _work(lines: queue.SimpleQueue[bytes], replies: IO[bytes]) -> None:
    managers = Managers()
    while True:
        line = await anyio.to_thread.run_sync(lines.get)
        reply = await run_unit(managers, line.decode("utf-8", "surrogateescape"))
        replies.write(reply.encode() + b"\n")
        replies.flush()


__all__ = ["POOL", "ProcessExecutor", "close_pools", "serve"]
