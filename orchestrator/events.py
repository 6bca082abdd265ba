"""Events: what a run does, for progress displays, tracing and tests.

Listeners are plain callables (``Manager(on_event=...)``) or async streams
(``async with manager.events() as stream: async for event in stream``).
Nothing is built when nobody listens. A *quiet* listener (``Events.quiet``)
hears what a run does (its model turns, tool calls, approvals, questions,
``chain.stopped``) but never ``invoke.start`` / ``invoke.end``: a manager whose
only listeners are quiet runs its calls and their chains' entries unobserved,
as fast as with no listener (the run log's recorder is one: it needs a run's
model turns, never when a call starts or ends; the eval meter another).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:  # annotations only: the module costs ~10 ms to import
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

KINDS = (
    "invoke.start",
    "invoke.end",
    "model.request",
    "model.delta",
    "model.discarded",
    "model.response",
    "tool.start",
    "tool.end",
    "approval.request",
    "approval.decision",
    "input.request",
    "input.answer",
    "chain.stopped",
    "agent.instructions",
)

_CALL_KINDS = frozenset({"invoke.start", "invoke.end"})  # when a call starts and ends: quiet listeners hear neither


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened: ``kind`` is one of ``KINDS``.

    ``tool`` is the tool the event is about (for model events: the agent),
    ``depth`` its nesting, ``run`` the id shared by one top-level invoke,
    ``iteration`` the agent loop's turn (model and tool events). ``data``:

    - ``invoke.end``: ``error`` (``"Type: message"`` or None), ``seconds``.
    - ``model.request``: ``model`` (``provider:name``), ``messages`` (the
      list the provider is sent), ``tools`` (names offered), ``response_format`` (a JSON answer
      was asked for).
    - ``model.delta``: a piece of the answer while it streams: ``text``, or
      ``call`` (the tool), ``arguments`` (a fragment of its JSON arguments)
      and ``index`` (which call of the turn).
    - ``model.discarded``: the deltas sent since the last discard will not be
      the answer (the attempt failed, or a middleware runs it again; a retry's
      deltas follow): ``why``, ``deltas`` (how many to drop).
    - ``model.response``: the assembled answer: ``model``, ``content``,
      ``calls`` (tool names), ``finish_reason``, ``usage`` (this call's
      ``prompt_tokens``, ``completion_tokens``, ``total_tokens``), ``run_usage``
      (the run's totals so far, with ``calls``: the last ``model.response``
      of a run carries its totals), ``streamed`` (deltas that made it; 0 for
      a cached answer, whose ``content`` a display shows instead).
    - ``tool.start``: ``call`` (the tool), ``arguments``; ``tool.end``:
      ``call``, ``error`` (None on success), ``held`` (True when the call
      waits for an approval decision), ``terminated`` (True when a
      ``tool-pipeline`` middleware ended the agent's loop: ``Termination``).
    - ``approval.request``: ``request`` (what the approver is asked: ``tool``,
      ``args``, ``reason``, ...), ``by`` (the approver); ``approval.decision``:
      ``call``, ``action`` (approve / deny / edit), ``reason``, ``by``,
      ``args`` (the args the call runs with).
    - ``input.request``: a middleware asks the caller (``ask_caller``):
      ``request`` (``question``, ``schema``, ``tool``), ``by`` (who answers);
      ``input.answer``: ``answer``, ``by``.
    - ``chain.stopped``: an entry ended the chain of ``tool`` before the rest
      of it ran (it returned without calling ``next()``, or finished the
      chain first): a cache hit, an answer given in place of the body, or a
      middleware that forgot ``next()``. ``entry`` (its name), ``skipped``
      (the entries after it, not run), ``body_ran`` (whether the tool's body
      ran before it ended). ``skipped`` leaves out entries that had no work for
      the tool (R-CHAIN-12). ``describe(event)`` says it in words.
    """

    kind: str
    tool: str
    depth: int
    run: str
    iteration: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)


Listener = Callable[[Event], Any]


def describe(event: Event) -> str | None:
    """The line for a person about ``event`` (``run --verbose`` prints it on stderr), or None when it needs none.

    ``chain.stopped``: ``cache ended the chain of 'summarize': the tool's body did not run``;
    ``agent.instructions``: one line per instruction file, applied or not and why.
    """
    data = event.data
    if event.kind == "agent.instructions":  # which instruction files apply, and why (orchestrator.instructions)
        return "\n".join(
            f"{f['file']} ({f['host']}): {'applied: ' if f['applied'] else ''}{f['reason']}" for f in data["files"]
        )
    if event.kind != "chain.stopped":
        return None
    skipped = ", ".join(data["skipped"])
    head = f"{data['entry']} ended the chain of {event.tool!r}"
    if data["body_ran"]:
        return f"{head} after the tool's body: {skipped} did not run"
    return f"{head}: the tool's body did not run" + (f", nor did {skipped}" if skipped else "")


class Events:
    """The listeners of one manager.

    ``listeners`` and ``streams`` hear every event, each call's and chain
    entry's ``invoke.start`` and ``invoke.end`` too. ``quiet`` listeners hear
    the model, tool, approval and input events and ``chain.stopped``; their
    presence alone observes no call (``observed`` is false: nobody is told
    when a call starts or ends, so no ``invoke.start`` / ``invoke.end`` is
    built for them).
    """

    def __init__(self) -> None:
        self.listeners: list[Listener] = []
        self.streams: list[MemoryObjectSendStream[Event]] = []
        self.quiet: list[Listener] = []

    def __bool__(self) -> bool:
        return bool(self.listeners or self.streams or self.quiet)

    @property
    def observed(self) -> bool:
        """Whether someone hears when a call starts and ends (``invoke.start`` / ``invoke.end``): not quiet listeners."""
        return bool(self.listeners or self.streams)

    def emit(self, event: Event) -> None:
        """Hand ``event`` to every listener (``invoke.start`` / ``invoke.end``: not to quiet ones); a listener's
        failure never breaks the run."""
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # a broken progress display must not fail the tool
                continue
        for listener in self.quiet if event.kind not in _CALL_KINDS else ():
            try:
                listener(event)
            except Exception:
                continue
        for stream in list(self.streams):
            try:
                stream.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.streams.remove(stream)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        """An async iterator of events while the context is open."""
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        self.streams.append(send)
        try:
            async with receive:
                yield receive
        finally:
            if send in self.streams:
                self.streams.remove(send)
            send.close()
