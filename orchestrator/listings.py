"""The tools an MCP server serves: listed afresh, shared while fresh, one listing at a time, and watched.

See ``orchestrator.mcp`` ("The list follows the files", "Calls under load",
"A folder too large to list") for the rules these follow.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .annotations import Offer, offer
from .collector import paused
from .errors import OrchestratorError, describe
from .manager import Manager
from .results import output_schema
from .schema import object_schema
from .tool import ToolInfo, wire_name

if TYPE_CHECKING:
    import mcp.types as types

log = logging.getLogger("orchestrator.mcp")

POLL_INTERVAL = 1.0
MAX_NAME = 128  # SEP-986
LISTING_SHARE = 4  # a listing is reused for at least this many times what it took
KNOWN = 65_536  # tools whose listing is kept with the description it was made from


@dataclass(frozen=True, slots=True)
class Listing:
    """One served tool: the ref it invokes, and what ``tools/list`` and ``prompts/list`` say about it."""

    ref: str
    name: str
    description: str | None
    schema: dict[str, Any]
    wrapped: bool  # the schema is params wrapped as ``value``
    offer: Offer  # as a tool, a prompt or both; its title and hints
    output: dict[str, Any] | None  # the outputSchema (``returns``)
    returns: Any  # ``returns`` as the metadata has it, for checking results
    output_wrapped: bool  # the outputSchema is ``returns`` wrapped as ``result``
    agent: bool = False  # it has a model: its tool calls are worth log messages (``orchestrator.progress``)

    def key(self) -> tuple[str, str | None, str]:
        """What a client sees: a change here is a list change."""
        shown = [self.schema, self.offer.to_dict(), self.output]
        return self.name, self.description, json.dumps(shown, sort_keys=True)

    def tool(self) -> types.Tool:
        """The MCP tool ``tools/list`` shows."""
        import mcp.types as types

        return types.Tool(
            name=self.name,
            title=self.offer.title,
            description=self.description,
            input_schema=self.schema,
            output_schema=self.output,
            annotations=types.ToolAnnotations.model_validate(self.offer.annotations()),
        )


class Listings:
    """The served tools of ``manager``: the latest listing, the listing in progress, the list watcher."""

    def __init__(self, manager: Manager, poll_interval: float = POLL_INTERVAL) -> None:
        self.manager = manager
        self.poll_interval = poll_interval
        self._reported: set[tuple[str, str]] = set()
        self._latest: tuple[float, dict[str, Listing]] | None = None  # (when, what) of the last listing
        self._cost = 0.0  # seconds the last listing took
        self._keys: tuple[dict[str, Listing], list[tuple[str, str | None, str]]] | None = None
        self._running: _Run | None = None  # the listing in progress on a worker thread
        self._failing: str | None = None  # the listing failure last logged (None after a success)
        # ref -> (the manager's description, its listing): a description is a new object when its files change
        self._known: dict[str, tuple[ToolInfo, Listing]] = {}

    # -- listing ---------------------------------------------------------------

    def listing(self) -> dict[str, Listing]:
        """Every servable tool by MCP name, listed afresh; problems are logged once each.

        Blocking (the full ``manager.list_tools`` pass): the server runs it
        through ``relist``, on a worker thread; it keeps nothing itself.

        Raises:
            OrchestratorError: the tools cannot be listed at all (a ``FolderLimitError``).
        """
        served: dict[str, Listing] = {}
        with paused():  # a listing's heap is kept, not freed (orchestrator.collector)
            infos = self.manager.list_tools()
        for info in infos:
            if info.error is not None:
                self._report(info.ref, f"not served: {info.error}")
                continue
            name = wire_name(info.ref)
            if name in served:
                self._report(info.ref, f"not served: its MCP name {name!r} is taken by {served[name].ref!r}")
                continue
            try:
                listing = self._listed(info)
            except (ValueError, OrchestratorError) as exc:
                self._report(info.ref, f"not served: {exc}")
                continue
            served[name] = listing
        return served

    def _listed(self, info: ToolInfo) -> Listing:
        """How the tool ``info`` describes is served; made once per description (see ``_known``).

        Raises:
            ValueError: it cannot be served (its MCP name is too long, its ``params`` is no schema).
            OrchestratorError: its metadata cannot be merged, or its ``mcp`` or ``returns`` is malformed.
        """
        known = self._known.get(info.ref)
        if known is not None and known[0] is info:
            return known[1]
        name = wire_name(info.ref)
        if len(name) > MAX_NAME:
            raise ValueError(f"its MCP name is longer than {MAX_NAME} characters")
        schema, wrapped = object_schema(info.params)
        meta = merged_meta(self.manager, info.ref)
        returns = meta.get("returns")
        output, output_wrapped = output_schema(returns, info.ref)
        found = offer(info.ref, info.kind, meta)
        agent = meta.get("model") is not None
        listing = Listing(
            info.ref, name, info.description, schema, wrapped, found, output, returns, output_wrapped, agent
        )
        if len(self._known) >= KNOWN:
            self._known.clear()
        self._known[info.ref] = (info, listing)
        return listing

    async def relist(self) -> dict[str, Listing]:
        """A new listing, made on a worker thread and kept as the latest; one at a time.

        While a listing runs, every other caller awaits its result (or its
        error) instead of starting a second one. A failure is logged once
        until a listing succeeds again.

        Raises:
            OrchestratorError: the tools cannot be listed at all (a ``FolderLimitError``).
        """
        while True:
            run = self._running
            if run is None:
                run = self._running = _Run()
                started = time.monotonic()
                try:
                    run.served = await anyio.to_thread.run_sync(self.listing)
                except OrchestratorError as exc:
                    run.error = exc
                    if describe(exc) != self._failing:
                        self._failing = describe(exc)
                        log.error("the tools cannot be listed: %s", self._failing)
                finally:
                    self._running = None
                    run.done.set()
                if run.served is not None:
                    now = time.monotonic()
                    self._cost = now - started
                    self._latest = (now, run.served)
                    self._failing = None
            else:
                await run.done.wait()
            if run.error is not None:
                raise run.error
            if run.served is not None:
                return run.served
            # the listing ended without a result (its thread raised something else): list again

    async def recent(self) -> dict[str, Listing]:
        """The latest listing while it is fresh enough to share (see the module docstring), else a new one."""
        latest = self._latest
        shared_for = max(self.poll_interval / 2, LISTING_SHARE * self._cost)
        if latest is not None and time.monotonic() - latest[0] < shared_for:
            return latest[1]
        return await self.relist()

    async def resolve(self, name: str) -> tuple[Listing | None, dict[str, Listing]]:
        """The served tool a call to ``name`` runs (None: not served), and the latest listing.

        A name the latest listing has re-checks its own tool only; one it
        lacks is looked up as a ref; only a name neither finds lists again
        (or reuses a listing fresh enough to share).

        Raises:
            OrchestratorError: a listing was needed and the tools cannot be listed.
        """
        latest = self._latest
        if latest is not None and name in latest[1]:
            listing, served = self._recheck(latest[1][name], latest)
            if listing is not None:
                return listing, served
            latest = self._latest  # not served as listed: another ref may read as the name now
        found = self._direct(name)
        if found is not None:
            return found, latest[1] if latest is not None else {}
        served = await self.recent()
        return served.get(name), served

    def servable(self, ref: str) -> Listing | None:
        """How ``ref`` would be listed now, or None when it is not served (missing, broken, hidden, unnamable)."""
        try:
            info = self.manager.describe(ref)
            return None if info.hidden else self._listed(info)
        except (OrchestratorError, ValueError):
            return None

    def _recheck(
        self, listed: Listing, latest: tuple[float, dict[str, Listing]]
    ) -> tuple[Listing | None, dict[str, Listing]]:
        """``listed`` as it is now; a change since is written into a copy of the latest listing (watchers see it)."""
        now = self.servable(listed.ref)
        if now == listed:
            return listed, latest[1]
        served = dict(latest[1])
        if now is None:
            del served[listed.name]
        else:
            served[listed.name] = now
        if self._latest is latest:
            self._latest = (latest[0], served)
        return now, served

    def _direct(self, name: str) -> Listing | None:
        """The servable tool whose ref ``name`` reads as (``__`` as ``/``, or the name itself), when exactly one is."""
        found = [
            listing
            for ref in {name.replace("__", "/"), name}
            if (listing := self.servable(ref)) is not None and listing.name == name
        ]
        return found[0] if len(found) == 1 else None

    def _report(self, ref: str, message: str) -> None:
        if (ref, message) not in self._reported:  # the watcher lists every second: say it once
            self._reported.add((ref, message))
            log.warning("tool %r %s", ref, message)

    # -- watching ----------------------------------------------------------------

    async def watch(
        self, notify: Callable[[], Awaitable[None]], seen: list[tuple[str, str | None, str]] | None
    ) -> None:
        """Poll the tool set and call ``notify`` each time it differs from ``seen``, until cancelled.

        ``seen`` None: the tools could not be listed when the watch began.
        """
        while True:
            await anyio.sleep(self.poll_interval)
            now = await self.polled()
            if now is not None and now != seen:
                seen = now
                await notify()

    async def polled(self) -> list[tuple[str, str | None, str]] | None:
        """The ``snapshot``, or None when the tools cannot be listed now (``relist`` logs that once)."""
        try:
            return await self.snapshot()
        except OrchestratorError:
            return None
        except Exception:  # a listing bug must not end the session's notifications
            log.exception("listing the tools failed")
            return None

    async def snapshot(self) -> list[tuple[str, str | None, str]]:
        """What clients see of the tool set; sessions polling together share one listing per half interval.

        Raises:
            OrchestratorError: the tools cannot be listed.
        """
        served = await self.recent()
        if self._keys is None or self._keys[0] is not served:
            self._keys = (served, [listing.key() for listing in served.values()])
        return self._keys[1]


def offer_of(manager: Manager, info: ToolInfo) -> Offer:
    """How the tool ``info`` describes is offered over MCP (``list --mcp``, ``list --json``).

    Raises:
        OrchestratorError: its metadata cannot be merged, or its ``mcp`` is malformed.
    """
    return offer(info.ref, info.kind, merged_meta(manager, info.ref))


def merged_meta(manager: Manager, ref: str) -> Mapping[str, Any]:
    """The merged metadata of ``ref`` as a call without args sees it; as written when that needs args.

    Raises:
        OrchestratorError: the tool cannot be found, loaded or its cascade resolved.
    """
    try:
        return manager.prepare(ref, {}).meta
    except OrchestratorError:  # a template that needs args: the values as written
        return {key.key: key.value for key in manager.explain(ref, render=False).keys}


class _Run:
    """A listing in progress: set ``done`` when it ends, with its ``served`` tools or its ``error``."""

    __slots__ = ("done", "served", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.served: dict[str, Listing] | None = None
        self.error: OrchestratorError | None = None
