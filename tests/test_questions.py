"""WaitForResponse (issue 29): a middleware asks its caller for input and waits, answered through the API
callback (``answering``), an approver's ``respond`` (the terminal), MCP elicitation, and ``chat`` on a terminal.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client
from mcp.types import ElicitResult
from test_chat import on_terminal

from orchestrator import InvocationError, Manager
from orchestrator.approval import terminal
from orchestrator.mcp import build_server
from orchestrator.questions import AnswerValidationError, answering

pytestmark = pytest.mark.anyio

# A tool-pipeline middleware asking the caller which unit the tool should use.
UNIT = """
from orchestrator.questions import ask_caller
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    unit = await ask_caller(ctx, "Which unit, C or F?", {"type": "string", "enum": ["C", "F"]})
    ctx.target.args = {**ctx.target.args, "unit": unit}
    return await ctx.target.manager.next()
"""
WEATHER = """
frontmatter = {"description": "Weather.", "metadata": {"params": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}
def main(ctx):
    return f"21 {ctx.args.get('unit', 'C')} in {ctx.args['city']}"
"""
SCRIPT = [
    {"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
    {"answer": "done", "expect": {"last-role": "tool"}},
]


@pytest.fixture
def manager(write, tools: Path) -> Manager:
    write("tools/unit.py", UNIT)
    write("tools/weather.py", WEATHER)
    metadata = {
        "model": {"provider": "scripted", "script": SCRIPT},
        "tools": ["weather"],
        "tool-pipeline": {"unit": {}},
    }
    write(
        "tools/forecast.md", "---\n" + yaml.safe_dump({"description": "Forecast.", "metadata": metadata}) + "---\nGo.\n"
    )
    return Manager([tools])


def results(manager: Manager) -> list:
    """What each tool call of the manager's runs ended with: its result text or its error."""
    seen: list = []
    manager.events.listeners.append(lambda e: seen.append(e.data) if e.kind == "tool.end" else None)
    return seen


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_answering_callback_answers_the_question_and_the_call_runs_with_it(manager, kind):
    asked: list = []

    def sync(request):
        asked.append(request)
        return "F"

    async def async_(request):
        asked.append(request)
        return "F"

    events: list = []
    manager.events.listeners.append(lambda e: events.append(e.kind) if e.kind.startswith("input.") else None)
    sent: list = []
    manager.events.listeners.append(lambda e: sent.append(e.data["messages"]) if e.kind == "model.request" else None)
    with answering(sync if kind == "sync" else async_):
        assert await manager.invoke("forecast") == "done"
    (request,) = asked
    assert request["kind"] == "input" and request["question"] == "Which unit, C or F?"
    assert request["tool"] == "weather" and request["agent"] == "forecast"
    assert request["schema"] == {"type": "string", "enum": ["C", "F"]}
    assert sent[1][-1]["content"] == "21 F in Paris"  # the model got the result made with the answer
    assert events == ["input.request", "input.answer"]


def test_answering_works_around_invoke_sync(manager):
    with answering(lambda request: "C"):
        assert manager.invoke_sync("forecast") == "done"


async def test_an_answer_that_fails_the_schema_is_an_error(write, manager):
    write(
        "tools/direct.md",
        "---\nmetadata: {unit: {}, $order: {unit: {after: [$pre-execute], before: [execute]}}}\n---\nhi\n",
    )
    with answering(lambda request: "kelvin"), pytest.raises(AnswerValidationError, match="invalid answer"):
        await manager.invoke("direct")


async def test_nobody_to_answer_says_how_to_give_one(write, manager):
    write(
        "tools/direct.md",
        "---\nmetadata: {unit: {}, $order: {unit: {after: [$pre-execute], before: [execute]}}}\n---\nhi\n",
    )
    with pytest.raises(InvocationError, match="nobody can answer.*answering") as info:
        await manager.invoke("direct")
    assert info.value.key == "input"
    ended = results(manager)
    assert await manager.invoke("forecast") == "done"  # the agent hears it as the call's error result
    assert "nobody can answer" in str(ended[0]["error"])


async def test_the_managers_approver_answers_when_it_can_respond(manager):
    output = io.StringIO()
    manager.approver = terminal(io.StringIO("kelvin\nF\n"), output)
    assert await manager.invoke("forecast") == "done"
    shown = output.getvalue()
    assert "question (weather, called by forecast): Which unit, C or F?" in shown
    assert "invalid answer" in shown  # kelvin was refused and the terminal asked again


async def test_the_terminal_reads_json_for_a_schema_beyond_text_and_end_of_input_is_no_answer(write, tools):
    asked = {"kind": "input", "tool": "t", "question": "How many?", "schema": {"type": "integer"}}
    assert terminal(io.StringIO("3\n"), io.StringIO()).respond(asked) == 3
    with pytest.raises(InvocationError, match="no answer from the terminal"):
        terminal(io.StringIO(""), io.StringIO()).respond(asked)


async def test_mcp_elicitation_answers_the_question(manager):
    seen: list = []

    async def callback(context, params) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"answer": "F"})

    with anyio.fail_after(20):
        async with Client(build_server(manager), mode="legacy", elicitation_callback=callback) as client:
            result = await client.call_tool("forecast", {})
    assert not result.is_error and result.content[0].text == "done"
    (params,) = seen
    assert params.message == "Which unit, C or F?"
    assert params.requested_schema["properties"]["answer"]["enum"] == ["C", "F"]


async def test_mcp_decline_is_an_error_the_agent_hears(manager):
    ended = results(manager)

    async def callback(context, params) -> ElicitResult:
        return ElicitResult(action="decline")

    with anyio.fail_after(20):
        async with Client(build_server(manager), mode="legacy", elicitation_callback=callback) as client:
            await client.call_tool("forecast", {})
    assert "did not answer (decline)" in str(ended[0]["error"])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_chat_asks_the_question_on_the_terminal(manager, tmp_path):
    code, screen = on_terminal(["chat", "forecast", "--store", str(tmp_path / "s.db")], ["go", "F", "/exit"], tmp_path)
    assert code == 0, screen
    assert "Which unit, C or F?" in screen and "done" in screen


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_run_on_a_terminal_asks_the_question_there(manager, tmp_path):
    code, screen = on_terminal(["run", "forecast", "--path", "tools"], ["kelvin", "F"], tmp_path)
    assert code == 0, screen
    assert "question (weather, called by forecast): Which unit, C or F?" in screen
    assert "invalid answer" in screen and "done" in screen  # kelvin was refused, F answered
