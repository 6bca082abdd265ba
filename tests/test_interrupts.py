"""Interrupt and resume (issue 14): a held call suspends the run; resume continues it, the call runs once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
import yaml

from orchestrator import ConfigurationError, InvocationError, Manager, SessionLostError
from orchestrator.errors import Interrupted
from orchestrator.sessions import MemoryStore, SQLiteStore

pytestmark = pytest.mark.anyio

# Stands in for the approval middleware: holds the call unless a resumed run carries a decision.
HOLD = """
from orchestrator.approval import take_decision
from orchestrator.errors import ApprovalRequired
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    target = ctx.target
    decision = take_decision()
    if decision is None:
        raise ApprovalRequired("needs approval", request={"tool": target.tool.name, "args": dict(target.args)},
                               tool=target.tool.name)
    if decision.action == "deny":
        raise PermissionError(decision.reason or "denied")
    if decision.action == "edit":
        target.args = dict(decision.args)
    return await target.manager.next()
"""

# The same for a whole batch (a batch-pipeline middleware): deny marks every call denied.
BATCH_HOLD = """
from orchestrator.approval import take_decision
from orchestrator.errors import ApprovalRequired
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    target = ctx.target
    decision = take_decision()
    if decision is None:
        raise ApprovalRequired("batch needs approval", request={"tool": "tool-batch", "args": dict(target.args)})
    calls = await target.manager.next()
    if decision.action == "deny":
        return [{"id": call["id"], "denied": decision.reason} for call in calls]
    return calls
"""

# A tool that counts its runs in a file beside it: {name}.log gets one line per run.
COUNTED = """
from pathlib import Path
frontmatter = {{"description": "{name}", "metadata": {{{extra}"params": {{"type": "object"}}}}}}
def main(ctx):
    with open(Path(__file__).with_name("{name}.log"), "a") as out:
        out.write(str(ctx.args.get("to", "")) + "\\n")
    return "{name} done for " + str(ctx.args.get("to"))
"""


def runs(tools: Path, name: str) -> list[str]:
    log = tools / f"{name}.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def project(write, tools):
    write("tools/hold.py", HOLD)
    write("tools/send.py", COUNTED.format(name="send", extra='"hold": {}, '))
    write("tools/lookup.py", COUNTED.format(name="lookup", extra=""))
    return tools


def agent(write, script: list, name: str = "mailer", **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, "tools": ["send", "lookup"], **meta}
    front = yaml.safe_dump({"description": "mails", "metadata": metadata}, sort_keys=False)
    write(f"tools/{name}.md", f"---\n{front}---\nMail {{{{ args.to }}}}\n")


CALLS = {"calls": [{"name": "send", "arguments": {"to": "bob"}}, {"name": "lookup", "arguments": {"to": "bob"}}]}


async def test_interrupt_then_a_new_manager_resumes_and_the_call_runs_once(write, project, tmp_path):
    done = {"answer": "sent", "expect": {"contains": ["send done for bob", "lookup done for bob"], "last-role": "tool"}}
    agent(write, [CALLS, done])
    db = tmp_path / "sessions.db"
    with pytest.raises(Interrupted) as caught:
        await Manager([project], sessions=db).invoke("mailer", {"to": "bob"})
    held = caught.value
    assert held.request == {"tool": "send", "args": {"to": "bob"}}
    assert "toolcascade resume" in str(held) and held.token in str(held)
    assert runs(project, "send") == [] and runs(project, "lookup") == ["bob"]  # the other call finished
    assert await Manager([project], sessions=db).resume(held.token, "approve") == "sent"
    assert runs(project, "send") == ["bob"] and runs(project, "lookup") == ["bob"]  # reused, not run again
    with pytest.raises(InvocationError, match="resumed already"):
        await Manager([project], sessions=db).resume(held.token, "approve")


async def test_deny_gives_the_model_an_error_result_with_the_reason(write, project):
    agent(write, [CALLS, {"answer": "not sent", "expect": {"contains": "PermissionError: not to bob"}}])
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("mailer", {"to": "bob"})
    decision = {"action": "deny", "reason": "not to bob"}
    assert await manager.resume(caught.value.token, decision) == "not sent"
    assert runs(project, "send") == []


async def test_edit_runs_the_call_with_the_new_arguments(write, project):
    agent(write, [CALLS, {"answer": "sent", "expect": {"contains": "send done for carol"}}])
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("mailer", {"to": "bob"})
    assert await manager.resume(caught.value.token, {"action": "edit", "args": {"to": "carol"}}) == "sent"
    assert runs(project, "send") == ["carol"]


async def test_a_turn_with_two_held_calls_suspends_again_for_the_second(write, project):
    two = {"calls": [{"name": "send", "arguments": {"to": "a"}}, {"name": "send", "arguments": {"to": "b"}}]}
    agent(write, [two, {"answer": "both", "expect": {"contains": ["send done for a", "send done for b"]}}])
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as first:
        await manager.invoke("mailer", {"to": "x"})
    assert first.value.request["args"] == {"to": "a"}
    with pytest.raises(Interrupted) as second:
        await manager.resume(first.value.token)
    assert second.value.request["args"] == {"to": "b"} and runs(project, "send") == ["a"]
    assert await manager.resume(second.value.token) == "both"
    assert runs(project, "send") == ["a", "b"]


async def test_a_suspended_conversation_is_saved_once_resumed(write, project):
    agent(write, [CALLS, "sent"])
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("mailer", {"to": "bob", "$context": {"session": "m"}})
    assert await manager.sessions.messages("m") == []  # the held turn is in the suspended state, not yet saved
    assert await manager.resume(caught.value.token) == "sent"
    roles = [m["role"] for m in await manager.sessions.messages("m")]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]


async def test_a_resumed_run_stops_when_another_run_wrote_its_session_meanwhile(write, project):
    # A suspended run holds no lease while a person decides; another run may take the session and write it.
    # The resumed run must not append after (or compact away) what that run wrote (issue 24, finding 4).
    agent(write, [CALLS, "sent"])
    agent(write, ["other answer"], name="other")
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("mailer", {"to": "bob", "$context": {"session": "m"}})
    assert await manager.invoke("other", {"to": "ann", "$context": {"session": "m"}}) == "other answer"
    written = await manager.sessions.messages("m")
    with pytest.raises(SessionLostError) as lost:
        await manager.resume(caught.value.token)
    assert lost.value.key == "session" and lost.value.tool == "mailer"
    assert await manager.sessions.messages("m") == written  # the other run's turn, untouched
    assert runs(project, "send") == []  # the held call never ran


async def test_a_held_batch_resumes_with_the_decision(write, project):
    write("tools/batch-hold.py", BATCH_HOLD)
    write("tools/quiet-send.py", COUNTED.format(name="quiet", extra=""))
    call = {"calls": [{"name": "quiet-send", "arguments": {"to": "z"}}]}
    metadata = {"tools": ["quiet-send"], "batch-pipeline": {"batch-hold": {}}}
    agent(write, [call, {"answer": "ok", "expect": {"contains": "PermissionError: denied: no batch"}}], **metadata)
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("mailer", {"to": "z"})
    assert caught.value.request["tool"] == "tool-batch"
    assert await manager.resume(caught.value.token, {"action": "deny", "reason": "no batch"}) == "ok"
    assert runs(project, "quiet") == []


async def test_resume_of_a_top_level_tool_call(project):
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("send", {"to": "dana"}, timeout=30)
    assert runs(project, "send") == []
    assert await manager.resume(caught.value.token, True) == "send done for dana"
    assert runs(project, "send") == ["dana"]
    with pytest.raises(InvocationError, match="no suspended run has the token"):
        await manager.resume(caught.value.token, True)


async def test_options_that_are_not_json_cannot_be_suspended(project):
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(InvocationError, match="cannot be suspended: its option 'context' is not plain JSON"):
        await manager.invoke("send", {"to": "x"}, context={"locals": {"callback": print}})
    tool = manager.find_tool("send")
    with pytest.raises(InvocationError, match="invoked with a Tool object"):
        await manager.invoke(tool, {"to": "x"})


async def test_a_bad_decision_does_not_spend_the_token(project):
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("send", {"to": "x"})
    with pytest.raises(ConfigurationError, match="a decision is"):
        await manager.resume(caught.value.token, "maybe")
    assert await manager.resume(caught.value.token, "approve") == "send done for x"


def test_two_threads_racing_for_one_token_resume_it_once(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    anyio.run(store.suspend, "tok", {"x": 1})
    got: list[object] = []
    barrier = threading.Barrier(4)

    def take() -> None:
        barrier.wait()
        got.append(anyio.run(store.take, "tok"))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(got, key=str) == [None, None, None, {"x": 1}]


@pytest.mark.slow
async def test_resume_in_another_process_runs_the_approved_call_once(write, project, tmp_path):
    agent(write, [CALLS, "sent"])
    db = tmp_path / "sessions.db"
    with pytest.raises(Interrupted) as caught:
        await Manager([project], sessions=db).invoke("mailer", {"to": "bob"})
    code = (
        "import sys\nfrom orchestrator import Manager\n"
        f"m = Manager([{str(project)!r}], sessions={str(db)!r})\n"
        "print(__import__('anyio').run(m.resume, sys.argv[1]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, caught.value.token], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sent"
    assert runs(project, "send") == ["bob"]
    again = subprocess.run(
        [sys.executable, "-c", code, caught.value.token], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1 and "InvocationError: no suspended run has the token" in again.stderr
    assert runs(project, "send") == ["bob"]
    assert json.loads(json.dumps(caught.value.request)) == caught.value.request


COUNTING = """
frontmatter = {"role": "middleware"}
async def main(ctx):
    state = ctx.run.state
    state["count"] = state.get("count", 0) + 1
    state["where"] = {"last": ctx.target.tool.name}
    return await ctx.target.manager.next()
"""


def report(write, returns: str) -> None:
    """``report``: held by ``hold`` after ``count`` ran; returns ``returns`` (an expression over ``ctx``)."""
    write(
        "tools/report.py",
        "frontmatter = {'metadata': {'count': {}, 'hold': {}, 'params': {'type': 'object'},"
        " '$order': {'hold': {'after': ['count']}}}}\n"
        f"async def main(ctx):\n    return {returns}\n",
    )


async def test_a_resumed_run_continues_the_run_state_the_held_one_kept(write, project):
    """ctx.run.state (call-limit's counts, a breaker's memory) survives a suspension: holding resets no limit."""
    write("tools/count.py", COUNTING)
    report(write, "dict(ctx.run.state)")
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("report", {})
    assert await manager.resume(caught.value.token, "approve") == {"count": 2, "where": {"last": "report"}}


async def test_run_state_that_is_not_json_is_left_behind_with_a_warning(write, project, caplog):
    write(
        "tools/count.py",
        "frontmatter = {'role': 'middleware'}\n"
        "async def main(ctx):\n    ctx.run.state['n'] = ctx.run.state.get('n', 0) + 1\n"
        "    ctx.run.state['fn'] = print\n    return await ctx.target.manager.next()\n",
    )
    report(write, "ctx.run.state['n']")
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("report", {})
    assert "ctx.run.state['fn'] is not plain JSON" in caplog.text
    assert await manager.resume(caught.value.token, "approve") == 2


async def test_a_token_resumes_only_the_tool_it_was_held_for_and_stays_usable(project):
    manager = Manager([project], sessions=MemoryStore())
    with pytest.raises(Interrupted) as caught:
        await manager.invoke("send", {"to": "erin"})
    with pytest.raises(InvocationError, match="is a call of 'send', not of 'lookup'"):
        await manager.resume(caught.value.token, "approve", ref="lookup")
    assert runs(project, "send") == []
    assert await manager.resume(caught.value.token, "approve", ref="send") == "send done for erin"
    assert runs(project, "send") == ["erin"]
