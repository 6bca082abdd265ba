"""Lifecycles.

Run-local lifecycle middleware (issue 14): call-limit and circuit-breaker, from .md agents to manager.invoke.
The Manager's own (issue 26): ``with`` / ``async with``, an idempotent ``close()`` that ends what the manager
started, typed errors after it, and a listing from async code that leaves the event loop free.
"""

from __future__ import annotations

import threading

import anyio
import pytest
import yaml

from orchestrator import ConfigurationError, Interrupted, Manager
from orchestrator.errors import InvocationError
from orchestrator.sessions import SQLiteStore

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


# -- the Manager's own lifecycle (issue 26) ---------------------------------------------------------

HELLO = "---\ndescription: Says hello.\n---\nHello {{ args.name }}!\n"


def watchers() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "toolcascade-watcher"}


def test_with_closes_the_manager_and_close_is_idempotent(write, tools) -> None:
    write("tools/hello.md", HELLO)
    with Manager([tools]) as manager:
        assert not manager.closed
        assert manager.invoke_sync("hello", {"name": "Ada"}) == "Hello Ada!"
    assert manager.closed
    manager.close()  # again: nothing happens, nothing raises
    assert manager.closed


def test_a_closed_manager_refuses_invocations_with_a_typed_error(write, tools) -> None:
    write("tools/hello.md", HELLO)
    manager = Manager([tools])
    manager.close()
    with pytest.raises(InvocationError, match="closed Manager") as refused:
        manager.invoke_sync("hello", {"name": "Ada"})
    assert refused.value.tool == "hello"
    # Finding, listing and explaining hold nothing open: they still work.
    assert manager.find_tool("hello").name == "hello"
    assert "hello" in {info.name for info in manager.list_tools()}
    assert manager.explain("hello", {"name": "Ada"}).prompt == "Hello Ada!"


def test_an_exception_in_the_block_closes_the_manager_and_passes_through(write, tools) -> None:
    write("tools/hello.md", HELLO)
    with pytest.raises(KeyError), Manager([tools]) as manager:
        raise KeyError("the program's own")
    assert manager.closed


async def test_async_with_closes_the_manager(write, tools, anyio_backend) -> None:
    write("tools/hello.md", HELLO)
    async with Manager([tools]) as manager:
        assert await manager.invoke("hello", {"name": "Bo"}) == "Hello Bo!"
    assert manager.closed
    with pytest.raises(InvocationError, match="closed Manager"):
        await manager.invoke("hello", {"name": "Bo"})
    await manager.aclose()  # idempotent too


async def test_resume_on_a_closed_manager_is_refused_and_the_token_stays_usable(write, tools, tmp_path) -> None:
    write("tools/send.md", "---\nmetadata:\n  approval: true\n---\nsent to {{ args.to }}\n")
    store = SQLiteStore(tmp_path / "sessions.db")
    async with Manager([tools], sessions=store) as first:
        with pytest.raises(Interrupted) as held:
            await first.invoke("send", {"to": "bob"})
    with pytest.raises(InvocationError, match="closed Manager"):
        await first.resume(held.value.token, "approve")
    async with Manager([tools], sessions=store) as later:
        assert await later.resume(held.value.token, "approve") == "sent to bob"


def test_closing_stops_the_watcher_thread_the_manager_started(write, tools) -> None:
    """The thread no longer waits for a finalizer: leaving the block ends it."""
    write("tools/hello.md", HELLO)
    before = watchers()
    with Manager([tools]) as manager:
        assert manager.invoke_sync("hello", {"name": "Cy"}) == "Hello Cy!"
        manager.registry.freshness.start()  # what a second of reuse does (freshness.START_AFTER), at once
        started = watchers() - before
        assert started and all(thread.is_alive() for thread in started)
    assert [thread for thread in started if thread.is_alive()] == []


async def test_alist_tools_reads_and_imports_tool_files_off_the_event_loop(write, tools, tmp_path, anyio_backend):
    """``list_tools`` imports python tools; from async code ``alist_tools`` does it on a worker thread."""
    seen = tmp_path / "imported-on"
    write(
        "tools/probe.py",
        f"import pathlib, threading\npathlib.Path({str(seen)!r}).write_text(str(threading.get_ident()))\n"
        "frontmatter = {'description': 'Probes.'}\n\ndef main(ctx):\n    return 'probed'\n",
    )
    write("tools/hello.md", HELLO)
    manager = Manager([tools])
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        listed = await manager.alist_tools()
        group.cancel_scope.cancel()
    assert int(seen.read_text()) != threading.get_ident()
    assert {"probe", "hello"} <= {info.name for info in listed}
    assert [info.name for info in listed] == [info.name for info in manager.list_tools()]
    assert ticks > 0
    manager.close()


class Pool:
    """A thing worth keeping across calls, that knows how to end."""

    made = 0

    def __init__(self, name: str, ended: list[str]) -> None:
        Pool.made += 1
        self.name = name
        self.ended = ended

    def close(self) -> None:
        self.ended.append(self.name)


def test_a_resource_is_made_once_per_key_from_any_thread_and_closed_newest_first(tools) -> None:
    ended: list[str] = []
    manager = Manager([tools])
    before = Pool.made
    got: list[Pool] = []

    def ask() -> None:
        for _ in range(200):
            got.append(manager.resource(("pool", "a"), lambda: Pool("a", ended)))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    b = manager.resource(("pool", "b"), lambda: Pool("b", ended))
    assert Pool.made - before == 2
    assert {id(pool) for pool in got} == {id(got[0])} and b is not got[0]
    manager.resource("plain", lambda: 42)  # no close(): kept, and simply dropped
    manager.close()
    manager.close()
    assert ended == ["b", "a"]
    with pytest.raises(InvocationError, match="closed"):
        manager.resource(("pool", "a"), lambda: Pool("a", ended))
    assert Pool.made - before == 2
