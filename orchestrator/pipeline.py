"""Pipeline: what a tool ref compiles to for one set of search paths, built once and consumed per call.

The planner compiles a ref into a ``Pipeline`` (``Planner.pipeline``,
``Catalog.pipeline``) and keeps it with the files it came from; every call
then binds it to its args, options and parent (``pipeline.bind(args,
options, parent)``, written in ``orchestrator.context`` and
``orchestrator.binding``), the only way a
call's Context is made, and runs that context; the runner binds each
entry's own pipeline so. A Pipeline is immutable: nothing a call does
changes it, so one value serves every thread.

It holds the tool and its plan (levels, phases), its ``main`` when that is a
coroutine function (the runner awaits a leaf entry's body with no check of
its own), the verdict on each merged
key (middleware or data, and why), the sorted chain with each entry's
``when`` attached, the part of it that runs (the leading entries without
work left out, decided once here), and the pipelines of that part's tool
entries (``children``), compiled with it so the runner enters an entry
without a lookup of its own.

The chain is the one of the metadata as written: a tool whose metadata
holds templates (``templated`` names the keys) gets the values rendered per
call, but never its keys, annotations or order, which templates cannot
change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from . import binding, context

if TYPE_CHECKING:
    from .cascade import Plan
    from .context import Context
    from .ordering import Entry
    from .searchpath import SearchPath
    from .tool import Tool


class Verdict(NamedTuple):
    """What one merged key is (R-CAS-7): middleware or data, and why, for ``show``."""

    key: str
    middleware: bool
    why: str


@dataclass(frozen=True, slots=True)
class Children:
    """The pipelines of a chain's tool entries, by name, compiled for ``paths`` (an entry that did not compile is missing).

    They serve an entry entered with the same ``paths`` (a seeded call may search other folders).
    """

    paths: tuple[SearchPath, ...]
    pipelines: Mapping[str, Pipeline]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A tool ref compiled: its tool, plan, verdicts, sorted chain, the part that runs, and its entries' pipelines."""

    tool: Tool
    plan: Plan
    verdicts: tuple[Verdict, ...]
    entries: tuple[Entry, ...]  # the sorted chain, each tool entry with its ``when``
    runs: tuple[Entry, ...]  # the part of it that runs: the leading entries without work left out
    children: Children
    templated: frozenset[str]  # the keys whose values render per call (empty: every call binds this chain as is)
    main: Callable[[Context], Awaitable[Any]] | None = None  # the tool's ``main``, when a coroutine function

    bind = context.bind  # pipeline.bind(args, options, parent[, target, height, where, guard]) -> Context
    bind_call = binding.bind_call  # bind's part for all but a template-free entry

    @property
    def static(self) -> bool:
        """True when nothing depends on args: every call binds the same chain and values."""
        return not self.templated
