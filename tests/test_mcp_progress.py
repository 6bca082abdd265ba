"""MCP progress (issues 13, 29): a call that carries a progress token hears what the tool does, coalesced.

At most one notification per ``INTERVAL`` (0.1 s) per call: what happened
meanwhile goes out together, text deltas joined and other messages on lines of
their own, and what is pending when the call ends is sent before its result.
"""

from __future__ import annotations

import time

import anyio
import pytest
import yaml
from mcp import Client

from orchestrator import Manager
from orchestrator.mcp import build_server
from orchestrator.progress import INTERVAL, joined

pytestmark = pytest.mark.anyio

SCRIPT = [
    {"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
    {"answer": "Nine degrees in Oslo."},
]


@pytest.fixture
def served(write, tools):
    write("tools/weather.py", "frontmatter = {'description': 'Weather.'}\ndef main(ctx):\n    return {'celsius': 9}\n")
    metadata = {"model": {"provider": "scripted", "script": SCRIPT}, "tools": ["weather"]}
    write(
        "tools/forecast.md",
        "---\n" + yaml.safe_dump({"description": "An agent.", "metadata": metadata}) + "---\nOslo?\n",
    )
    return tools


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_progress_notifications_follow_the_call(served, mode):
    heard: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((value, message))

    with anyio.fail_after(20):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            result = await client.call_tool("forecast", {}, progress_callback=progress)
            quiet = await client.call_tool("forecast", {})
    assert result.content[0].text == quiet.content[0].text == "Nine degrees in Oslo."
    lines = "\n".join(message or "" for _value, message in heard).split("\n")
    assert lines == [
        "asking the model (iteration 1)",
        "calling weather",
        "weather done",
        "asking the model (iteration 2)",
        "Nine degrees in Oslo.",  # the answer's deltas, joined
    ]
    assert [value for value, _m in heard] == sorted({value for value, _m in heard})  # increasing


async def test_mcp_tool_starts_and_ends_are_log_messages(served):
    logged: list[tuple[str, object]] = []

    async def on_log(params) -> None:
        logged.append((params.level, params.data))

    with anyio.fail_after(20):
        async with Client(build_server(Manager([served])), mode="legacy", logging_callback=on_log) as client:
            result = await client.call_tool("forecast", {})
    assert result.content[0].text == "Nine degrees in Oslo."
    assert logged == [("info", "calling weather"), ("info", "weather done")]


STREAM = """
import anyio
from orchestrator import Event

frontmatter = {"description": "Streams 1,000 tokens over about a second."}

async def main(ctx):
    for i in range(1000):
        ctx.manager.events.emit(Event("model.delta", "stream", ctx.depth, ctx.run.id, 1, {"text": f"t{i} "}))
        if i % 10 == 9:
            await anyio.sleep(0.01)
    return "streamed"
"""


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_progress_of_a_1000_token_stream_is_coalesced_and_the_last_is_sent(write, tools, mode):
    write("tools/stream.py", STREAM)
    heard: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((value, message))

    with anyio.fail_after(20):
        async with Client(build_server(Manager([tools])), mode=mode) as client:
            started = time.monotonic()
            result = await client.call_tool("stream", {}, progress_callback=progress)
            seconds = time.monotonic() - started
    assert result.content[0].text == "streamed"
    # Every token arrived, in order, batched: the last one too, before the result.
    assert "".join(message or "" for _value, message in heard) == "".join(f"t{i} " for i in range(1000))
    assert heard[-1][1].endswith("t999 ")
    # About 10 a second: never more than one per interval over the call's time (plus the first and the last).
    assert 2 <= len(heard) <= seconds / INTERVAL + 2
    assert [value for value, _m in heard] == list(range(1, len(heard) + 1))


def test_mcp_progress_joins_deltas_and_puts_other_messages_on_lines():
    parts = [(False, "asking the model (iteration 1)"), (True, "Nine "), (True, "degrees"), (False, "calling x")]
    assert joined(parts) == "asking the model (iteration 1)\nNine degrees\ncalling x"
    assert joined([(True, "a"), (False, "b"), (True, "c")]) == "a\nb\nc"
