"""How a command ends: its exit statuses, one ``error:`` line (or a trimmed traceback), what a paused run
holds, and the process's end past a thread stuck in a sync tool.
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import shlex
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import anyio
import click

from .errors import Interrupted, OrchestratorError, describe
from .registry import builtin_folder

SUSPENDED = 3
"""Exit status of a run that paused for a decision: not an error; ``toolcascade resume`` continues it."""
INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit 1, naming files as ``check`` does (:func:`as_written`)."""
    click.echo(f"error: {as_written(message)}", err=True)
    sys.exit(1)


def as_written(message: str) -> str:
    """``message`` with files under the current folder named relative to it, and the built-ins' as ``built-in``.

    ``/home/ada/project/tools/bad.md:2`` reads ``tools/bad.md:2``, as
    ``check`` prints it; other absolute paths stay whole.
    """
    try:
        here = os.getcwd()
    except OSError:  # the folder was removed under us: nothing to shorten against
        return message
    for kind in ("tools", "authorities"):
        message = message.replace(f"{builtin_folder(kind).resolve()}{os.sep}", f"built-in {kind}/")
    return message.replace(f"{here}{os.sep}", "") if here != os.sep else message


class _AsWritten(logging.Handler):
    """The engine's warnings on stderr, one line each, naming files as ``check`` does (:func:`as_written`)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(as_written(record.getMessage()), err=True)
        except Exception:  # a handler never raises into the code that logged
            self.handleError(record)


def warnings_as_written() -> logging.Handler:
    """Print the ``orchestrator`` logger's warnings on stderr as :func:`as_written` names files; the handler.

    Installed once per process (a second call returns the first handler). Without it Python's last-resort
    handler prints them with absolute paths, where ``check`` and ``error:`` lines print relative ones.
    """
    logger = logging.getLogger("orchestrator")
    handler = next((h for h in logger.handlers if isinstance(h, _AsWritten)), None)
    if handler is None:
        handler = _AsWritten(logging.WARNING)
        logger.addHandler(handler)
    return handler


@contextmanager
def reporting(debug: bool, again: Sequence[str] = ()) -> Iterator[None]:
    """Turn any error into one ``error: Type: message`` line and exit 1 (plus the traceback with --debug).

    A run that paused for a decision (``Interrupted``) is no error: what it
    holds and the ``toolcascade resume`` command (with ``again``, the options
    that find the same tools and store) go to stderr, and the exit status is
    ``SUSPENDED``.
    """
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except Exception as exc:
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]  # type: ignore[assignment]  # anyio task groups wrap a lone error
        if isinstance(leaf, Interrupted):
            suspend(leaf, again)
        if debug:
            click.echo(trimmed_traceback(exc), err=True, nl=False)
        hint = "" if debug or isinstance(leaf, OrchestratorError) else " (run with --debug for the traceback)"
        fail(f"{describe(leaf)}{hint}")


def suspend(paused: Interrupted, again: Sequence[str]) -> NoReturn:
    """Say on stderr what the paused run holds and how to continue it; exit ``SUSPENDED``."""
    say_paused(paused, again)
    sys.exit(SUSPENDED)


def say_paused(paused: Interrupted, again: Sequence[str]) -> None:
    """Say on stderr what the paused run holds and the ``toolcascade resume`` command that continues it."""
    request = paused.request
    if request.get("kind") == "input":  # a question to the caller (orchestrator.questions), not a held call
        click.echo(f"paused: {request.get('tool', '?')} asks: {request.get('question')}", err=True)
        if request.get("schema") is not None:
            schema = json.dumps(request["schema"], ensure_ascii=False, default=str)
            click.echo(f"  the answer must match: {schema}", err=True)
        command = shlex.join(["toolcascade", "resume", paused.token, "--answer", "ANSWER", *again])
        click.echo(f"  continue: {command}", err=True)
        click.echo("  (ANSWER is JSON, or plain text; or --deny [--reason TEXT] to decline)", err=True)
        return
    shown = json.dumps(request.get("args"), ensure_ascii=False, default=str)
    click.echo(f"paused: waiting for a decision on {request.get('tool', '?')} {shown}", err=True)
    if request.get("reason"):
        click.echo(f"  why: {request['reason']}", err=True)
    command = shlex.join(["toolcascade", "resume", paused.token, "--approve", *again])
    click.echo(f"  continue: {command}", err=True)
    click.echo("  (or --deny [--reason TEXT], or --edit JSON, in place of --approve)", err=True)


def resume_options(paths: Sequence[Path], store: Path | None) -> list[str]:
    """The options a ``resume`` needs to find what a run found: its ``--path`` folders and ``--store``."""
    options = [word for path in paths for word in ("--path", str(path))]
    return [*options, "--store", str(store)] if store is not None else options


_ENGINE = (
    str(Path(__file__).resolve().parent),
    str(builtin_folder("tools")),
    str(Path(anyio.__file__).resolve().parent),
    "<frozen ",
)


def trimmed_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without the engine's own frames (the onion is dozens deep), as pytest does.

    Frames of ``orchestrator``, its built-in tools and ``anyio`` are left out
    and counted; the user's tools and libraries stay. An error raised by the
    engine itself keeps every frame.
    """
    import asyncio

    engine = (*_ENGINE, str(Path(asyncio.__file__).resolve().parent))
    report = traceback.TracebackException.from_exception(exc)
    if all(frame.filename.startswith(engine) for frame in report.stack):
        return "".join(report.format())  # the engine's own error: its frames are the story
    seen: set[int] = set()
    pending = [report]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        kept = [frame for frame in item.stack if not frame.filename.startswith(engine)]
        hidden = len(item.stack) - len(kept)
        item.stack = traceback.StackSummary.from_list(kept)
        if hidden:
            item.__notes__ = [*(item.__notes__ or []), f"({hidden} frames of toolcascade and anyio hidden)"]
        pending.extend(x for x in (item.__cause__, item.__context__) if x is not None)
        pending.extend(item.exceptions or ())
    return "".join(report.format())


def skip_final_collection() -> None:
    """Spare the ending process the interpreter's last full garbage collection.

    The interpreter's last act is a collection that walks every object the
    command made: 0.65 s of CPU after a first ``list`` of 10,000 tools (a
    fifth of the command), 0.9 s after ``check``. All it could free are
    cycles of a process that is ending, so what is alive when the exit
    handlers run is frozen then (``gc.freeze``: the collection skips it).
    Registered last, it runs first; the handlers registered before it (the
    kept frontmatters' write, a temporary folder's removal) run after it as
    before. What the command must finish (the run log, sessions, files it
    writes) it closes itself before this: nothing relies on a collector's
    finalizer at exit. A program that calls ``main()`` and goes on collects as before.
    """
    atexit.unregister(gc.freeze)  # once, however often main() runs in one process
    atexit.register(gc.freeze)


def leave(code: object, wait: float = 0.5) -> None:
    """End the process with ``code`` now if a thread would hold its exit (the interpreter joins them all).

    A sync tool that outlived its ``$timeout`` or a Ctrl-C keeps running in
    its worker thread, and no thread can be killed. Threads that end within
    ``wait`` seconds get to; if one is still running, the output is flushed
    and ``end_now`` ends the process, as ``serve --grace`` does.
    """
    deadline = time.monotonic() + wait
    current = threading.current_thread()
    stuck = [t for t in threading.enumerate() if t is not current and not t.daemon]
    for thread in stuck:
        thread.join(max(0.0, deadline - time.monotonic()))
    if not any(thread.is_alive() for thread in stuck):
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        click.echo(code, err=True)
        status = 1
    end_now(status)


def end_now(status: int) -> NoReturn:
    """End the process with ``status`` at once, its output flushed, waiting for no thread (``os._exit``)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(status)


@contextmanager
def ending_within(grace: float) -> Iterator[None]:
    """Once SIGTERM or SIGINT arrives, end the process ``grace`` seconds later if it is still running.

    The server's own shutdown waits for the calls in flight, and the
    interpreter's exit for every worker thread; sync code stuck in a thread
    (a tool that never returns) would keep both waiting for good, and no
    thread can be killed. So a watchdog thread ends the process with
    ``os._exit(128 + signal)``. It learns of the signal through
    ``signal.set_wakeup_fd``, written by the C-level handler whichever Python
    handler (uvicorn's) runs, so the normal shutdown still gets its chance.
    """
    import os
    import signal
    import socket
    import threading
    import time

    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread (an embedding program): its own signals, its own exit
        reader.close()
        writer.close()
        yield
        return
    ending = (int(signal.SIGTERM), int(signal.SIGINT))

    def watch() -> None:
        with reader:
            while True:
                received = reader.recv(64)
                if not received:  # the server ended without a signal
                    return
                signals = [number for number in received if number in ending]
                if signals:
                    break
        time.sleep(grace)
        os.write(2, f"toolcascade serve: still running {grace:g} s after signal {signals[0]}; exiting\n".encode())
        end_now(128 + signals[0])

    threading.Thread(target=watch, name="toolcascade-exit-watchdog", daemon=True).start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        writer.close()  # the watchdog returns, unless a signal already started its count
