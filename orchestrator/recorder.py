"""The recorder: what joins a Manager to its run log (``Manager(runlog=...)``).

The top-level ``invoke`` (``orchestrator.invocation``) opens each call's
run with the recorder and hands it the finished call; from the first one on,
the recorder listens to the manager's events (a quiet listener) for the open
runs' model turns (``model.request``, ``model.response``, ``tool.start``,
``tool.end``), and hands the whole to the ``RunLog``, whose writer thread
redacts and writes it. A call
made elsewhere (a unit on an executor, a batch line) is recorded with
``record``. A tool whose merged metadata says ``runlog: false`` (set by
itself, or for a whole folder by its ``AUTHORITY.md``) is never recorded.
Nothing here ever fails the call it records.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .runlog import Call, RunLog, default_runlog

if TYPE_CHECKING:
    from .callers import Caller
    from .context import Context
    from .events import Event
    from .manager import Manager

log = logging.getLogger("orchestrator.runlog")

OPEN_RUNS = 1_024  # runs whose events are being collected at once (a run that never finishes is forgotten)
TURN_KINDS = frozenset({"model.request", "model.response", "tool.start", "tool.end"})
SWITCH = "runlog"  # metadata: ``runlog: false`` keeps a tool's runs (an authority's: its folder's) out of the log


class Recorder:
    """Hands a Manager's finished top-level calls to its ``RunLog``, with the model turns its events told.

    ``owned``: the manager opened the log (from a path) and closes it; a
    ``RunLog`` the program passed stays the program's (``close`` writes what
    is pending).
    """

    def __init__(self, manager: Manager, runlog: RunLog, *, owned: bool) -> None:
        self.runlog = runlog
        self.owned = owned
        self._manager = manager
        self._turns: OrderedDict[str, list[Event]] = OrderedDict()
        self._described: dict[str, tuple[str | None, Any, Any, bool]] = {}
        self._listening = self.listen
        self._lookup = self._params  # made once: each recorded call carries them
        self._filling = self.fill
        self._listens = False  # listening starts with the first top-level invoke (begin): a batch's units never do
        self._lock = threading.Lock()

    def listen(self, event: Event) -> None:
        """Keep an open run's model turns (a quiet event listener)."""
        kind = event.kind
        if kind in TURN_KINDS:
            turns = self._turns.get(event.run)
            if turns is not None:
                sent = event.data.get("messages") if kind == "model.request" else None
                if isinstance(sent, list):  # the list as sent now: a middleware may change it before the row is written
                    event = replace(event, data={**event.data, "messages": list(sent)})
                turns.append(event)

    def open(self, ctx: Context) -> None:
        """Collect the model turns of the top-level call ``ctx`` is bound for, from now until ``finish``."""
        turns = self._turns
        turns.setdefault(ctx.shared.id, [])
        if len(turns) > OPEN_RUNS:
            turns.popitem(last=False)

    def begin(self) -> tuple[float, float]:
        """When a top-level invoke starts: wall-clock time and the performance counter.

        The first one starts listening to the manager's events for model
        turns: until then the manager has no listener on the recorder's
        account, so a batch (whose lines are units, never ``invoke``) emits no
        event for it. The recorder is a quiet listener (``Events.quiet``): no
        call nor chain entry is observed on its account.
        """
        if not self._listens:
            with self._lock:
                if not self._listens:
                    self._manager.events.quiet.append(self._listening)
                    self._listens = True
        return time.time(), time.perf_counter()

    def finish(
        self,
        begun: tuple[float, float],
        ctx: Context | None,
        ref: Any,
        args: Any,
        caller: Caller | None,
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Record a finished top-level call (``ctx`` is None when it failed before its context was made).

        Only what the call leaves behind is taken here (its metadata, usage,
        tool and search paths, its model turns), not the context itself:
        the context is freed here as it is without a run log, not on the
        writer thread (whose freeing of objects this thread made cost both
        threads more than taking those few). The record is completed on the
        log's writer thread (``fill``), off the event loop. Never raises: a
        failure to record is a warning.
        """
        try:
            seconds = time.perf_counter() - begun[1]
            name = ref if type(ref) is str else str(getattr(ref, "name", ref))
            if ctx is None:
                call = Call(_new_id(), name, args, begun[0], seconds, result, error)
            else:
                run = ctx.shared.id
                call = Call(run, name, args, begun[0], seconds, result, error)
                call.events = self._turns.pop(run, ())
                call.meta = ctx.meta
                usage = ctx.shared.usage
                if usage:
                    call.usage = dict(usage)
                call.env = bool(ctx.trust.get("env"))
                call.context = (ctx.tool, ctx.paths)
                call.fill = self._filling
            call.caller = caller.name if caller is not None else None
            call.lookup = self._lookup
            self.runlog.add(call)
        except Exception as exc:
            log.warning("run log %s: cannot record a run: %s", self.runlog.path, exc)

    def fill(self, call: Call, looked: dict[Any, Any]) -> bool:
        """Complete a call's record from what ``finish`` took, on the log's writer thread; False: not kept.

        Its tool's metadata may keep it out of the log (``runlog: false``,
        set by itself or by its folder's ``AUTHORITY.md``). ``looked`` lives
        for one batch of rows: a tool's plan levels are looked up once per
        batch (its files checked once per batch, as a run checks them once).
        """
        tool, paths = call.context
        call.context = None
        meta = call.meta
        if meta is None:
            return True
        if meta.get(SWITCH) is False:
            return False
        call.tool = tool.name
        call.params, call.returns = meta.get("params"), meta.get("returns")
        model = meta.get("model")
        if model is not None and isinstance(model, Mapping) and isinstance(model.get("api-key-env"), str):
            call.secrets.append(os.environ.get(model["api-key-env"]))
        key = (id(tool), id(paths))  # both are kept in ``looked`` with their levels: their ids are no other's
        found = looked.get(key)
        if found is None:
            try:  # the plan is cached: looked up here, off the event loop
                levels = self._manager.planner.plan(tool, paths, set()).levels
            except Exception:  # a tool changed or gone meanwhile: its levels are left out
                levels = ()
            found = looked[key] = (tool, paths, levels)
        call.levels = found[2]
        return True

    def record(
        self,
        ref: str,
        args: Any,
        *,
        started: float,
        seconds: float,
        result: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """Record a top-level call made outside this manager's ``invoke`` (a unit on an executor, a batch line).

        Its tool's ``params`` and ``returns`` are looked up for redaction;
        its metadata hash, levels and model turns are unknown here.
        """
        tool, params, returns, kept = self._schemas(ref)
        if not kept:
            return
        call = Call(id=_new_id(), ref=ref, args=args, started=started, seconds=seconds, result=result, error=error)
        call.lookup = self._lookup
        call.tool, call.params, call.returns = tool, params, returns
        self.runlog.add(call)

    def _schemas(self, ref: str) -> tuple[str | None, Any, Any, bool]:
        """``ref``'s tool name, ``params``, ``returns`` and whether its runs are kept (``runlog`` is not false).

        Looked up once per ref (a batch records many lines).
        """
        found = self._described.get(ref)
        if found is None:
            manager = self._manager
            try:
                info = manager.describe(ref)
                tool = manager.find_tool(ref)
                kept = manager.planner.plan(tool, manager.paths, set()).raw.values.get(SWITCH) is not False
                found = info.name, info.params, tool.metadata.get("returns"), kept
            except Exception:
                found = None, {"x-redact": True}, None, True  # its params are unknown: its args are not kept
            if len(self._described) >= OPEN_RUNS:
                self._described.clear()
            self._described[ref] = found
        return found

    def _params(self, ref: str) -> Any:
        """A called tool's merged ``params`` (for the arguments of ``tool.start``); unknown: all redacted."""
        try:
            return self._manager.describe(ref).params
        except Exception:
            return {"x-redact": True}

    def close(self) -> None:
        """Stop listening; write what is pending (and close the log when the manager opened it)."""
        listeners = self._manager.events.quiet
        if self._listening in listeners:
            listeners.remove(self._listening)
        if self.owned:
            self.runlog.close()
        else:
            self.runlog.flush()


def _new_id() -> str:
    """A new run id (``binding.run_id``, imported on the first call: a batch records thousands)."""
    if not _RUN_ID:
        from .binding import run_id

        _RUN_ID.append(run_id)
    return _RUN_ID[0]()


_RUN_ID: list[Callable[[], str]] = []


def recorder_for(manager: Manager, runlog: Any) -> Recorder | None:
    """The recorder ``Manager(runlog=value)`` means: a path or a ``RunLog``, ``True`` for ``default_runlog()``.

    Raises:
        ConfigurationError: anything else.
    """
    if runlog is None or runlog is False:
        return None
    if runlog is True:
        found = default_runlog()
        return Recorder(manager, found, owned=True) if found is not None else None
    if isinstance(runlog, RunLog):
        return Recorder(manager, runlog, owned=False)
    if isinstance(runlog, (str, os.PathLike)):
        return Recorder(manager, RunLog(runlog), owned=True)
    raise ConfigurationError(
        f"runlog must be a path, a RunLog, True (the default file) or None, not {type(runlog).__name__}",
        key="runlog",
    )


async def recorded(manager: Manager, tool: str, args: Any, call: Callable[[], Awaitable[Any]]) -> Any:
    """``await call()`` (a call made on an executor, as ``run --executor`` does), recorded when ``manager`` keeps a run log."""
    recorder = manager.recorder
    if recorder is None:
        return await call()
    started, clock = time.time(), time.perf_counter()
    try:
        result = await call()
    except Exception as exc:
        recorder.record(tool, args, started=started, seconds=time.perf_counter() - clock, error=exc)
        raise
    recorder.record(tool, args, started=started, seconds=time.perf_counter() - clock, result=result)
    return result
