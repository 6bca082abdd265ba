"""Typed results, titles and annotations over MCP (issue 27), through the real SDK client.

``returns`` is the ``outputSchema`` (an object schema as it is, anything else
wrapped as ``result``); a result matching it is ``structuredContent`` with a
text copy. ``mcp`` metadata sets the title and the behaviour hints, with the
cautious MCP defaults, and never read-only for a tool with ``approval``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from orchestrator import ConfigurationError, Manager
from orchestrator.annotations import offer
from orchestrator.mcp import build_server
from orchestrator.results import output_schema

pytestmark = pytest.mark.anyio

LIMIT = 20
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])

WEATHER = """
frontmatter = {"description": "Weather.", "metadata": {
    "returns": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
    "mcp": {"title": "Weather in a city", "read-only": True, "idempotent": True, "open-world": False},
}}

def main(ctx):
    return {"celsius": 9}
"""
COUNT = """
frontmatter = {"metadata": {"returns": {"type": "integer"}}}

def main(ctx):
    return 3
"""
LIAR = """
frontmatter = {"metadata": {"returns": {"type": "integer"}, "$remove": ["validate-returns"]}}

def main(ctx):
    return "three"
"""
SEND = """
frontmatter = {"metadata": {"approval": True, "mcp": {"read-only": True, "destructive": False}}}

def main(ctx):
    return "sent"
"""


@pytest.fixture
def served(write, tools: Path) -> Path:
    write("tools/weather.py", WEATHER)
    write("tools/count.py", COUNT)
    write("tools/send.py", SEND)
    write("tools/plain.md", "---\ndescription: A template.\n---\nplain\n")
    write("tools/AUTHORITY.md", "---\nmetadata:\n  mcp: {open-world: false}\n---\n")
    return tools


def by_name(listed) -> dict:
    return {tool.name: tool for tool in listed.tools}


@MODES
async def test_mcp_returns_is_the_output_schema_and_results_are_structured(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            tools = by_name(await client.list_tools())
            weather = await client.call_tool("weather", {})
            count = await client.call_tool("count", {})
            plain = await client.call_tool("plain", {})
    assert tools["weather"].output_schema == {
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
    }
    assert tools["count"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert tools["plain"].output_schema is None
    assert weather.structured_content == {"celsius": 9} and weather.content[0].text == '{"celsius": 9}'
    assert count.structured_content == {"result": 3} and count.content[0].text == "3"
    assert plain.structured_content is None and plain.content[0].text == "plain"


async def test_mcp_a_result_that_does_not_match_returns_is_an_error_not_bad_structured_content(write, tools):
    write("tools/liar.py", LIAR)
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([tools])), mode="legacy") as client:
            result = await client.call_tool("liar", {})
    assert result.is_error and result.structured_content is None
    assert result.content[0].text.startswith("ReturnsValidationError: ") and "liar" in result.content[0].text


@MODES
async def test_mcp_titles_and_hints_come_from_metadata_with_cautious_defaults(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            tools = by_name(await client.list_tools())
    weather = tools["weather"]
    assert weather.title == "Weather in a city"
    hints = weather.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        True,
        True,  # unset: the cautious default
        True,
        False,
    )
    plain = tools["plain"].annotations  # unset but for the folder's authority: open-world false for all its tools
    assert (plain.read_only_hint, plain.destructive_hint, plain.idempotent_hint, plain.open_world_hint) == (
        False,
        True,
        False,
        False,
    )
    send = tools["send"].annotations
    assert send.read_only_hint is False and send.destructive_hint is False  # approval: never read-only


def test_mcp_bad_mcp_metadata_is_a_typed_error_naming_the_tool_and_key():
    with pytest.raises(ConfigurationError, match="readOnlyHint") as raised:
        offer("t", "markdown", {"mcp": {"readOnlyHint": True}})
    assert raised.value.tool == "t" and raised.value.key == "mcp.readOnlyHint" and "read-only" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        offer("t", "markdown", {"mcp": {"read-only": "yes"}})
    assert raised.value.key == "mcp.read-only" and "true or false" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        offer("t", "markdown", {"mcp": {"serve": ["tools"]}})
    assert raised.value.key == "mcp.serve" and "tool and prompt" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        offer("t", "markdown", {"mcp": "tool"})
    assert raised.value.key == "mcp" and "mapping" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:
        output_schema("integer-ish", "t")
    assert raised.value.key == "returns"


async def test_mcp_a_tool_with_bad_mcp_metadata_is_not_served_and_the_rest_are(write, tools, caplog):
    write("tools/good.md", "---\n---\ngood\n")
    write("tools/bad.md", "---\nmetadata:\n  mcp: {readonly: true}\n---\nbad\n")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([tools])), mode="legacy") as client:
            names = set(by_name(await client.list_tools()))
            called = await client.call_tool("bad", {})
    assert "good" in names and "bad" not in names
    assert called.is_error
    assert any("'bad'" in r.getMessage() and "mcp.readonly" in r.getMessage() for r in caplog.records)
