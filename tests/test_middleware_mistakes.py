"""Mistakes in middleware are named (issue 25, points 3 and 4).

A body or middleware that returns an awaitable it forgot to await is an
``InvocationError`` naming the tool, its file and the call to await; the
coroutine is closed, so no "never awaited" warning follows. An entry that
returns without calling ``next()`` is visible in the events
(``chain.stopped``), with a line ``run --verbose`` can print.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator

import pytest

from orchestrator import InvocationError, Manager
from orchestrator.events import KINDS, Event, describe

pytestmark = pytest.mark.anyio

ISOLATED = "frontmatter = {'role': 'middleware', 'metadata': {'$inherit': False}}\n"
BODY = "frontmatter = {'metadata': {'$inherit': False}}\nasync def main(ctx):\n    return 'body'\n"


@pytest.fixture
def no_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised while the test runs (and by what it leaves for the collector), recorded.

    The heap the test starts with is frozen: the collection at the end walks only what the test made
    (where an unawaited coroutine it left would be), not the whole worker's heap.
    """
    gc.freeze()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
            gc.collect()
    finally:
        gc.unfreeze()
    assert [str(w.message) for w in caught] == []


async def forgotten(manager: Manager, ref: str, **options: object) -> InvocationError:
    """The error of invoking ``ref``, whose code forgot an ``await``."""
    with pytest.raises(InvocationError) as caught:
        await manager.invoke(ref, **options)
    return caught.value


async def test_a_middleware_that_forgets_await_before_next_is_named(write, tools, no_warnings):
    forgetful = write(
        "tools/forgetful.py",
        ISOLATED + "async def main(ctx):\n    result = ctx.target.manager.next()\n    return result\n",
    )
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'forgetful': {}"))
    error = await forgotten(Manager([tools]), "t")
    assert error.tool == "forgetful"
    assert error.path == str(forgetful) and error.line == 2  # the line of its main
    assert "did you forget `await` before `ctx.target.manager.next()`?" in str(error)
    assert "'t'" in str(error)  # the tool it serves


async def test_a_middleware_that_forgets_await_before_execute_is_named(write, tools, no_warnings):
    write("tools/forgetful.py", ISOLATED + "async def main(ctx):\n    return ctx.target.manager.execute()\n")
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'forgetful': {}"))
    error = await forgotten(Manager([tools]), "t")
    assert error.tool == "forgetful"
    assert "did you forget `await` before `ctx.target.manager.execute()`?" in str(error)


async def test_the_mistake_is_named_when_someone_listens_too(write, tools, no_warnings):
    write("tools/forgetful.py", ISOLATED + "async def main(ctx):\n    return ctx.target.manager.next()\n")
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'forgetful': {}"))
    seen: list[Event] = []
    error = await forgotten(Manager([tools], on_event=seen.append), "t")
    assert error.tool == "forgetful" and "`ctx.target.manager.next()`" in str(error)
    ends = [e for e in seen if e.kind == "invoke.end"]
    assert ends and all("InvocationError" in e.data["error"] for e in ends)


async def test_a_body_that_returns_an_unawaited_coroutine_is_named(write, tools, no_warnings):
    lookup = write(
        "tools/lookup.py",
        "frontmatter = {'metadata': {'$inherit': False}}\n"
        "async def fetch(key):\n    return key.upper()\n"
        "async def main(ctx):\n    return fetch('k')\n",
    )
    error = await forgotten(Manager([tools]), "lookup")
    assert error.tool == "lookup" and error.path == str(lookup) and error.line == 4
    assert "did you forget `await` before `fetch(...)`?" in str(error)


async def test_a_body_in_the_default_pipeline_that_forgets_await_is_named(write, tools, no_warnings):
    write("tools/lookup.py", "async def fetch(key):\n    return key\nasync def main(ctx):\n    return fetch('k')\n")
    error = await forgotten(Manager([tools]), "lookup")
    assert error.tool == "lookup" and "`fetch(...)`" in str(error)


async def test_any_awaitable_counts_not_only_coroutines(write, tools, no_warnings):
    write(
        "tools/later.py",
        "frontmatter = {'metadata': {'$inherit': False}}\n"
        "class Later:\n    def __await__(self):\n        return iter(())\n"
        "async def main(ctx):\n    return Later()\n",
    )
    error = await forgotten(Manager([tools]), "later")
    assert error.tool == "later" and "Later" in str(error) and "await" in str(error)


async def test_an_fn_entry_that_forgets_await_is_named_with_its_file(write, tools, no_warnings):
    write("tools/t.py", BODY)

    async def tap(ctx, args):
        return ctx.manager.next()

    error = await forgotten(Manager([tools]), "t", middleware={"tap": {"fn": tap}})
    assert error.tool == "tap" and error.path == __file__
    assert error.line == tap.__code__.co_firstlineno
    assert "did you forget `await` before `ctx.manager.next()`?" in str(error)


async def test_a_body_set_by_a_middleware_that_forgets_await_is_named(write, tools, no_warnings):
    write("tools/t.py", BODY)

    async def replace(ctx, args):
        async def body(tctx):
            return tctx.manager.invoke("t")

        ctx.body = body
        return await ctx.manager.next()

    error = await forgotten(Manager([tools]), "t", middleware={"replace": {"fn": replace}})
    assert error.tool == "t" and error.path == __file__
    assert "did you forget `await` before `ctx.manager.invoke(...)`?" in str(error)


async def test_a_sync_entry_may_still_return_next_for_the_loop_to_await(write, tools, no_warnings):
    write("tools/t.py", BODY)

    def tap(ctx, args):  # sync code cannot await: what it returns is awaited once, on the loop (R-CHAIN-6)
        return ctx.manager.next()

    assert await Manager([tools]).invoke("t", middleware={"tap": {"fn": tap}}) == "body"


# -- an entry that ends the chain without calling next() ------------------------------------------------------


def stops(events: list[Event]) -> list[Event]:
    return [e for e in events if e.kind == "chain.stopped"]


async def test_an_entry_that_returns_without_next_is_named_in_the_events(write, tools):
    write("tools/early.py", ISOLATED + "async def main(ctx):\n    return 'early'\n")
    write("tools/later.py", ISOLATED + "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'early': {}, 'later': {}"))
    seen: list[Event] = []
    assert await Manager([tools], on_event=seen.append).invoke("t") == "early"
    [stop] = stops(seen)
    assert "chain.stopped" in KINDS
    assert (stop.tool, stop.depth) == ("t", 0)
    assert stop.data == {"entry": "early", "skipped": ["later"], "body_ran": False}
    assert describe(stop) == "early ended the chain of 't': the tool's body did not run, nor did later"


async def test_a_chain_that_runs_through_reports_no_stop(write, tools):
    write("tools/pass.py", ISOLATED + "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'pass': {}"))
    seen: list[Event] = []
    manager = Manager([tools], on_event=seen.append)
    assert await manager.invoke("t") == "body"
    quiet = {"quiet": {"fn": lambda ctx, args: ctx.manager.next()}}  # a sync entry handing next() on
    assert await manager.invoke("t", middleware=quiet) == "body"
    write("tools/d.py", "async def main(ctx):\n    return 'body'\n")  # the default pipeline
    after = {"after-body": {"fn": lambda ctx, args: None, "after": ["execute"]}}  # only idle entries follow it
    assert await manager.invoke("d", middleware=after) == "body"
    assert stops(seen) == []
    assert all(describe(e) is None for e in seen)  # only a stop has a line of its own


async def test_a_cache_hit_reads_as_an_answer_not_an_error(write, tools):
    write("tools/t.py", "frontmatter = {'metadata': {'cache': {}}}\nasync def main(ctx):\n    return 'body'\n")
    seen: list[Event] = []
    manager = Manager([tools], on_event=seen.append)
    assert await manager.invoke("t") == "body"
    assert stops(seen) == []  # the first call ran the body
    assert await manager.invoke("t") == "body"
    [stop] = stops(seen)
    assert stop.data["entry"] == "cache" and stop.data["body_ran"] is False
    line = describe(stop)
    assert line is not None and line == "cache ended the chain of 't': the tool's body did not run"
    assert "error" not in line.lower()


async def test_an_entry_after_the_body_that_stops_names_what_did_not_run(write, tools):
    write("tools/stop.py", ISOLATED + "async def main(ctx):\n    return None\n")
    write("tools/tail.py", ISOLATED + "async def main(ctx):\n    return 'tail'\n")
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'stop': {}, 'tail': {}, '$order': {"
        "'stop': {'after': ['execute']}, 'tail': {'after': ['stop']}}}}\n"
        "async def main(ctx):\n    return 'body'\n",
    )
    seen: list[Event] = []
    assert await Manager([tools], on_event=seen.append).invoke("t") == "body"
    [stop] = stops(seen)
    assert stop.data == {"entry": "stop", "skipped": ["tail"], "body_ran": True}
    assert describe(stop) == "stop ended the chain of 't' after the tool's body: tail did not run"


async def test_finishing_before_next_counts_as_ending_the_chain(write, tools):
    write(
        "tools/deny.py",
        ISOLATED
        + "async def main(ctx):\n    ctx.target.manager.finish('denied')\n    return await ctx.target.manager.next()\n",
    )
    write("tools/t.py", BODY.replace("'$inherit': False", "'$inherit': False, 'deny': {}"))
    seen: list[Event] = []
    assert await Manager([tools], on_event=seen.append).invoke("t") == "denied"
    [stop] = stops(seen)
    assert stop.data == {"entry": "deny", "skipped": [], "body_ran": False}
    assert describe(stop) == "deny ended the chain of 't': the tool's body did not run"
