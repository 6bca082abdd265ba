"""Run-local lifecycle middleware (issue 14): call-limit and circuit-breaker, from .md agents to manager.invoke."""

from __future__ import annotations

import pytest
import yaml

from orchestrator import ConfigurationError, Manager
from orchestrator.errors import InvocationError

pytestmark = pytest.mark.anyio

SEARCH = """
frontmatter = {"description": "Searches.", "metadata": {"params": {"type": "object"}}}
def main(ctx):
    ctx.nonlocals.setdefault("searches", []).append(dict(ctx.args))
    return f"results for {ctx.args.get('q')}"
"""
FETCH = """
frontmatter = {"description": "Fetches.", "metadata": {"params": {"type": "object"}}}
def main(ctx):
    return "page"
"""


def agent(write, name: str, script: list, **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, "tools": ["search", "fetch"], **meta}
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": metadata}, sort_keys=False) + "---\nFind it.\n")


def search(q: str) -> dict:
    return {"name": "search", "arguments": {"q": q}}


@pytest.fixture
def manager(write, tools):
    write("tools/search.py", SEARCH)
    write("tools/fetch.py", FETCH)
    return Manager([tools])


async def test_call_limit_per_tool_refuses_the_call_past_it_and_the_model_hears_why(write, manager):
    limit = {"tool-pipeline": {"call-limit": {"per-tool": {"search": 2}}}}
    script = [
        {"calls": [search("a"), search("b"), search("c")]},  # parallel: counted before each runs
        {"calls": [{"name": "fetch", "arguments": {}}], "expect": {"contains": "may be called 2 time(s) per run"}},
        "done",
    ]
    agent(write, "finder", script, **limit)
    nonlocals: dict = {}
    assert await manager.invoke("finder", context={"nonlocals": nonlocals}) == "done"
    assert len(nonlocals["searches"]) == 2  # fetch is not limited


async def test_call_limit_total_counts_every_tool_of_the_run(write, manager):
    limit = {"tool-pipeline": {"call-limit": {"total": 2}}}
    script = [
        {"calls": [search("a"), {"name": "fetch", "arguments": {}}]},
        {"calls": [search("b")], "expect": {"contains": "page"}},
        {"answer": "stopped", "expect": {"contains": "this run may make 2 tool call(s) and made 2"}},
    ]
    agent(write, "finder", script, **limit)
    assert await manager.invoke("finder") == "stopped"


async def test_call_limit_each_and_the_counts_are_per_run(write, manager):
    write("tools/once.py", "frontmatter = {'metadata': {'call-limit': {'each': 1}}}\ndef main(ctx):\n    return 'ok'\n")
    write(
        "tools/twice.py",
        "async def main(ctx):\n    await ctx.manager.invoke('once')\n    return await ctx.manager.invoke('once')\n",
    )
    assert await manager.invoke("once") == "ok"
    assert await manager.invoke("once") == "ok"  # a new run: a new count
    with pytest.raises(InvocationError, match="'once' may be called 1 time") as error:
        await manager.invoke("twice")
    assert error.value.tool == "once" and error.value.key == "call-limit"


@pytest.mark.parametrize(
    "value, said",
    [
        ({"total": -1}, "call-limit.total must be a whole number from 0"),
        ({"per-tool": {"search": "3"}}, "call-limit.per-tool.search must be a whole number"),
        ({"per-tool": [1]}, "call-limit.per-tool must map tool names to numbers"),
        ({"each": True}, "call-limit.each must be a whole number"),
        ({"max": 3}, "unknown setting 'max'"),
    ],
)
async def test_bad_call_limit_settings_name_the_tool_and_key(write, manager, value, said):
    write("tools/limited.md", "---\n" + yaml.safe_dump({"metadata": {"call-limit": value}}) + "---\nx\n")
    with pytest.raises(ConfigurationError) as error:
        await manager.invoke("limited")
    assert said in str(error.value) and error.value.tool == "limited" and error.value.key == "call-limit"


async def test_circuit_breaker_stops_the_identical_call_after_repeats(write, manager):
    breaker = {"tool-pipeline": {"circuit-breaker": {"repeats": 2}}}
    script = [
        {"calls": [search("a")]},
        {"calls": [{"name": "search", "arguments": {"q": "a"}}]},
        {"calls": [search("a"), search("b")]},  # the third identical call is refused; another query is not
        {
            "answer": "gave up",
            "expect": {"contains": ["you already called 'search' with these arguments 2 time(s)", "results for b"]},
        },
    ]
    agent(write, "finder", script, **breaker)
    nonlocals: dict = {}
    assert await manager.invoke("finder", context={"nonlocals": nonlocals}) == "gave up"
    assert nonlocals["searches"] == [{"q": "a"}, {"q": "a"}, {"q": "b"}]


async def test_circuit_breaker_compares_canonical_json_and_skips_unlisted_tools(write, manager):
    breaker = "'circuit-breaker': {'repeats': 1, 'tools': ['search']}"
    write("tools/search.py", SEARCH.replace('"params": {"type": "object"}', f'"params": {{}}, {breaker}'))
    write("tools/fetch.py", FETCH.replace('"params": {"type": "object"}', f'"params": {{}}, {breaker}'))
    write(
        "tools/loop.py",
        "async def main(ctx):\n"
        "    await ctx.manager.invoke('search', {'q': 'x', 'n': 1})\n"
        "    for _ in range(3):\n"
        "        await ctx.manager.invoke('fetch', {})  # not listed: never refused\n"
        "    return await ctx.manager.invoke('search', {'n': 1, 'q': 'x'})\n",
    )
    with pytest.raises(InvocationError, match="you already called 'search' with these arguments 1 time") as error:
        await manager.invoke("loop")
    assert error.value.key == "circuit-breaker" and error.value.tool == "search"


@pytest.mark.parametrize(
    "value, said",
    [
        ({"repeats": 0}, "circuit-breaker.repeats must be a whole number from 1"),
        ({"tools": "search"}, "circuit-breaker.tools must be a list of tool names"),
        ({"times": 2}, "unknown setting 'times'"),
    ],
)
async def test_bad_circuit_breaker_settings_name_the_tool_and_key(write, manager, value, said):
    write("tools/broken.md", "---\n" + yaml.safe_dump({"metadata": {"circuit-breaker": value}}) + "---\nx\n")
    with pytest.raises(ConfigurationError) as error:
        await manager.invoke("broken")
    assert said in str(error.value) and error.value.tool == "broken" and error.value.key == "circuit-breaker"


async def test_lifecycle_state_is_plain_json_in_the_run_state(write, manager):
    write(
        "tools/peek.py",
        "frontmatter = {'metadata': {'call-limit': {'total': 5}, 'circuit-breaker': {}}}\n"
        "def main(ctx):\n    import json\n    return json.loads(json.dumps(ctx.run.state))\n",
    )
    state = await manager.invoke("peek", {"a": 1})
    assert state["call-limit"] == {"total": 1, "tools": {"peek": 1}}
    assert list(state["circuit-breaker"].values()) == [1]
