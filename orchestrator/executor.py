"""Executors: where a unit of work runs — in this process, or on an engine such as Ray.

A unit is plain JSON (see ``orchestrator.units``, which makes and runs
them; its names are re-exported here). An ``Executor`` has one method,
``async submit(unit) -> result``; the result is the tool's (JSON) result,
and a failure comes back as the same ``OrchestratorError`` subclass with its
fields (tool, path, line, level, key). The core never imports an engine:
``executor_for("ray")`` imports ``orchestrator.cluster`` (and Ray) only when
asked; the engines import ``orchestrator.units``, never this module.

What a worker sees: a copy of the JSON-serialisable seed. Shared nonlocals,
the run history and the parent context stay on the caller; the worker's
invocation-cycle detection sees only the remote part of the pipeline.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .errors import ConfigurationError
from .units import LOCAL_ONLY as LOCAL_ONLY
from .units import MANAGERS as MANAGERS
from .units import REPLAYED as REPLAYED
from .units import UNIT_VERSION as UNIT_VERSION
from .units import Managers as Managers
from .units import Unit as Unit
from .units import as_json as as_json
from .units import continuation as continuation
from .units import dump_error as dump_error
from .units import dump_unit as dump_unit
from .units import folder_ref as folder_ref
from .units import folders_digest as folders_digest
from .units import load_error as load_error
from .units import on_worker as on_worker
from .units import resolve_ref as resolve_ref
from .units import run_unit as run_unit
from .units import unit_for as unit_for
from .units import unwrap as unwrap

if TYPE_CHECKING:
    from .manager import Manager


ENGINES = ("inprocess", "process", "ray")  # what ``executor_for`` and ``delegate: {engine: ...}`` take


@runtime_checkable
class Executor(Protocol):
    """Runs units: ``await executor.submit(unit)`` returns the tool's result or raises its error."""

    async def submit(self, unit: Unit) -> Any:
        """Run ``unit`` and return its result.

        Raises:
            OrchestratorError: the unit's error, as the same subclass with its fields.
        """
        ...


class InProcessExecutor:
    """Runs units in this process, on the caller's event loop, exactly as a worker would (the default).

    Units and replies go through JSON, so what works here works on a cluster.
    ``sessions`` is the session store of the Managers units run in (``Managers``).
    """

    def __init__(self, sessions: Any = None) -> None:
        self.managers = Managers(sessions=sessions)

    async def submit(self, unit: Unit) -> Any:
        """Run ``unit`` here and return its result.

        Raises:
            OrchestratorError: the unit's error.
        """
        return unwrap(await run_unit(self.managers, dump_unit(unit)))

    def close(self) -> None:
        """Close the Managers kept for units (see ``Managers.close``); a later unit makes new ones."""
        self.managers.close()

    async def aclose(self) -> None:
        """``close()``."""
        self.close()


async def invoke_on(
    executor: Any,
    manager: Manager,
    ref: str,
    args: Any = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> Any:
    """Invoke ``ref`` as one unit on ``executor`` (any spec ``executor_for`` takes), with ``manager``'s folders.

    What ``toolcascade run --executor`` does: the whole invocation runs on
    the executor, and its result (or error) comes back.

    Raises:
        OrchestratorError: the unit's error, as the same subclass.
    """
    runner = executor_for(executor)
    return await runner.submit(
        unit_for(manager, ref, args, overrides=overrides, timeout=timeout, root=getattr(runner, "root", None))
    )


_executors: dict[tuple[str, str | None, int | None], Any] = {}


def close_executors() -> None:
    """End what this process's executors hold; each starts again when a unit needs it.

    The in-process engine's Managers are closed and every process pool's
    workers are killed and reaped (``Manager.close`` of the process's last
    open Manager calls this). Ray executors are left to their ``aclose``.
    """
    for found in list(_executors.values()):
        if isinstance(found, InProcessExecutor):
            found.close()
    pools = sys.modules.get("orchestrator.processes")  # not imported: no pool was ever made
    if pools is not None:
        pools.close_pools()


def executor_for(spec: Any, default: Any = None) -> Any:
    """The executor a spec names, made once per process: ``"inprocess"``, ``"process"``, ``"ray"``,
    ``"ray=ADDRESS"``, ``{engine, address, pool}``, an ``Executor``, or None (``default``,
    else in-process). ``process`` is a pool of worker processes killed at their call's
    deadline (``orchestrator.processes``), for CPU-bound tools.

    Raises:
        ConfigurationError: an unknown engine or a malformed spec.
    """
    if spec is None:
        spec = default if default is not None else "inprocess"
    if not isinstance(spec, (str, Mapping)):
        if isinstance(spec, Executor):
            return spec
        raise ConfigurationError(f"an executor is 'inprocess', 'process', 'ray[=ADDRESS]' or an Executor, not {spec!r}")
    if isinstance(spec, str):
        engine, _, address = spec.partition("=")
        spec = {"engine": engine, "address": address or None}
    engine = spec.get("engine") or "inprocess"
    address, pool = spec.get("address"), spec.get("pool")
    if engine not in ENGINES:
        raise ConfigurationError(f"unknown engine {engine!r}: use 'inprocess', 'process' or 'ray'", key="engine")
    if address is not None and not isinstance(address, str):
        raise ConfigurationError(f"address must be a string, not {type(address).__name__}", key="address")
    if address is not None and engine != "ray":
        raise ConfigurationError(f"address is for engine 'ray' only, not {engine!r}", key="address")
    if pool is not None and (not isinstance(pool, int) or isinstance(pool, bool) or not 1 <= pool <= 1024):
        raise ConfigurationError(f"pool must be an integer from 1 to 1024, not {pool!r}", key="pool")
    key = (str(engine), address, pool)
    found = _executors.get(key)
    if found is None:
        if engine == "inprocess":
            found = InProcessExecutor()
        elif engine == "process":
            from .processes import ProcessExecutor  # worker processes only for programs that ask for them

            found = ProcessExecutor(pool=pool)
        else:
            from .cluster import RayExecutor  # Ray only for programs that ask for it

            found = RayExecutor(address=address, pool=pool or 2)
        _executors[key] = found
    return found


__all__ = [
    "Executor",
    "InProcessExecutor",
    "Managers",
    "Unit",
    "close_executors",
    "continuation",
    "dump_error",
    "dump_unit",
    "executor_for",
    "invoke_on",
    "load_error",
    "on_worker",
    "run_unit",
    "unit_for",
    "unwrap",
]
