"""Explain binds through the one door (issue 26, point 3): ``binding.prepare`` reads the compiled Pipeline.

``show`` / ``Manager.explain`` get their context from ``Pipeline.bind_call``,
as a call does, in explain's modes: templates as written (``render=False``),
the chain of a tool whose ``$order`` has a cycle left unsorted
(``sort=False``, ``Catalog.unsorted``), the leading idle entries kept
(``prune=False``, R-CHAIN-12), and override keys from an untrusted caller
checked against the tools it may call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Manager, OrderCycleError, SecurityError
from orchestrator.binding import prepare
from orchestrator.callers import Caller
from orchestrator.options import NO_OPTIONS, extract_options
from orchestrator.pipeline import Pipeline

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"
# Its ``when`` asks for a ``params`` key: on a tool without one it is idle, and leads the chain.
IDLE = "frontmatter = {'when': {'meta': ['params']}}\n\n" + PASS
CYCLE = "---\nmetadata:\n  a: {}\n  b: {}\n  $order:\n    a: {after: [b]}\n    b: {after: [a]}\n---\nx\n"

Write = Callable[[str, str], Path]


def names(chain: Any) -> list[str]:
    return [entry.name for entry in chain]


def test_explain_binds_the_compiled_pipeline_through_bind_call(
    write: Write, tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One door: explain's context comes from ``Pipeline.bind_call``, handed the pipeline the catalog compiled."""
    write("tools/a.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  a: {who: '{{ args.who }}'}\n---\nHi {{ args.who }}\n")
    manager = Manager([tools])
    bound: list[Pipeline] = []
    door = Pipeline.bind_call

    def spy(pipeline: Pipeline, *rest: Any) -> Any:
        bound.append(pipeline)
        return door(pipeline, *rest)

    monkeypatch.setattr(Pipeline, "bind_call", spy)
    explained = manager.explain("page", {"who": "Ada"})
    assert bound == [manager.catalog.pipeline("page", manager.paths, None)]
    assert next(e for e in explained.chain if e.name == "a").args == {"who": "Ada"}
    written = manager.explain("page", render=False)  # templates as written
    assert next(e for e in written.chain if e.name == "a").args == {"who": "{{ args.who }}"}
    assert len(bound) == 2 and bound[1] is bound[0]  # the same compiled pipeline, bound in another mode


def test_prepare_reads_the_pipelines_verdicts_and_entries(write: Write, tools: Path) -> None:
    """A template-free tool: the verdicts and the (unpruned) chain are the pipeline's own values, not rebuilt."""
    write("tools/a.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  a: {}\n  tone: dry\n---\nx\n")
    manager = Manager([tools])
    pipeline = manager.catalog.pipeline("page", manager.paths, None)
    ctx, merged, verdicts, origins = prepare(manager, "page", {}, None, None, NO_OPTIONS, prune=False)
    assert verdicts is pipeline.verdicts and merged is pipeline.plan.static and origins == {}
    assert all(got is compiled for got, compiled in zip(ctx.chain, pipeline.entries, strict=True))
    assert ctx.tool is pipeline.tool and ctx.meta["tone"] == "dry"


def test_prepare_keeps_or_prunes_the_leading_idle_entries(write: Write, tools: Path) -> None:
    """R-CHAIN-12: ``prune=False`` (explain) keeps an idle leading entry; a call's bind leaves it out."""
    write("tools/idle.py", IDLE)
    write("tools/a.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  idle: {}\n  a: {}\n  $order:\n    idle: {before: [a]}\n---\nx\n")
    manager = Manager([tools])
    kept = prepare(manager, "page", {}, None, None, NO_OPTIONS, prune=False)[0].chain
    pruned = prepare(manager, "page", {}, None, None, NO_OPTIONS)[0].chain
    assert "idle" in names(kept) and "idle" not in names(pruned)
    assert names(pruned) == names(kept)[names(kept).index("idle") + 1 :]
    explained = manager.explain("page")
    assert [e.needed for e in explained.chain if e.name == "idle"] == [False]


def test_a_cycle_compiles_to_no_pipeline_and_explain_binds_the_unsorted_one(write: Write, tools: Path) -> None:
    write("tools/a.py", PASS)
    write("tools/b.py", IDLE)
    write("tools/g.md", CYCLE)
    manager = Manager([tools])
    with pytest.raises(OrderCycleError):
        manager.catalog.pipeline("g", manager.paths, None)
    unsorted = manager.catalog.unsorted("g", manager.paths, None)
    assert names(e for e in unsorted.entries if e.name in "ab") == ["a", "b"]  # merged order, as written
    assert unsorted.runs == unsorted.entries and not unsorted.children.pipelines
    assert next(e for e in unsorted.entries if e.name == "b").when is not None  # each entry with its ``when``
    ctx, _merged, verdicts, _origins = prepare(manager, "g", {}, None, None, NO_OPTIONS, sort=False, prune=False)
    assert names(ctx.chain) == names(unsorted.entries) and verdicts is unsorted.verdicts
    explained = manager.explain("g")
    assert explained.cycle is not None and set(explained.cycle) == {"a", "b"}
    assert names(explained.chain) == names(unsorted.entries)
    assert [e.needed for e in explained.chain if e.name == "b"] == [False]


def test_an_unsorted_chain_prunes_as_a_sorted_one(write: Write, tools: Path) -> None:
    """``sort=False`` changes the order only: with ``prune`` it leaves out the leading idle entries too."""
    write("tools/idle.py", IDLE)
    write("tools/a.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  idle: {}\n  a: {}\n---\nx\n")
    manager = Manager([tools])
    kept = prepare(manager, "page", {}, None, None, NO_OPTIONS, sort=False, prune=False)[0].chain
    pruned = prepare(manager, "page", {}, None, None, NO_OPTIONS, sort=False)[0].chain
    assert 0 < len(pruned) < len(kept) and names(pruned) == names(kept)[len(kept) - len(pruned) :]
    assert all(e.when is not None for e in kept[: len(kept) - len(pruned)])  # each left out by its own ``when``


def test_an_order_cycle_sent_as_an_override_is_explained_unsorted(write: Write, tools: Path) -> None:
    write("tools/a.py", PASS)
    write("tools/b.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  a: {}\n  b: {}\n---\nx\n")
    manager = Manager([tools])
    cycle = {"$order": {"a": {"after": ["b"]}, "b": {"after": ["a"]}}}
    explained = manager.explain("page", overrides=cycle)
    assert explained.cycle is not None and set(explained.cycle) == {"a", "b"}
    assert {"a", "b"} <= set(names(explained.chain))
    assert manager.explain("page").cycle is None  # the pipeline itself sorts


def test_override_keys_from_an_untrusted_caller_may_name_only_its_tools(write: Write, tools: Path) -> None:
    write("tools/a.py", PASS)
    write("tools/spy.py", PASS)
    write("tools/page.md", "---\nmetadata:\n  a: {}\n---\nx\n")
    manager = Manager([tools])
    caller = Caller("a test caller", tools={"page", "a"}, overrides=True)
    _args, options = extract_options({}, "page", None, None, {"spy": {}}, None)
    with pytest.raises(SecurityError, match="spy"):
        prepare(manager, "page", {}, None, None, options, caller=caller, guarded=frozenset({"spy"}))
    _args, options = extract_options({}, "page", None, None, {"a": {"x": 1}}, None)
    ctx = prepare(manager, "page", {}, None, None, options, caller=caller, guarded=frozenset({"a"}))[0]
    assert next(e for e in ctx.chain if e.name == "a").args == {"x": 1}
