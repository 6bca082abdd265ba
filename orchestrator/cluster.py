"""The Ray executor: units run on a pool of Ray async actors (the ``ray`` extra).

Each actor is an async actor (``max_concurrency`` 1,000 by default) that keeps
one Manager per folder set (``orchestrator.units.Managers``) and awaits
``run_unit`` on Ray's own event loop: never ``anyio.run`` inside an actor.
Ray is imported only when a ``RayExecutor`` first submits; ``import
orchestrator`` never imports it.

Tool folders reach the workers three ways (see docs/scaling.md): an installed
package or image (folders inside site-packages travel as package
references), ``runtime_env={"working_dir": ...}`` in development (folders
under it travel as relative paths), or a shared filesystem (absolute paths).

A timeout or cancellation on the caller cancels the actor task
(``ray.cancel``), so the tool's ``finally`` blocks run on the worker. An
actor that dies (killed, out of memory, its node lost) is replaced, and
the units it held are submitted again, up to ``retries`` times: a unit runs
at least once, its reply arrives once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from .errors import ConfigurationError, InvocationError
from .units import Managers, Unit, dump_unit, run_unit, unwrap

log = logging.getLogger("orchestrator.cluster")

RAY_MISSING = "the ray executor needs Ray: pip install 'toolcascade[ray]' (or pip install 'ray>=2.40,<3')"
MAX_CONCURRENCY = 1_000  # units one actor runs at once (they await I/O on its event loop)
RETRIES = 3  # times a unit is submitted again after its actor died
_remote: Any = None  # the Worker class as a Ray actor class, made once


def _ray() -> Any:
    """The ray module, imported on first use with a message naming the extra when it is missing.

    Raises:
        ConfigurationError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(RAY_MISSING) from exc
    return ray


class Worker:
    """A Ray async actor running units; one Manager per folder set, cached by content hash."""

    def __init__(self) -> None:
        self.managers = Managers()

    async def run(self, unit: str) -> str:
        """Run one unit (JSON text); the reply is JSON text (``orchestrator.units.run_unit``)."""
        return await run_unit(self.managers, unit)

    async def run_many(self, units: list[str]) -> list[str]:
        """Run several units concurrently on this actor; replies in the same order."""
        import asyncio

        return list(await asyncio.gather(*(run_unit(self.managers, unit) for unit in units)))

    async def echo(self, value: Any) -> Any:
        """Return ``value``: a bare round trip, the floor the benchmark measures units against."""
        return value

    def pid(self) -> int:
        """The worker's process id (tests kill it)."""
        return os.getpid()

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


async def wait(ref: Any) -> Any:
    """Await a Ray ObjectRef on any anyio backend: natively on asyncio, through its future on trio.

    On cancellation (a caller's timeout) the actor task is cancelled with
    ``ray.cancel``, so the worker's ``finally`` blocks run.
    """
    import sniffio

    try:
        if sniffio.current_async_library() == "asyncio":
            return await ref
        import trio

        future = ref.future()
        done = anyio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:  # the caller's run ended first: nobody waits
                pass

        future.add_done_callback(wake)
        await done.wait()
        return future.result()
    except BaseException:
        if not _finished(ref):
            _ray().cancel(ref)
        raise


def _finished(ref: Any) -> bool:
    try:
        return bool(ref.future().done())
    except Exception:  # a ref Ray no longer tracks
        return True


class RayExecutor:
    """Runs units on a pool of Ray async actors.

    ``address``: the cluster (``ray.init(address=...)``; default: the Ray
    this process already joined, else a local one). ``pool``: actors.
    ``working_dir``: a local folder shipped to the workers (Ray uploads it
    when this executor joins the cluster; when the program called
    ``ray.init`` itself, pass the ``working_dir`` it gave there); tool
    folders under it travel as relative paths. ``runtime_env``: the actors'
    other runtime settings (``env_vars``, ``pip`` ...). ``max_concurrency``:
    units at once per actor. ``retries``: resubmissions of a unit whose
    actor died. ``spread``: place the actors on different nodes.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        pool: int = 2,
        working_dir: str | os.PathLike[str] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        max_concurrency: int = MAX_CONCURRENCY,
        retries: int = RETRIES,
        spread: bool = True,
    ) -> None:
        if not isinstance(pool, int) or pool < 1:
            raise ConfigurationError(f"pool must be a positive integer, not {pool!r}", key="pool")
        self.address = address
        self.pool = pool
        self.runtime_env = dict(runtime_env) if runtime_env else None
        if self.runtime_env and "working_dir" in self.runtime_env:
            raise ConfigurationError(
                "give the working_dir as RayExecutor(working_dir=...): Ray ships a local folder only "
                "when it joins the cluster",
                key="working_dir",
            )
        self.root = Path(working_dir).resolve() if working_dir is not None else None
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.spread = spread
        self.actors: list[Any] = []
        self._next = 0

    # -- the pool ---------------------------------------------------------------

    def start(self) -> list[Any]:
        """Join Ray (when this process has not) and start the actors; idempotent.

        Raises:
            ConfigurationError: Ray is not installed.
        """
        if self.actors:
            return self.actors
        ray = _ray()
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            job = {**(self.runtime_env or {}), **({"working_dir": str(self.root)} if self.root else {})}
            ray.init(
                address=self.address,
                runtime_env=job or None,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        self.actors = [self._actor(index) for index in range(self.pool)]
        return self.actors

    def _actor(self, index: int) -> Any:
        """A new actor; with ``spread``, actor ``index`` prefers alive node ``index`` (round robin)."""
        ray = _ray()
        options: dict[str, Any] = {"max_concurrency": self.max_concurrency, "max_restarts": 0}
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env
        if self.spread:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # Ray's own SPREAD keeps 0-CPU actors together; name the node, softly (a lost node is skipped).
            nodes = sorted(node["NodeID"] for node in ray.nodes() if node.get("Alive"))
            if len(nodes) > 1:
                node = nodes[index % len(nodes)]
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
        global _remote
        if _remote is None:
            _remote = ray.remote(Worker)
        return _remote.options(**options).remote()

    def _pick(self) -> tuple[int, Any]:
        actors = self.start()
        index = self._next % len(actors)
        self._next += 1
        return index, actors[index]

    def _replace(self, index: int, dead: Any) -> None:
        """Put a fresh actor in ``index`` unless another caller already replaced ``dead``."""
        if self.actors[index] is dead:
            log.warning("a Ray worker died; starting a new one in its place")
            self.actors[index] = self._actor(index)

    async def _call(self, method: str, payload: Any) -> Any:
        """Call ``method`` on the next actor; on actor death replace it and try again (``retries`` times).

        Raises:
            InvocationError: the unit's actors kept dying.
        """
        ray = _ray()
        lost = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
        for attempt in range(self.retries + 1):
            index, actor = self._pick()
            try:
                return await wait(getattr(actor, method).remote(payload))
            except lost as exc:
                self._replace(index, actor)
                if attempt == self.retries:
                    raise InvocationError(
                        f"the Ray worker died {attempt + 1} times running this unit: {type(exc).__name__}"
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the Executor protocol --------------------------------------------------------

    async def submit(self, unit: Unit) -> Any:
        """Run ``unit`` on the pool and return its result.

        Raises:
            OrchestratorError: the unit's error, as the same subclass.
        """
        return unwrap(await self._call("run", dump_unit(unit)))

    async def submit_many(self, units: list[Unit]) -> list[Any]:
        """Run several units as one actor call (fewer round trips); each item is a result or an error.

        Raises:
            InvocationError: the actors kept dying.
        """
        replies = await self._call("run_many", [dump_unit(unit) for unit in units])
        out: list[Any] = []
        for reply in replies:
            try:
                out.append(unwrap(reply))
            except Exception as exc:
                out.append(exc)
        return out

    async def echo(self, value: Any) -> Any:
        """A bare actor round trip (the benchmark's floor)."""
        return await self._call("echo", value)

    async def aclose(self) -> None:
        """Stop the actors (the Ray connection stays: the program may use it)."""
        ray = _ray()
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # already dead
                pass
        self.actors = []
