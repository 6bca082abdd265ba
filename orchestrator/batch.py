"""``toolcascade batch``: run one tool over every line of a JSON Lines file, on any executor.

Each input line is the args of one unit. The output has one JSON line per
input line, in input order: ``{"line": N, "result": ...}`` or ``{"line": N,
"error": {"type": ..., "message": ...}}`` (a line that is not JSON is an error
line, never a crash). It is resumable: lines already in the output are
skipped, and a last line torn by a crash is cut off and run again.

Memory stays bounded: the input is streamed, at most ``concurrency`` units
run at once, and finished units wait to be written only inside a reorder
window (``window`` lines past the oldest unfinished one).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import click

from .cli import command_manager, store_option
from .errors import ConfigurationError, Interrupted
from .executor import InProcessExecutor, executor_for, unit_for
from .exits import SUSPENDED, reporting
from .flags import debug_option, path_option, set_option

if TYPE_CHECKING:
    from .recorder import Recorder

CONCURRENCY = 256  # units in flight by default
CHUNK = 64  # units per actor call when the executor takes several at once (Ray)
WINDOW_PER_UNIT = 4  # the reorder window is this many lines per unit in flight


@dataclass(slots=True)
class Summary:
    """What one batch run did: lines seen, skipped (already done), results and errors written.

    ``suspended`` counts the lines whose run paused for a decision (an
    ``Interrupted`` error record, its resume token in the message); they are
    not counted in ``errors``.
    """

    lines: int = 0
    skipped: int = 0
    results: int = 0
    errors: int = 0
    suspended: int = 0

    def line(self, output: Path) -> str:
        """One line for stderr."""
        waiting = f"{self.suspended} waiting for a decision, " if self.suspended else ""
        return (
            f"{self.lines} lines: {self.results} results, {self.errors} errors, {waiting}"
            f"{self.skipped} already done -> {output}"
        )


def done_lines(output: Path) -> set[int]:
    """The line numbers ``output`` already holds; a torn last line (no newline) is cut off first.

    Raises:
        ConfigurationError: ``output`` exists but is not a regular file.
    """
    if not output.exists():
        return set()
    if not output.is_file():
        raise ConfigurationError(f"{output} is not a file", key="output")
    with output.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":  # a crash tore the last line: cut back to the last complete one
                end = size
                while end > 0:
                    start = max(end - 65536, 0)
                    handle.seek(start)
                    block = handle.read(end - start)
                    cut = block.rfind(b"\n")
                    if cut >= 0:
                        handle.truncate(start + cut + 1)
                        break
                    end = start
                else:
                    handle.truncate(0)
        handle.seek(0)
        done = set()
        for raw in handle:
            try:
                number = json.loads(raw).get("line")
            except (ValueError, AttributeError):
                continue  # not a line this command wrote: its input line runs again
            if isinstance(number, int):
                done.add(number)
    return done


def count_lines(source: Path) -> int:
    """Lines in ``source`` (a last line without a newline counts), read in blocks."""
    count, last = 0, b"\n"
    with source.open("rb") as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def read_lines(source: IO[bytes]) -> Iterator[tuple[int, Any, dict[str, str] | None]]:
    """``(line, args, None)`` for each JSON line, ``(line, None, error)`` for one that is not JSON."""
    for number, raw in enumerate(source, 1):
        text = raw.strip()
        if not text:
            yield number, None, {"type": "InvocationError", "message": "the line is empty: expected the args as JSON"}
            continue
        try:
            yield number, json.loads(text), None
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            yield number, None, {"type": "InvocationError", "message": f"the line is not JSON: {reason}"}


def error_record(exc: BaseException) -> dict[str, str]:
    """``{"type", "message"}`` of an error, its notes (the tool's file and line) included."""
    message = " ".join(" ".join([str(exc), *getattr(exc, "__notes__", ())]).split())
    return {"type": type(exc).__name__, "message": message}


async def run_batch(
    executor: Any,
    base: Mapping[str, Any],
    source: Path,
    output: Path,
    *,
    concurrency: int = CONCURRENCY,
    chunk: int | None = None,
    window: int | None = None,
    on_line: Callable[[], None] | None = None,
    recorder: Recorder | None = None,
) -> Summary:
    """Run the unit ``base`` with the args of every line of ``source`` not yet in ``output``; append the records.

    ``chunk`` units go in one call when the executor has ``submit_many``
    (default ``CHUNK``); ``window`` bounds the finished records waiting for
    an older line (default ``WINDOW_PER_UNIT`` x ``concurrency``).
    ``recorder`` records each line as a run in its run log (the duration of
    a line run in a group of ``chunk`` is the group's).

    Raises:
        ConfigurationError: a bad concurrency, or an output that is not a file.
    """
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(f"concurrency must be a positive integer, not {concurrency!r}", key="concurrency")
    many = getattr(executor, "submit_many", None)
    size = max(1, min(chunk or CHUNK, concurrency)) if many is not None else 1
    window = max(window or WINDOW_PER_UNIT * concurrency, size)
    done = done_lines(output)
    summary = Summary()
    slots = anyio.Semaphore(max(1, concurrency // size))

    with source.open("rb") as lines, output.open("ab") as out:
        writer = _Writer(out, summary, on_line)

        async def run(group: list[tuple[int, Any]]) -> None:
            try:
                await _run_group(executor, many, base, group, writer, recorder)
            finally:
                slots.release()

        async with anyio.create_task_group() as tasks:
            group: list[tuple[int, Any]] = []

            async def flush_group() -> None:
                nonlocal group
                if group:
                    await slots.acquire()
                    tasks.start_soon(run, group)
                    group = []

            for number, args, problem in read_lines(lines):
                summary.lines += 1
                if number in done:
                    summary.skipped += 1
                    continue
                while len(writer.order) >= window:  # bounded memory: wait for the oldest line to be written
                    await flush_group()
                    await writer.room.wait()
                writer.order.append(number)
                if problem is not None:
                    writer.finish(number, {"error": problem})
                    continue
                group.append((number, args))
                if len(group) >= size:
                    await flush_group()
            await flush_group()
    return summary


class _Writer:
    """Writes the finished records to the output in input order, counting them in the summary.

    ``order`` holds the lines handed out and not yet written; ``room`` is
    set (and replaced) each time records are written, waking a reader
    waiting for the window to shrink.
    """

    def __init__(self, out: IO[bytes], summary: Summary, on_line: Callable[[], None] | None) -> None:
        self.out = out
        self.summary = summary
        self.on_line = on_line
        self.order: deque[int] = deque()  # lines handed out, in input order, not yet written
        self.ready: dict[int, str] = {}
        self.room = anyio.Event()

    def finish(self, number: int, record: dict[str, Any]) -> None:
        """Record line ``number``'s outcome; write every record now next in input order."""
        try:
            text = json.dumps({"line": number, **record}, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:  # cannot happen with JSON replies; never lose the line
            text = json.dumps({"line": number, "error": error_record(exc)})
        self.ready[number] = text
        if "error" in record and record["error"].get("type") == Interrupted.__name__:
            self.summary.suspended += 1
        elif "error" in record:
            self.summary.errors += 1
        else:
            self.summary.results += 1
        wrote = False
        while self.order and self.order[0] in self.ready:
            self.out.write(self.ready.pop(self.order.popleft()).encode("utf-8") + b"\n")
            wrote = True
        if wrote:
            self.out.flush()
            self.room.set()
            self.room = anyio.Event()
        if self.on_line is not None:
            self.on_line()


async def _run_group(
    executor: Any,
    many: Any,
    base: Mapping[str, Any],
    group: list[tuple[int, Any]],
    writer: _Writer,
    recorder: Recorder | None = None,
) -> None:
    """Run one group of lines (one ``submit_many`` call, or one ``submit``) and hand each outcome to ``writer``."""
    units = [{**base, "args": args} for _, args in group]
    started, clock = time.time(), time.perf_counter()
    if many is not None:
        try:
            outcomes = await many(units)
        except Exception as exc:  # the whole call failed: every line says why
            outcomes = [exc] * len(group)
    else:
        try:
            outcomes = [await executor.submit(units[0])]
        except Exception as exc:
            outcomes = [exc]
    seconds = time.perf_counter() - clock
    for (number, args), outcome in zip(group, outcomes, strict=True):
        if recorder is not None:
            failed = isinstance(outcome, Exception)
            recorder.record(
                str(base["tool"]),
                args,
                started=started,
                seconds=seconds,
                result=None if failed else outcome,
                error=outcome if failed else None,
            )
        if isinstance(outcome, Exception):
            writer.finish(number, {"error": error_record(outcome)})
        else:
            writer.finish(number, {"result": outcome})


def _progress(total: int) -> Any:
    """A rich progress bar on stderr (only on a terminal), or None."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]batch"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def make_executor(spec: str, pool: int | None, working_dir: Path | None, store: Path | None = None) -> Any:
    """The executor of ``--executor``/``--pool``/``--working-dir``/``--store``.

    With ``store`` it is an in-process executor of the batch's own, whose
    Managers keep their sessions in that SQLite file (close it when done).

    Raises:
        ConfigurationError: an unknown engine, Ray options with another executor, or ``store`` with an
            executor whose workers are other processes (Ray, worker processes).
    """
    engine, _, address = spec.partition("=")
    if engine != "ray" and (pool is not None or working_dir is not None):
        raise ConfigurationError("--pool and --working-dir are for --executor ray", key="executor")
    if store is not None and engine == "ray":
        raise ConfigurationError(
            "--store names a SQLite file on this machine, which the Ray workers (on any machine of the cluster) "
            "cannot share: run the batch with --executor inprocess --store FILE, or leave --store out and each "
            "worker keeps its sessions in its own default store ($TOOLCASCADE_SESSIONS where it runs)",
            key="store",
        )
    if store is not None and engine != "inprocess":
        raise ConfigurationError(
            f"--store is for the in-process executor, not {engine!r}: run the batch with --executor inprocess "
            "--store FILE, or export TOOLCASCADE_SESSIONS=FILE, which the worker processes open",
            key="store",
        )
    if store is not None:
        return InProcessExecutor(sessions=store)
    if engine == "ray" and working_dir is not None:
        from .cluster import RayExecutor

        return RayExecutor(address or None, pool=pool or 2, working_dir=working_dir)
    return executor_for({"engine": engine, "address": address or None, "pool": pool})


def _run_command(
    tool: str,
    source: Path,
    output: Path,
    executor_spec: str,
    concurrency: int,
    pool: int | None,
    working_dir: Path | None,
    paths: Sequence[Path],
    overrides: dict[str, Any],
    no_log: bool = False,
    store: Path | None = None,
) -> Summary:
    """Run the batch as ``batch`` does; every line goes to the run log unless ``no_log``."""
    if output.resolve() == source.resolve():
        raise ConfigurationError("the results file must not be the args file", key="output")
    executor = make_executor(executor_spec, pool, working_dir, store)
    manager = command_manager(paths, runlog=not no_log)
    manager.find_tool(tool)  # a typo fails here, once, not on every line
    base = unit_for(manager, tool, None, overrides=overrides or None, root=getattr(executor, "root", None))
    total = max(count_lines(source) - len(done_lines(output)), 0)
    progress = _progress(total)

    recorder = manager.recorder
    running = partial(run_batch, executor, base, source, output, concurrency=concurrency, recorder=recorder)

    async def main() -> Summary:
        try:
            if progress is None:
                return await running()
            with progress:
                task = progress.add_task("batch", total=total)
                return await running(on_line=lambda: progress.advance(task))
        finally:
            closing = getattr(executor, "aclose", None)
            ours = store is not None or getattr(executor, "actors", None) is not None  # not the process's shared one
            if closing is not None and ours:
                await closing()

    try:
        return anyio.run(main)
    finally:
        if recorder is not None:
            recorder.close()  # what is pending is written before the process ends


@click.command(short_help="Run a tool over every line of a JSON Lines file.")
@click.argument("tool")
@click.argument("source", metavar="ARGS.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="RESULTS.jsonl (appended)."
)
@click.option(
    "--executor",
    "executor_spec",
    default="inprocess",
    show_default=True,
    metavar="inprocess|process|ray[=ADDRESS]",
    help="Where units run: this process, or a Ray cluster (local when no ADDRESS).",
)
@click.option(
    "--concurrency", default=CONCURRENCY, show_default=True, type=click.IntRange(min=1), help="Units in flight."
)
@click.option("--pool", type=click.IntRange(1, 1024), help="Ray actors (default 2).")
@click.option(
    "--working-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Ship this folder to the Ray workers (runtime_env working_dir); tool folders inside it travel.",
)
@click.option("--no-log", is_flag=True, help="Keep these runs out of the run log (see toolcascade logs).")
@store_option
@path_option
@set_option
@debug_option
def batch(
    tool: str,
    source: Path,
    output: Path,
    executor_spec: str,
    concurrency: int,
    pool: int | None,
    working_dir: Path | None,
    paths: Sequence[Path],
    overrides: dict[str, Any],
    no_log: bool,
    store: Path | None,
    debug: bool,
) -> None:
    """Invoke TOOL once per line of ARGS.jsonl (each line is the args, as JSON).

    Writes one JSON line per input line to RESULTS.jsonl, in input order:
    {"line": N, "result": ...} or {"line": N, "error": {"type": ..., "message": ...}}.
    Lines already in RESULTS.jsonl are skipped, so an interrupted batch
    resumes where it stopped. A summary goes to stderr; the exit status is 1
    when a line failed, else 3 when a line waits for a decision (its record
    holds the token for toolcascade resume). Each line is a run in the run log
    (toolcascade logs) unless --no-log or TOOLCASCADE_RUNLOG=off. A line's
    agent keeps its conversation ($context: {session: ID} in the line) and a
    waiting line its state in the session store: --store FILE names it (with
    the in-process executor only; then resume with --store FILE too).

    \b
    Examples:
      toolcascade batch greet names.jsonl -o greetings.jsonl
      toolcascade batch tutor lessons.jsonl -o answers.jsonl --store lessons.db
      toolcascade batch score items.jsonl -o scores.jsonl --executor ray --pool 4
      toolcascade batch score items.jsonl -o scores.jsonl --executor ray=ray://head:10001 --working-dir .
    """
    with reporting(debug):
        summary = _run_command(
            tool, source, output, executor_spec, concurrency, pool, working_dir, paths, overrides, no_log, store
        )
    click.echo(summary.line(output), err=True)
    if summary.errors:
        sys.exit(1)
    if summary.suspended:
        sys.exit(SUSPENDED)


__all__ = ["Summary", "batch", "count_lines", "done_lines", "run_batch"]
