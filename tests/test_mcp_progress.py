"""MCP progress (issue 13): a call that carries a progress token hears what the tool does as it happens."""

from __future__ import annotations

import anyio
import pytest
import yaml
from mcp import Client

from orchestrator import Manager
from orchestrator.mcp import build_server

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
    messages = [message for _value, message in heard]
    assert messages[0] == "asking the model (iteration 1)"
    assert "calling weather" in messages and "weather done" in messages
    assert "asking the model (iteration 2)" in messages
    assert "".join(m for m in messages[messages.index("asking the model (iteration 2)") + 1 :]) == (
        "Nine degrees in Oslo."
    )
    assert [value for value, _m in heard] == sorted(value for value, _m in heard)


async def test_mcp_tool_starts_and_ends_are_log_messages(served):
    logged: list[tuple[str, object]] = []

    async def on_log(params) -> None:
        logged.append((params.level, params.data))

    with anyio.fail_after(20):
        async with Client(build_server(Manager([served])), mode="legacy", logging_callback=on_log) as client:
            result = await client.call_tool("forecast", {})
    assert result.content[0].text == "Nine degrees in Oslo."
    assert logged == [("info", "calling weather"), ("info", "weather done")]
