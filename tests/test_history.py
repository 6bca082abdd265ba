"""``ctx.run.history``: one ``{tool, args, timestamp}`` frame per invocation of the run, in order (R-INV-2).

The runner keeps the records flat (three items each); the view reads them
as a sequence of mappings: indexes, negative indexes, slices, and an
``IndexError`` past the end, like a list.
"""

from __future__ import annotations

import time

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"

# The body reads its run's history through every kind of index and returns what it saw.
BODY = """
async def main(ctx):
    history = ctx.run.history
    try:
        history[len(history)]
        past = "no error"
    except IndexError:
        past = "IndexError"
    return {
        "tools": [frame["tool"] for frame in history],
        "args": [frame["args"] for frame in history],
        "times": [frame["timestamp"] for frame in history],
        "len": len(history),
        "last": history[-1]["tool"],
        "first": history[-len(history)]["tool"],
        "slice": [frame["tool"] for frame in history[1:]],
        "reversed": [frame["tool"] for frame in history[::-1]],
        "past": past,
    }
"""


async def test_history_lists_each_invocation_in_order_and_reads_like_a_list(write, tools):
    write("tools/first.py", PASS)
    write("tools/second.py", PASS)
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'first': {'k': 1}, 'second': {}, '$order': {'second': {'after': ['first']}}}}\n"
        + BODY,
    )
    before = time.time()
    seen = await Manager([tools]).invoke("t", {"a": 1})
    assert seen["tools"] == ["t", "first", "second"]
    assert seen["args"] == [{"a": 1}, {"k": 1}, {}]
    assert before <= seen["times"][0] <= seen["times"][1] <= seen["times"][2] <= time.time()
    assert (seen["len"], seen["last"], seen["first"]) == (3, "second", "t")
    assert seen["slice"] == ["first", "second"]
    assert seen["reversed"] == ["second", "first", "t"]
    assert seen["past"] == "IndexError"


async def test_a_history_record_is_no_object_the_cyclic_collector_tracks(write, tools):
    # A chain's suspended levels are walked by each collection; the run's records add none to them.
    write("tools/first.py", PASS)
    write(
        "tools/t.py",
        "import gc\n"
        "frontmatter = {'metadata': {'first': {'k': 1}}}\n"
        "async def main(ctx):\n"
        "    return [item for item in ctx.shared.history if gc.is_tracked(item) and type(item) is tuple]\n",
    )
    assert await Manager([tools]).invoke("t") == []
