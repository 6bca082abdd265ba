"""check: load every tool and authority under the search paths and report every problem (SPEC section 8).

Nothing is invoked and no template is rendered: files are loaded, cascades
merged without args, chains built and sorted, and template strings compiled
(``orchestrator.inspection``). Every problem is collected, so one broken file
never hides another. Warnings point at likely typos: unknown frontmatter keys,
and metadata keys that miss a tool name by one edit (they silently become
data instead of middleware).

Folders that tools add through ``paths:`` metadata and that the program does
not trust are read too: a tool there whose model's endpoint or key a file
from such a folder chose is reported at that file's line (an agent refuses
it at run time, ``orchestrator.agent.model.authorize_model``).

A check over files unchanged since an earlier one returns what that one found
(``orchestrator.verdicts``) without importing the inspection's planner,
templates and schemas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .collector import paused
from .problems import Problem as Problem
from .problems import Report
from .verdicts import Verdicts

if TYPE_CHECKING:
    from .manager import Manager

_LATER = {"MIN_TYPO_LENGTH": "typos", "NearNames": "typos", "one_edit_apart": "typos"}
"""Names this module offers from modules it imports only when asked (PEP 562)."""


def check(manager: Manager) -> list[Problem]:
    """Every problem in the tools and authorities of ``manager``'s search paths (not the built-ins).

    Problems are sorted by file and line; each is reported once. A check over
    files unchanged since an earlier one returns what that one found
    (``orchestrator.verdicts``); instruction files are read every time.
    """
    # One look at each file and folder; the collector paused: a check keeps what it loads (orchestrator.collector).
    with manager.registry.snapshot() as run, paused():
        verdicts = Verdicts.open(manager)
        kept = verdicts.kept() if verdicts is not None else None
        if kept is not None:
            report = Report(manager.cwd)
            report.found = dict.fromkeys(kept)
            # The names of every folder, from the on-disk index, as a check leaves them (the CLI counts the tools).
            for _found in manager.registry.discover(manager.paths, parse=True):
                pass
        else:
            from .inspection import inspect_files  # the planner, templates and schemas: only when files changed

            if verdicts is not None:
                verdicts.begin(manager)
            looked: set[str] = set()
            report = inspect_files(manager, run, looked)
            if verdicts is not None:
                verdicts.keep(manager, run, looked, report.problems())
    from .instructions import instruction_problems  # instruction files its host would ignore (issue 30)

    for problem in instruction_problems(manager.cwd, [sp.root for sp in manager.paths[:-1]], manager.limits):
        report.add(problem.path, problem.line, problem.message, problem.severity)
    return report.problems()


def __getattr__(name: str) -> Any:
    """``one_edit_apart``, ``NearNames``, ``MIN_TYPO_LENGTH``: imported from ``orchestrator.typos`` when first asked."""
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __package__), name)
