"""Approval over MCP (issue 14): the server asks the client's user through elicitation, with the real SDK client.

Handshake-era sessions (``legacy``) are asked with an ``elicitation/create``
request during the call; 2026-07-28 sessions (``auto``) get an
``input_required`` result and the SDK client retries with the answer, which
resumes the suspended run. A client without the capability is never asked.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client
from mcp.types import ElicitResult

from orchestrator import Manager
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

LIMIT = 20  # seconds any one client session may take: nothing hangs
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
SEND = """
frontmatter = {"description": "Sends mail.", "metadata": {
    "approval": {"reason": "it sends mail"},
    "params": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}}
def main(ctx):
    return f"sent to {ctx.args['to']}"
"""


@pytest.fixture
def served(write, tools: Path, tmp_path: Path) -> Manager:
    write("tools/send.py", SEND)
    write("tools/plain.md", "---\ndescription: No approval.\n---\nplain\n")
    script = [
        {"calls": [{"name": "deliver", "arguments": {"to": "bob"}}]},
        {"answer": "done", "expect": {"last-role": "tool"}},
    ]
    write("tools/deliver.py", SEND.replace('"approval": {"reason": "it sends mail"},', ""))
    metadata = {
        "model": {"provider": "scripted", "script": script},
        "tools": ["deliver"],
        "tool-pipeline": {"approval": {"tools": ["deliver"]}},
    }
    write("tools/mailer.md", "---\n" + yaml.safe_dump({"description": "Mails.", "metadata": metadata}) + "---\nGo.\n")
    return Manager([tools], sessions=tmp_path / "sessions.db")


def answering(*answers: dict | str, seen: list | None = None):
    """An elicitation callback giving ``answers`` in turn: a content mapping accepts, a string is the action."""
    pending = list(answers)

    async def callback(context, params) -> ElicitResult:
        if seen is not None:
            seen.append(params)
        answer = pending.pop(0)
        if isinstance(answer, str):
            return ElicitResult(action=answer)
        return ElicitResult(action="accept", content=answer)

    return callback


def text(result) -> str:
    return result.content[0].text


@MODES
async def test_mcp_elicitation_approves_and_the_call_runs_once(served, mode):
    seen: list = []
    resumed: list = []
    real = served.resume
    asked_for: list = []
    served.resume = (  # type: ignore[method-assign]
        lambda token, decision, **kw: resumed.append(decision) or asked_for.append(kw) or real(token, decision, **kw)
    )
    with anyio.fail_after(LIMIT):
        server = build_server(served)
        async with Client(server, mode=mode, elicitation_callback=answering({"approve": True}, seen=seen)) as client:
            result = await client.call_tool("send", {"to": "bob"})
            plain = await client.call_tool("plain", {})
    assert not result.is_error and text(result) == "sent to bob"
    assert text(plain) == "plain" and len(seen) == 1  # only the tool that asks
    # handshake era: asked during the call; 2026 era: suspended, answered on the retry, resumed
    assert [d.action for d in resumed] == ([] if mode == "legacy" else ["approve"])
    assert asked_for == ([] if mode == "legacy" else [{"ref": "send"}])  # a retry resumes only the tool it names
    (params,) = seen
    assert "Approve the call of send?" in params.message and '{"to": "bob"}' in params.message
    assert "it sends mail" in params.message
    assert set(params.requested_schema["properties"]) == {"approve", "reason", "args"}
    assert params.requested_schema["required"] == ["approve"]


@MODES
async def test_mcp_elicitation_edits_the_arguments(served, mode):
    with anyio.fail_after(LIMIT):
        answer = answering({"approve": True, "args": '{"to": "eve"}'})
        async with Client(build_server(served), mode=mode, elicitation_callback=answer) as client:
            result = await client.call_tool("send", {"to": "bob"})
    assert text(result) == "sent to eve"


@MODES
@pytest.mark.parametrize("answer", ["decline", "cancel", {"approve": False, "reason": "not bob"}])
async def test_mcp_decline_cancel_or_no_is_a_denial(served, mode, answer):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(served), mode=mode, elicitation_callback=answering(answer)) as client:
            result = await client.call_tool("send", {"to": "bob"})
    assert result.is_error and text(result).startswith("ApprovalDenied: the call was denied by the approver")
    assert ("not bob" if isinstance(answer, dict) else f"did not approve ({answer})") in text(result)


@MODES
async def test_mcp_unusable_edited_arguments_ask_again(served, mode):
    seen: list = []
    with anyio.fail_after(LIMIT):
        answers = answering(
            {"approve": True, "args": "{to: eve"}, {"approve": True, "args": '{"to": "ann"}'}, seen=seen
        )
        async with Client(build_server(served), mode=mode, elicitation_callback=answers) as client:
            result = await client.call_tool("send", {"to": "bob"})
    assert text(result) == "sent to ann"
    assert "could not be used: the arguments are not JSON" in seen[1].message


@MODES
async def test_mcp_client_without_elicitation_is_denied_with_a_clear_message(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(served), mode=mode) as client:
            result = await client.call_tool("send", {"to": "bob"})
    assert result.is_error
    assert "tool 'send' needs approval, and this MCP client cannot give it" in text(result)
    assert "elicitation capability" in text(result)


@MODES
async def test_mcp_an_agents_held_tool_call_is_asked_and_the_model_goes_on(served, mode):
    seen: list = []
    with anyio.fail_after(LIMIT):
        answer = answering({"approve": True}, seen=seen)
        async with Client(build_server(served), mode=mode, elicitation_callback=answer) as client:
            result = await client.call_tool("mailer", {})
    assert text(result) == "done"
    assert "Approve the call of deliver (asked by mailer)?" in seen[0].message


@MODES
async def test_mcp_denial_for_a_client_without_elicitation_names_the_held_tool_and_the_agent(
    served, write, tools, mode
):
    # Issue 29: the model hears which call was denied (deliver) and for whom (mailer), never the agent as the tool.
    said = "tool 'deliver' needs approval (called by agent 'courier'), and this MCP client cannot give it"
    script = [
        {"calls": [{"name": "deliver", "arguments": {"to": "bob"}}]},
        {"answer": "told", "expect": {"last-role": "tool", "contains": [said, "elicitation capability"]}},
    ]
    metadata = {
        "model": {"provider": "scripted", "script": script},
        "tools": ["deliver"],
        "tool-pipeline": {"approval": {"tools": ["deliver"]}},
    }
    write("tools/courier.md", "---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nGo.\n")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(served), mode=mode) as client:
            result = await client.call_tool("courier", {})
    assert not result.is_error and text(result) == "told"


def test_mcp_refusal_names_each_held_call_of_a_batch():
    from orchestrator.elicitation import refusal

    batch = {"kind": "batch", "agent": "a", "calls": [{"tool": "x"}, {"tool": "y"}]}
    assert (
        refusal(batch, "why")
        == "the calls of 'x', 'y' need approval (called by agent 'a'), and this MCP client cannot give it: why"
    )
    assert refusal({"tool": "send"}, "why") == "tool 'send' needs approval, and this MCP client cannot give it: why"
