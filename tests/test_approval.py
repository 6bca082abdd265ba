"""The approval middleware and approvers (issue 14): approve, deny, edit, from .md agents to manager.invoke."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from orchestrator import ArgsValidationError, ConfigurationError, Manager
from orchestrator.approval import ApprovalDenied, ApproverError, Decision, asking, deciding, plain
from orchestrator.errors import Interrupted

pytestmark = pytest.mark.anyio

SEND = """
import json
from pathlib import Path
frontmatter = {"description": "Sends mail.", "metadata": {"params": {
    "type": "object", "properties": {"to": {"type": "string"}, "cc": {"type": "string", "default": "nobody"}},
    "required": ["to"], "additionalProperties": False}}}
def main(ctx):
    with open(Path(__file__).with_name("sent.log"), "a") as log:
        log.write(json.dumps(dict(ctx.args)) + "\\n")
    return f"sent to {ctx.args['to']} (cc {ctx.args['cc']})"
"""
LOOKUP = """
frontmatter = {"description": "Looks a name up.", "metadata": {"params": {"type": "object"}}}
def main(ctx):
    return "found"
"""


def agent(write, name: str, script: list, **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, "tools": ["send", "lookup"], **meta}
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": metadata}, sort_keys=False) + "---\nMail bob.\n")


def sent(tools: Path) -> list:
    """The args of every call the send tool ran."""
    log = tools / "sent.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def manager(write, tools, tmp_path):
    write("tools/send.py", SEND)
    write("tools/lookup.py", LOOKUP)
    return Manager([tools], sessions=tmp_path / "sessions.db")


CALL = {"calls": [{"name": "send", "arguments": {"to": "bob"}}]}
PIPELINE = {"tool-pipeline": {"approval": {"tools": ["send"], "reason": "it sends mail"}}}


async def test_approve_through_the_manager_callable_runs_the_call(write, manager):
    agent(write, "mailer", [CALL, {"answer": "done", "expect": {"contains": "sent to bob (cc nobody)"}}], **PIPELINE)
    seen = []
    manager.approver = lambda request: seen.append(request) or "approve"
    assert await manager.invoke("mailer") == "done"
    (request,) = seen
    assert request["kind"] == "call" and request["tool"] == "send" and request["agent"] == "mailer"
    assert request["args"] == {"to": "bob", "cc": "nobody"} and request["reason"] == "it sends mail"
    assert request["run"] and request["params"]["required"] == ["to"]


async def test_deny_tells_the_model_the_reason_and_the_call_does_not_run(write, manager, tools):
    events = []
    manager.events.listeners.append(lambda e: events.append(e) if e.kind.startswith("approval.") else None)
    manager.approver = lambda request: {"action": "deny", "reason": "bob is on holiday"}
    agent(
        write,
        "mailer",
        [CALL, {"answer": "not sent", "expect": {"contains": ["ApprovalDenied", "bob is on holiday"]}}],
        **PIPELINE,
    )
    assert await manager.invoke("mailer") == "not sent"
    assert sent(tools) == []
    decided = [e for e in events if e.kind == "approval.decision"]
    assert [(e.tool, e.data["action"], e.data["reason"]) for e in decided] == [("send", "deny", "bob is on holiday")]
    assert [e.kind for e in events] == ["approval.request", "approval.decision"]


async def test_edit_runs_the_call_with_the_edited_args(write, manager, tools):
    agent(write, "mailer", [CALL, {"answer": "done", "expect": {"contains": "sent to eve (cc nobody)"}}], **PIPELINE)
    manager.approver = lambda request: {"action": "edit", "args": {"to": "eve"}}
    assert await manager.invoke("mailer") == "done"
    assert sent(tools) == [{"to": "eve", "cc": "nobody"}]  # defaults filled in, as for the model's args


async def test_an_edit_that_fails_params_is_an_error_the_model_hears(write, manager, tools):
    agent(write, "mailer", [CALL, {"answer": "bad edit", "expect": {"contains": "ArgsValidationError"}}], **PIPELINE)
    manager.approver = lambda request: {"action": "edit", "args": {"to": 7}}
    assert await manager.invoke("mailer") == "bad edit"
    assert sent(tools) == []


async def test_only_the_listed_tools_ask(write, manager):
    calls = {"calls": [{"name": "lookup", "arguments": {"q": "bob"}}]}
    agent(write, "mailer", [calls, {"answer": "looked", "expect": {"contains": "found"}}], **PIPELINE)
    manager.approver = lambda request: pytest.fail("lookup is not listed: nobody should be asked")
    assert await manager.invoke("mailer") == "looked"


async def test_a_tool_with_approval_true_asks_on_every_direct_invocation(write, tools, tmp_path):
    write("tools/wipe.md", "---\nmetadata:\n  approval: {reason: erases the disk}\n---\nwiped {{ args.disk }}\n")
    asked = []

    async def approver(request):
        asked.append(request)
        return request["args"]["disk"] != "sda"

    manager = Manager([tools], approver=approver, sessions=tmp_path / "s.db")
    assert await manager.invoke("wipe", {"disk": "sdb"}) == "wiped sdb"
    with pytest.raises(ApprovalDenied) as denied:
        await manager.invoke("wipe", {"disk": "sda"})
    assert denied.value.tool == "wipe" and denied.value.key == "approval"
    assert "denied by the approver" in str(denied.value)
    assert [(r["tool"], r["agent"], r["reason"]) for r in asked] == [("wipe", None, "erases the disk")] * 2


async def test_approval_false_and_a_bare_true(write, tools, tmp_path):
    write("tools/off.md", "---\nmetadata: {approval: false}\n---\noff\n")
    write("tools/on.md", "---\nmetadata: {approval: true}\n---\non\n")
    manager = Manager([tools], approver=lambda request: "approve", sessions=tmp_path / "s.db")
    manager.approver = lambda request: "deny"
    assert await manager.invoke("off") == "off"
    with pytest.raises(ApprovalDenied):
        await manager.invoke("on")


async def test_a_sync_approver_runs_off_the_event_loop(write, tools, tmp_path):
    write("tools/on.md", "---\nmetadata: {approval: true}\n---\non\n")
    loop_thread = threading.get_ident()
    threads = []

    def approver(request):
        threads.append(threading.get_ident())
        return Decision("approve")

    manager = Manager([tools], approver=approver, sessions=tmp_path / "s.db")
    assert await manager.invoke("on") == "on"
    assert threads and threads[0] != loop_thread


@pytest.mark.parametrize(
    "answer, said",
    [("maybe", "answered 'maybe', not a decision"), ({"action": "edit"}, "an edit decision needs args")],
)
async def test_an_approver_answering_garbage_is_an_approver_error(write, tools, tmp_path, answer, said):
    write("tools/on.md", "---\nmetadata: {approval: true}\n---\non\n")

    def picky(request):
        return answer

    manager = Manager([tools], approver=picky, sessions=tmp_path / "s.db")
    with pytest.raises(ApproverError) as error:
        await manager.invoke("on")
    assert said in str(error.value) and "picky" in str(error.value) and error.value.approver.endswith("picky")
    assert "did not run" in str(error.value)


async def test_an_approver_that_raises_is_an_approver_error_and_the_call_does_not_run(write, manager, tools):
    def broken(request):
        raise RuntimeError("database down")

    agent(write, "mailer", [CALL, {"answer": "gave up", "expect": {"contains": "ApproverError"}}], **PIPELINE)
    manager.approver = broken
    assert await manager.invoke("mailer") == "gave up"
    assert sent(tools) == []


async def test_without_an_approver_invoke_raises_interrupted(write, tools, tmp_path):
    write("tools/on.md", "---\nmetadata: {approval: {reason: careful}}\n---\non\n")
    manager = Manager([tools], sessions=tmp_path / "s.db")
    with pytest.raises(Interrupted) as stopped:
        await manager.invoke("on")
    assert stopped.value.token
    assert {k: stopped.value.request[k] for k in ("kind", "tool", "reason")} == {
        "kind": "call",
        "tool": "on",
        "reason": "careful",
    }


async def test_the_request_approver_comes_before_the_managers_and_a_resumed_decision_before_both(
    write, tools, tmp_path
):
    write("tools/on.md", "---\nmetadata: {approval: true}\n---\non\n")
    manager = Manager([tools], approver=lambda request: "deny", sessions=tmp_path / "s.db")
    with asking(lambda request: "approve"):
        assert await manager.invoke("on") == "on"
    with asking(lambda request: pytest.fail("a resumed decision is used first")), deciding(Decision("approve")):
        assert await manager.invoke("on") == "on"
    with pytest.raises(ApprovalDenied):  # the decision was used once; the manager's approver denies
        await manager.invoke("on")


async def test_a_direct_call_with_args_failing_params_never_asks(write, tools, tmp_path):
    write(
        "tools/strict.md",
        "---\nmetadata:\n  approval: true\n  params: {type: object, required: [x]}\n---\nx\n",
    )
    manager = Manager([tools], approver=lambda r: pytest.fail("asked"), sessions=tmp_path / "s.db")
    with pytest.raises(ArgsValidationError):
        await manager.invoke("strict", {})


@pytest.mark.parametrize(
    "value, said",
    [
        ({"tools": "send"}, "approval.tools must be a list of tool names"),
        ({"reason": 3}, "approval.reason must be a string"),
        ({"who": "me"}, "unknown setting 'who'"),
    ],
)
async def test_bad_approval_settings_name_the_tool_and_key(write, tools, tmp_path, value, said):
    write("tools/bad.md", "---\n" + yaml.safe_dump({"metadata": {"approval": value}}) + "---\nx\n")
    manager = Manager([tools], approver=lambda r: "approve", sessions=tmp_path / "s.db")
    with pytest.raises(ConfigurationError) as error:
        await manager.invoke("bad")
    assert error.value.tool == "bad" and error.value.key == "approval" and said in str(error.value)


async def test_an_approval_value_of_the_wrong_type_fails_its_params(write, tools, tmp_path):
    write("tools/bad.md", "---\nmetadata: {approval: 'yes'}\n---\nx\n")
    manager = Manager([tools], approver=lambda r: "approve", sessions=tmp_path / "s.db")
    with pytest.raises(ArgsValidationError) as error:
        await manager.invoke("bad")
    assert error.value.tool == "approval" and [pointer for pointer, _ in error.value.errors] == [""]


# -- batches ---------------------------------------------------------------------------

TWO = {
    "calls": [
        {"name": "send", "arguments": {"to": "bob"}},
        {"name": "send", "arguments": {"to": "ann"}},
        {"name": "lookup", "arguments": {}},
    ]
}


async def test_batch_approval_asks_once_per_turn_and_decides_each(write, manager):
    agent(
        write,
        "mailer",
        [TWO, {"answer": "half", "expect": {"contains": "sent to eve (cc nobody)"}}],
        **{"batch-pipeline": {"approval": {"tools": ["send"]}}},
    )
    asked = []

    def approver(request):
        asked.append(request)
        first, second = (c["id"] for c in request["calls"])
        return {
            "action": "edit",
            "args": {"decisions": {first: {"action": "edit", "args": {"to": "eve"}}, second: "deny"}},
        }

    manager.approver = approver
    assert await manager.invoke("mailer") == "half"
    (request,) = asked
    assert request["kind"] == "batch" and [c["tool"] for c in request["calls"]] == ["send", "send"]
    assert [c["arguments"] for c in request["calls"]] == [{"to": "bob"}, {"to": "ann"}]


async def test_batch_denied_as_a_whole(write, manager):
    agent(
        write,
        "mailer",
        [TWO, {"answer": "none", "expect": {"contains": "no mail today"}}],
        **{"batch-pipeline": {"approval": {}}},
    )
    manager.approver = lambda request: {"action": "deny", "reason": "no mail today"}
    assert await manager.invoke("mailer") == "none"


async def test_tool_batch_invoked_directly_applies_the_decisions(write, manager):
    calls = [
        {"id": "a", "tool": "send", "arguments": {"to": "bob"}},
        {"id": "b", "tool": "lookup", "arguments": {}},
    ]
    manager.approver = lambda request: {"action": "deny", "reason": "no"}
    result = await manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {"tools": ["send"]}})
    assert result[1] == calls[1]
    assert result[0]["id"] == "a" and "no" in result[0]["denied"] and "denied" in result[0]["denied"]
    manager.approver = lambda request: "approve"
    assert await manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {}}) == calls


async def test_a_batch_edit_denies_the_calls_it_leaves_out_and_refuses_garbage(write, manager):
    calls = [{"id": "a", "tool": "send", "arguments": {"to": "bob"}}, {"id": "b", "tool": "send", "arguments": {}}]
    manager.approver = lambda request: {"action": "edit", "args": {"decisions": {"a": "approve"}}}
    result = await manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {}})
    assert result[0] == calls[0] and "no decision was given" in result[1]["denied"]
    manager.approver = lambda request: {"action": "edit", "args": {"decisions": {"a": "perhaps"}}}
    with pytest.raises(ApproverError, match="the batch decision for call 'a'"):
        await manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {}})
    manager.approver = lambda request: {"action": "edit", "args": {"a": "approve"}}
    with pytest.raises(ApproverError, match="must be {decisions: {call id: decision}}"):
        await manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {}})


def test_requests_are_plain_json():
    assert plain({"when": object(), "n": (1, 2)})["when"].startswith("<object")
    assert plain({"n": (1, 2)}) == {"n": [1, 2]}


# -- the terminal -------------------------------------------------------------------------

TERMINAL = """
import sys
from orchestrator import Manager
from orchestrator.approval import terminal
manager = Manager([sys.argv[1]], approver=terminal(), sessions=sys.argv[2])
try:
    print("RESULT", manager.invoke_sync("send", {"to": "bob"}), flush=True)
except Exception as exc:
    print("ERROR", type(exc).__name__, exc, flush=True)
"""


def on_terminal(tools: Path, tmp_path: Path, typed: list[bytes], eof: bool = False) -> str:
    """Run TERMINAL with stdin, stdout and stderr on a pseudo-terminal, the answers typed ahead."""
    import pty
    import select

    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", TERMINAL, str(tools), str(tmp_path / "s.db")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm"},
    )
    os.close(slave)
    os.write(master, b"".join(line + b"\n" for line in typed) + (b"\x04" if eof else b""))
    shown = b""
    deadline = time.monotonic() + 30  # does not hang: a stuck prompt fails the test
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closes once the process is gone
                break
            if not chunk:
                break
            shown += chunk
    finally:
        process.kill() if process.poll() is None else None
        process.wait(timeout=30)
        os.close(master)
    return shown.decode(errors="replace").replace("\r\n", "\n")


@pytest.fixture
def mail_tools(write, tools):
    write("tools/send.py", SEND.replace('"metadata": {', '"metadata": {"approval": {"reason": "sends mail"}, '))
    return tools


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_terminal_approves_on_y(mail_tools, tmp_path):
    shown = on_terminal(mail_tools, tmp_path, [b"y"])
    assert "approval needed: send" in shown and "why: sends mail" in shown and 'send {"to": "bob"}' in shown
    assert "RESULT sent to bob (cc nobody)" in shown


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_terminal_reasks_on_bad_input_and_edits_validated_json(mail_tools, tmp_path):
    shown = on_terminal(mail_tools, tmp_path, [b"what", b"e", b"{not json", b"e", b'{"to": 5}', b"e", b'{"to": "eve"}'])
    assert "please answer y, n or e" in shown and "not JSON" in shown and "/to: " in shown
    assert "RESULT sent to eve (cc nobody)" in shown


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.slow  # two processes on a pseudo-terminal
def test_terminal_denies_with_a_reason_and_on_ctrl_d(mail_tools, tmp_path):
    shown = on_terminal(mail_tools, tmp_path, [b"n", b"not today"])
    assert "ERROR ApprovalDenied" in shown and "not today" in shown
    shown = on_terminal(mail_tools, tmp_path, [], eof=True)
    assert "ERROR ApprovalDenied" in shown and "no answer from the terminal" in shown


async def test_an_approver_is_shown_shorthand_params_as_json_schema(write, tools, tmp_path):
    write(
        "tools/wire.md",
        "---\nmetadata:\n  approval: true\n  params:\n    to: string\n    amount?: number, the sum\n---\nx\n",
    )
    seen = []
    manager = Manager([tools], approver=lambda request: seen.append(request) or "approve", sessions=tmp_path / "s.db")
    assert await manager.invoke("wire", {"to": "bob"}) == "x"
    assert seen[0]["params"] == {
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": ["number", "null"], "description": "the sum"}},
        "required": ["to"],
        "additionalProperties": False,
    }
