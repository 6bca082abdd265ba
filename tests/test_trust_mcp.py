"""The MCP server towards untrusted clients (issue 24): no server paths in errors; calls never wait for a listing.

Errors sent to a client name files relative to the served folder and hide
every other absolute path of the server (the session store's included); the
server's log keeps them. A call to a tool the server knows, or can find by
the ref its name reads as, runs without listing every tool: a listing of a
large catalogue takes tens of seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from orchestrator import Limits, Manager
from orchestrator.mcp import SERVER_PATH, Service, build_server
from orchestrator.registry import builtin_folder

pytestmark = pytest.mark.anyio

LIMIT = 30
SLOW = 2.0  # seconds an instrumented listing takes: any call that waited for one takes at least this long
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])


def text(result) -> str:
    assert len(result.content) == 1
    return result.content[0].text


# -- paths in error results ------------------------------------------------------------------------------------


@pytest.fixture
def served(write, tools: Path, tmp_path: Path) -> Path:
    write("tools/team/broken.md", "---\nmetadata: [not, a, mapping\n---\nx\n")
    write("tools/caller.py", "async def main(ctx):\n    return await ctx.manager.invoke(ctx.args['ref'])\n")
    write("tools/reader.py", "def main(ctx):\n    return open(ctx.args['file']).read()\n")
    write("tools/greet.md", "---\nmetadata:\n  params: {type: object, properties: {name: {type: string}}}\n---\nHi\n")
    write("tools/chat.md", "---\nmetadata:\n  model: {provider: scripted, script: [{answer: hi}]}\n---\nhello\n")
    return tools


@MODES
async def test_error_results_name_files_relative_to_the_served_folder(served, tmp_path, mode, caplog):
    caplog.set_level(logging.WARNING, logger="orchestrator.mcp")
    outside = tmp_path / "outside" / "secret.csv"
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            broken = await client.call_tool("caller", {"ref": "team/broken"})
            missing = await client.call_tool("caller", {"ref": "nowhere"})
            unreadable = await client.call_tool("reader", {"file": str(outside)})
            invalid = await client.call_tool("greet", {"name": 3})
    assert all(result.is_error for result in (broken, missing, unreadable, invalid))
    assert text(broken).startswith("ToolDefinitionError: team/broken.md")
    assert text(missing).startswith("ToolNotFoundError: no tool 'nowhere' in tools")
    assert SERVER_PATH in text(unreadable) and "secret.csv" not in text(unreadable)
    assert "invalid args: /name: " in text(invalid)  # a JSON pointer is not a path
    for result in (broken, missing, unreadable, invalid):
        assert str(tmp_path) not in text(result) and str(Path(__file__).parents[1]) not in text(result)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert str(served / "team" / "broken.md") in logged and str(outside) in logged  # the log keeps them


async def test_the_session_store_path_never_reaches_a_client(served, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="orchestrator.mcp")
    store = tmp_path / "private" / "state"
    store.mkdir(parents=True)  # a folder where the SQLite file should be: the store cannot open
    manager = Manager([served], sessions=store)
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager, allow_sessions=True)) as client:
            result = await client.call_tool("chat", {"$context": {"session": "s1"}})
    assert result.is_error
    assert "session store" in text(result) and SERVER_PATH in text(result)
    assert str(store) not in text(result) and "private" not in text(result)
    assert any(str(store) in record.getMessage() for record in caplog.records)


# -- calls do not wait for listings ------------------------------------------------------------------------------


def slow_listings(manager: Manager) -> list[float]:
    """Make ``manager.list_tools`` take ``SLOW`` seconds on the thread that asks; the list holds when each started."""
    started: list[float] = []
    real = manager.list_tools

    def slow(*args: object, **kwargs: object) -> object:
        started.append(time.monotonic())
        time.sleep(SLOW)  # blocking, as a listing of a large catalogue is
        return real(*args, **kwargs)

    manager.list_tools = slow  # type: ignore[method-assign]
    return started


STAMP = "import time\n\n\ndef main(ctx):\n    return str(time.monotonic())\n"


@MODES
async def test_a_call_never_waits_for_a_slow_listing(write, tools, mode):
    write("tools/stamp.py", STAMP)
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    manager = Manager([tools])
    listings = slow_listings(manager)
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager, poll_interval=0.2), mode=mode) as client:
            await client.list_tools()
            await anyio.sleep(0.3)  # the listing is older than half a poll interval
            write("tools/late.py", STAMP)  # added after the listing: found by its ref
            write("tools/team/later.py", STAMP)
            for name in ("stamp", "late", "team__later", "stamp"):
                before = len(listings)
                sent = time.monotonic()
                ran = float(text(await client.call_tool(name, {})))
                assert ran - sent < SLOW, name  # it did not wait for a listing
                assert not [t for t in listings[before:] if t < ran], name  # and none started before it ran


async def test_a_call_rechecks_only_its_own_tool(write, tools):
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    write("tools/other.md", "---\ndescription: Other.\n---\nOther\n")
    manager = Manager([tools])
    service = Service(manager, poll_interval=0.01)
    served = await service.relist()
    seen = await service.snapshot()
    listings = slow_listings(manager)
    time.sleep(0.05)  # the listing is stale

    listing, latest = await service.resolve("greet")
    assert listing is served["greet"] and latest is served

    write("tools/greet.md", "---\ndescription: Greets warmly.\n---\nHi\n")
    manager.refresh()
    listing, latest = await service.resolve("greet")
    assert listing is not None and listing.description == "Greets warmly."
    assert latest["other"] is served["other"]
    assert await service.snapshot() != seen  # watchers are told the list changed

    write("tools/greet.md", "---\ndescription: Greets.\nmetadata: {visibility: hidden}\n---\nHi\n")
    manager.refresh()
    assert (await service.resolve("greet"))[0] is None  # hidden since: not served
    assert listings == []  # none of it listed every tool

    fresh = Service(manager, poll_interval=0.01)  # no listing yet
    assert (await fresh.resolve("nope"))[0] is None  # a name nothing reads as lists the tools ...
    assert (await fresh.resolve("nope"))[0] is None  # ... once: a listing is shared for a few times what it took
    assert len(listings) == 1


async def test_a_tool_hidden_since_the_listing_is_no_middleware_for_callers(write, tools):
    wrap = "frontmatter = {{'metadata': {{'visibility': '{}'}}}}\n\n\nasync def main(ctx):\n    return await ctx.target.manager.next()\n"
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    write("tools/wrap.py", wrap.format("public"))
    manager = Manager([tools])
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager, poll_interval=600)) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"greet", "wrap"}
            wrapped = await client.call_tool("greet", {"$middleware": {"wrap": {}}})
            write("tools/wrap.py", wrap.format("hidden"))
            manager.refresh()
            refused = await client.call_tool("greet", {"$middleware": {"wrap": {}}})
    assert text(wrapped) == "Hi"
    assert refused.is_error and text(refused).startswith("SecurityError: $middleware from MCP callers may add")


async def test_clients_listing_in_a_loop_share_one_slow_listing(write, tools):
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    manager = Manager([tools])
    listings = slow_listings(manager)
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager), mode="auto") as client:
            names = [{tool.name for tool in (await client.list_tools()).tools} for _ in range(3)]
    assert names == [{"greet"}] * 3
    assert len(listings) == 1  # reused for a few times what it took: the server is not kept listing


# -- listings run on a worker thread, one at a time (issue 24, finding 7) ---------------------------------------


async def test_a_listing_runs_on_a_worker_thread(write, tools):
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    manager = Manager([tools])
    threads: list[int] = []
    real = manager.list_tools

    def recorded(*args: object, **kwargs: object) -> object:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    manager.list_tools = recorded  # type: ignore[method-assign]
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {"greet"}
    assert threads and threading.get_ident() not in threads  # not the event loop's thread


@MODES
async def test_a_call_completes_while_another_clients_listing_runs(write, tools, mode):
    write("tools/stamp.py", STAMP)
    manager = Manager([tools])
    server = build_server(manager, poll_interval=600)

    async def list_all(client: Client) -> None:
        while not listings:  # until the latest listing is too old to share: then this one lists
            await client.list_tools()
            await anyio.sleep(0.05)

    with anyio.fail_after(LIMIT):
        async with Client(server, mode=mode) as lister, Client(server, mode=mode) as caller:
            await caller.list_tools()  # the SDK client lists before it trusts a result: let it know the tool
            listings = slow_listings(manager)
            async with anyio.create_task_group() as group:
                group.start_soon(list_all, lister)
                while not listings:  # the listing has started (it sleeps SLOW seconds on its thread)
                    await anyio.sleep(0.01)
                result = await caller.call_tool("stamp", {})
                called = time.monotonic()
    assert not result.is_error
    assert called < listings[0] + SLOW  # done while the listing still ran: it did not wait for it
    assert len(listings) == 1


async def test_concurrent_listings_share_one(write, tools):
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    manager = Manager([tools])
    listings = slow_listings(manager)
    server = build_server(manager, poll_interval=600)
    names: list[set[str]] = []

    async def list_all(client: Client) -> None:
        names.append({tool.name for tool in (await client.list_tools()).tools})

    with anyio.fail_after(LIMIT):
        async with Client(server) as first, Client(server) as second:
            async with anyio.create_task_group() as group:
                group.start_soon(list_all, first)
                while not listings:
                    await anyio.sleep(0.01)
                group.start_soon(list_all, second)  # asks while the first listing runs: awaits it
    assert names == [{"greet"}, {"greet"}]
    assert len(listings) == 1


@MODES
async def test_a_folder_too_large_to_list_is_a_clear_error_and_calls_still_run(write, tools, tmp_path, mode, caplog):
    caplog.set_level(logging.WARNING, logger="orchestrator.mcp")
    write("tools/greet.md", "---\ndescription: Greets.\n---\nHi\n")
    for i in range(4):
        write(f"big/many/tool{i}.md", "---\ndescription: One of many.\n---\nx\n")
    limit = len(list(builtin_folder("tools").rglob("*"))) + 10  # the built-ins stay under it
    manager = Manager([tmp_path / "big", tools], limits=Limits(folder_files=limit))
    with anyio.fail_after(LIMIT):
        async with Client(build_server(manager, poll_interval=0.05), mode=mode) as client:
            assert len((await client.list_tools()).tools) == 5  # the SDK client knows greet's schema now
            for i in range(4, limit + 1):  # the served folder grows past the limit
                write(f"big/many/tool{i}.md", "---\ndescription: One of many.\n---\nx\n")
            manager.refresh()
            while True:  # once the last listing is too old to share, tools/list lists again and fails
                try:
                    await client.list_tools()
                except MCPError as exc:
                    listed = exc
                    break
                await anyio.sleep(0.05)
            greeted = await client.call_tool("greet", {})  # found by its ref: no listing needed
            unknown = await client.call_tool("nope", {})
            await anyio.sleep(0.2)
            again = await client.call_tool("greet", {})  # still serving, the watcher (legacy) still polling
    message = listed.error.message
    assert "big" in message and str(limit) in message and "Limits.folder_files" in message
    assert str(tmp_path) not in message  # the folder by its name, not the server's path
    assert not greeted.is_error and text(greeted) == "Hi"
    assert unknown.is_error and "'nope'" in text(unknown) and "Limits.folder_files" in text(unknown)
    assert "big" in text(unknown) and str(tmp_path) not in text(unknown)
    assert not again.is_error and text(again) == "Hi"
    failures = [record for record in caplog.records if "Limits.folder_files" in record.getMessage()]
    assert len(failures) == 1  # logged once, however often the watcher and callers met it
