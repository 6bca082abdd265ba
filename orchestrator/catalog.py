"""Catalog: one Manager's tools and authorities, found through its search paths and compiled into pipelines.

It wires the registry (finding and reading files, the caches that follow
edits), the authorities and the planner for one set of search paths, and
answers what the Manager's finding methods ask: a search path for a folder,
a tool, its authority and their chain, and ``pipeline(ref, paths)``, what a
ref compiles to (``orchestrator.pipeline``); ``unsorted`` is explain's
pipeline of a tool whose ``$order`` has a cycle, which compiles to none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .authorities import Authorities, Authority
from .limits import Limits
from .options import folders
from .planner import Planner
from .registry import Registry, SearchPath, builtin_folder
from .tool import Tool

if TYPE_CHECKING:
    from collections.abc import Callable

    from .pipeline import Pipeline

Folders = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
"""A folder or several (``options.folders`` reads them)."""


class Catalog:
    """The search paths of one Manager, with the registry, authorities and planner that serve them.

    ``paths`` are searched in order, the built-in ``tools/`` last; they are
    trusted. ``trusted`` are the folders the program marked trusted when
    metadata adds them. The built-in folders are watched for edits only in a
    source checkout (``watch_builtins`` None) or when asked.
    """

    __slots__ = ("paths", "trusted", "registry", "authorities", "planner", "pipeline")

    def __init__(
        self, paths: Folders, trusted_paths: Folders, watch_builtins: bool | None, limits: Limits, formats: Any
    ) -> None:
        self.paths = (*(SearchPath.of(p) for p in folders(paths)), SearchPath.of(builtin_folder("tools")))
        self.trusted = frozenset(Path(p).resolve() for p in folders(trusted_paths))
        builtins = (builtin_folder("tools"), builtin_folder("authorities"))
        if watch_builtins is None:  # an installed package's files change only on reinstall
            watch_builtins = builtins[0].parent.name != "builtin"
        self.registry = Registry(self.paths, () if watch_builtins else builtins, limits, formats)
        self.authorities = Authorities(self.registry)
        self.planner = Planner(self.registry, self.authorities)
        # What ``ref`` compiles to against some search paths, with the files its run has checked: the planner's
        # own method (a bound method in a slot: no call of ours in between on the hot path).
        self.pipeline: Callable[[str, tuple[SearchPath, ...], set[str] | None], Pipeline] = self.planner.pipeline

    def search_path(self, folder: str | os.PathLike[str]) -> SearchPath:
        """A search path for ``folder``: trusted when the program marked it (or it is a base path)."""
        root = Path(folder).resolve()
        trusted = root in self.trusted or any(sp.root == root for sp in self.paths)
        return SearchPath(str(root), trusted)

    def search_paths(self, given: Folders | None) -> tuple[SearchPath, ...]:
        """The search paths of ``given`` folders then the built-ins, or the catalog's own when None."""
        if given is None:
            return self.paths
        return (*(self.search_path(p) for p in folders(given)), self.paths[-1])

    def find_tool(self, ref: str, given: Folders | None = None) -> Tool:
        """Resolve ``ref`` against ``given`` folders (default: the catalog's paths), first match wins."""
        return self.registry.find(ref, self.search_paths(given), None)

    def find_authority(self, tool: Tool | str) -> Authority:
        """The nearest authority of ``tool`` (a tool, or a ref found first)."""
        if isinstance(tool, str):
            tool = self.find_tool(tool)
        return self.authorities.find(tool, self.paths, None)

    def authority_chain(self, tool: Tool | str) -> tuple[Authority, ...]:
        """Every authority that contributes to ``tool``, root-most first."""
        if isinstance(tool, str):
            tool = self.find_tool(tool)
        return self.authorities.chain(self.find_authority(tool), self.paths, None)

    def unsorted(self, ref: str | Tool, paths: tuple[SearchPath, ...], checked: set[str] | None) -> Pipeline:
        """``ref``'s pipeline with its chain unsorted: what explain shows of a tool whose ``$order`` has a cycle.

        Such a tool compiles to no pipeline (``pipeline`` raises
        ``OrderCycleError``); this one holds the middleware entries in merged
        order, each with its ``when``, all of them run, and no entry's
        pipeline compiled ahead. It is made when asked, never cached.

        Raises:
            OrchestratorError: the ref finds no tool, or its file or cascade is malformed.
        """
        from .ordering import unsorted_chain
        from .pipeline import Children, Pipeline  # the running layer's (a pipeline binds calls); only for explain

        planner = self.planner
        tool = ref if isinstance(ref, Tool) else self.registry.find(ref, paths, checked)
        plan = planner.plan(tool, paths, checked)
        verdicts = planner.toolkeys(tool, plan.raw, paths, checked)
        entries = tuple(planner.conditioned(unsorted_chain(plan.raw, verdicts), paths, checked))
        templated = frozenset(key for level in plan.rest for key in level.templates)  # rest: () when none has one
        return Pipeline(tool, plan, verdicts, entries, entries, Children(paths, {}), templated)
