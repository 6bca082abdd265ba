"""WaitForResponse (issue 29): a middleware asks its caller for input and waits, answered through the API
callback (``answering``), an approver's ``respond`` (the terminal), MCP elicitation, and ``chat`` on a terminal.

With nobody to answer, the question holds the run as a held approval does: ``Interrupted`` with a token, and
``manager.resume(token, answer)`` (or ``toolcascade resume``, or a 2026-era MCP client's retry) continues it.
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
from test_chat import on_terminal, run

from orchestrator import ConfigurationError, Interrupted, InvocationError, Manager
from orchestrator.approval import Decision, terminal
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
    return Manager([tools], sessions=tools.parent / "s.db")


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


DIRECT = """
frontmatter = {"description": "Weather, asking its unit.", "metadata": {"params": {"type": "object"}, "unit": {},
    "$order": {"unit": {"after": ["$pre-execute"], "before": ["execute"]}}}}
def main(ctx):
    return f"21 {ctx.args['unit']}"
"""


async def test_with_nobody_to_answer_the_question_holds_the_run_and_resume_answers_it(write, manager):
    write("tools/direct.py", DIRECT)
    ran = results(manager)
    with pytest.raises(Interrupted) as info:
        await manager.invoke("direct")
    held = info.value
    assert held.request["kind"] == "input" and held.request["question"] == "Which unit, C or F?"
    assert held.request["tool"] == "direct" and held.request["schema"] == {"type": "string", "enum": ["C", "F"]}
    assert "waiting for an answer to 'Which unit, C or F?'" in str(held) and held.token in str(held)
    with pytest.raises(AnswerValidationError, match="invalid answer"):
        await manager.resume(held.token, "kelvin")  # checked before the token is used: the run stays held
    with pytest.raises(AnswerValidationError):
        await manager.resume(held.token, "approve")  # a plain value is the answer itself, never a decision
    with pytest.raises(ConfigurationError, match="waits for an answer"):
        await manager.resume(held.token, Decision("approve"))  # approve answers nothing
    assert await manager.resume(held.token, "F") == "21 F"
    with pytest.raises(InvocationError, match="no suspended run"):
        await manager.resume(held.token, "F")  # replayed
    assert ran == []  # the tool ran once, through the resumed run, which the pipeline sees as a top-level call


async def test_a_forged_or_other_tools_token_is_refused_and_the_token_stays_good(write, manager):
    write("tools/direct.py", DIRECT)
    with pytest.raises(Interrupted) as info:
        await manager.invoke("direct")
    with pytest.raises(InvocationError, match="no suspended run"):
        await manager.resume("0" * 32, "F")
    with pytest.raises(InvocationError, match="is a call of 'direct', not of 'forecast'"):
        await manager.resume(info.value.token, "F", ref="forecast")
    assert await manager.resume(info.value.token, "F", ref="direct") == "21 F"


async def test_an_agents_question_holds_its_turn_and_the_answer_reaches_the_model(manager):
    sent: list = []
    manager.events.listeners.append(lambda e: sent.append(e.data["messages"]) if e.kind == "model.request" else None)
    with pytest.raises(Interrupted) as info:
        await manager.invoke("forecast")
    assert info.value.request["agent"] == "forecast" and info.value.request["tool"] == "weather"
    assert len(sent) == 1
    assert await manager.resume(info.value.token, "F") == "done"
    assert len(sent) == 2  # the model was not asked again for the held turn
    assert sent[1][-1]["content"] == "21 F in Paris"


async def test_declining_to_answer_is_an_error_the_agent_hears(manager):
    ended = results(manager)
    with pytest.raises(Interrupted) as info:
        await manager.invoke("forecast")
    assert await manager.resume(info.value.token, Decision("deny", reason="no idea")) == "done"
    assert "declined to answer 'Which unit, C or F?': no idea" in str(ended[-1]["error"])


async def test_an_answer_never_decides_a_held_approval(write, manager):
    write("tools/send.py", 'frontmatter = {"metadata": {"approval": True}}\ndef main(ctx):\n    return "sent"\n')
    with pytest.raises(Interrupted) as info:
        await manager.invoke("send")
    with pytest.raises(ConfigurationError, match="not an answer"):
        await manager.resume(info.value.token, Decision.answered("yes"))
    assert await manager.resume(info.value.token, "approve") == "sent"  # the refusal did not spend the token


ASKED = """
from pathlib import Path
from orchestrator.questions import ask_caller
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    question = Path(QUESTION).read_text()
    size = await ask_caller(ctx, question, {"type": "integer"})
    ctx.target.args = {**ctx.target.args, "size": size}
    return await ctx.target.manager.next()
"""
SIZED = """
frontmatter = {"metadata": {"params": {"type": "object"}, "unit": {}, "sized": {},
    "$order": {"unit": {"after": ["$pre-execute"], "before": ["sized"]}, "sized": {"before": ["execute"]}}}}
def main(ctx):
    return f"{ctx.args['size']} {ctx.args['unit']}"
"""


async def test_two_questions_are_answered_one_resume_at_a_time_and_a_changed_one_holds_again(write, manager, tmp_path):
    asked = write("question.txt", "How big?")
    write("tools/sized.py", ASKED.replace("QUESTION", repr(str(asked))))
    write("tools/both.py", SIZED)
    with pytest.raises(Interrupted) as first:
        await manager.invoke("both")
    assert first.value.request["question"] == "Which unit, C or F?"
    with pytest.raises(Interrupted) as second:
        await manager.resume(first.value.token, "C")  # the replay meets the unit question again, answered
    assert second.value.request["question"] == "How big?"
    asked.write_text("How tall?")  # the question changes before its answer comes
    with pytest.raises(Interrupted) as third:
        await manager.resume(second.value.token, 3)
    assert third.value.request["question"] == "How tall?"
    assert third.value.request["changed"]["question"] == "How big?"
    assert "the question changed since it was answered" in str(third.value)
    assert await manager.resume(third.value.token, 7) == "7 C"  # the unit's answer still carried, once


def test_cli_run_off_a_terminal_holds_and_resume_answers_with_the_form(write, manager, tools, tmp_path):
    write("tools/direct.py", DIRECT)
    where = ("--path", str(tools), "--store", str(tmp_path / "cli.db"))
    code, out, err = run("run", "direct", "--no-log", *where)
    assert code == 3 and out == "", err
    (token,) = [w for line in err.splitlines() if "continue:" in line for w in line.split() if len(w) == 32]
    code, _, err = run("resume", token, "--edit", '{"answer": "kelvin"}', *where)
    assert code == 1 and "AnswerValidationError" in err
    code, out, err = run("resume", token, "--edit", '{"answer": "F"}', *where)  # the token was not spent
    assert (code, out) == (0, "21 F\n"), err


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


MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])  # handshake era; 2026-07-28 (input_required, retry)


FORM = """
from orchestrator.questions import ask_caller
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
SCHEMA = {"type": "object", "properties": {"unit": {"type": "string", "enum": ["C", "F"]}}, "required": ["unit"]}
async def main(ctx):
    got = await ask_caller(ctx, "Which unit?", SCHEMA)
    ctx.target.args = {**ctx.target.args, "unit": got["unit"]}
    return await ctx.target.manager.next()
"""


@MODES
async def test_mcp_elicitation_answers_the_question(manager, mode):
    seen: list = []
    sent: list = []
    manager.events.listeners.append(lambda e: sent.append(e.data["messages"]) if e.kind == "model.request" else None)

    async def callback(context, params) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content={"answer": "F"})

    with anyio.fail_after(20):
        async with Client(build_server(manager), mode=mode, elicitation_callback=callback) as client:
            result = await client.call_tool("forecast", {})
    assert not result.is_error and result.content[0].text == "done"
    (params,) = seen
    assert params.message == "Which unit, C or F?"
    assert params.requested_schema["properties"]["answer"]["enum"] == ["C", "F"]
    assert sent[-1][-1]["content"] == "21 F in Paris"


async def test_mcp_2026_question_of_an_object_schema_is_its_fields_and_a_bad_answer_is_asked_again(write, manager):
    write("tools/unit.py", FORM)
    answers = [{"unit": "kelvin"}, {"unit": "C"}]
    seen: list = []

    async def callback(context, params) -> ElicitResult:
        seen.append(params)
        return ElicitResult(action="accept", content=answers.pop(0))

    with anyio.fail_after(20):
        async with Client(build_server(manager), mode="auto", elicitation_callback=callback) as client:
            result = await client.call_tool("forecast", {})
    assert [set(p.requested_schema["properties"]) for p in seen] == [{"unit"}, {"unit"}]
    assert "not valid" not in seen[0].message and "not valid" in seen[1].message  # the same question, saying why
    assert not result.is_error and result.content[0].text == "done"


@MODES
async def test_mcp_decline_is_an_error_the_agent_hears(manager, mode):
    ended = results(manager)

    async def callback(context, params) -> ElicitResult:
        return ElicitResult(action="decline")

    with anyio.fail_after(20):
        async with Client(build_server(manager), mode=mode, elicitation_callback=callback) as client:
            result = await client.call_tool("forecast", {})
    assert result.content[0].text == "done"
    expected = "did not answer (decline)" if mode == "legacy" else "declined to answer"
    assert expected in str(ended[-1]["error"])


@MODES
async def test_mcp_client_without_elicitation_cannot_answer_and_the_agent_hears_it(manager, mode):
    ended = results(manager)
    with anyio.fail_after(20):
        async with Client(build_server(manager), mode=mode) as client:
            result = await client.call_tool("forecast", {})
    assert result.content[0].text == "done"
    assert "this MCP client cannot answer" in str(ended[-1]["error"])


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
