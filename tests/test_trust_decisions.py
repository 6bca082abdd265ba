"""A decision is bound to the call it was asked about (issue 24, finding 2 and the approver-edit finding).

The red team's attack: the person is asked about ``drop-db {db: staging-scratch-db}``; the input
changes before they answer; ``resume(token, "approve")`` replays the run and the first call the
approval middleware holds, ``drop-db {db: production-db}``, took the decision. Now a resumed
decision applies only to a held call whose tool and canonical args equal the saved request's;
any other call holds again (a new token, a message saying the call changed). An approver's edit
changes a call's arguments only: ``$`` keys (invoke options) in it are refused, never passed on.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client
from mcp.types import ElicitResult

from orchestrator import ConfigurationError, InvocationError, Manager
from orchestrator.approval import ApprovalDenied, ApproverError, Decision, terminal
from orchestrator.cli import cli
from orchestrator.errors import Interrupted
from orchestrator.mcp import build_server
from orchestrator.sessions import MemoryStore

pytestmark = pytest.mark.anyio

# No additionalProperties: false, so a `$` key an edit smuggled in would reach the tool as a plain arg.
DROP_DB = """
import json
from pathlib import Path
frontmatter = {"description": "Drops a database.", "metadata": {
    "approval": {"reason": "it deletes every table"},
    "params": {"type": "object", "properties": {"db": {"type": "string"}}, "required": ["db"]}}}
def main(ctx):
    with open(Path(__file__).with_name("dropped.log"), "a") as log:
        log.write(json.dumps(dict(ctx.args), sort_keys=True) + "\\n")
    return "DROPPED " + ctx.args["db"]
"""

# The call's input comes from a file that can change between the hold and the resume.
CLEANUP = """
from pathlib import Path
frontmatter = {"description": "Drops the databases named in targets.txt.", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    names = Path(__file__).with_name("targets.txt").read_text().split()
    return [await ctx.manager.invoke("drop-db", {"db": name}) for name in names]
"""

# A batch of calls read from calls.json, held once by the approval middleware on tool-batch.
BATCHER = """
import json
from pathlib import Path
frontmatter = {"metadata": {"params": {"type": "object"}}}
async def main(ctx):
    calls = json.loads(Path(__file__).with_name("calls.json").read_text())
    return await ctx.manager.invoke("tool-batch", {"calls": calls}, overrides={"approval": {}})
"""


@pytest.fixture
def project(write, tools: Path) -> Path:
    write("tools/drop-db.py", DROP_DB)
    write("tools/cleanup.py", CLEANUP)
    write("tools/batcher.py", BATCHER)
    return tools


def targets(tools: Path, *names: str) -> None:
    (tools / "targets.txt").write_text(" ".join(names))


def dropped(tools: Path) -> list[dict]:
    log = tools / "dropped.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def ops_agent(write, script: list, tools: list[str]) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, "tools": tools}
    write("tools/ops.md", "---\n" + yaml.safe_dump({"metadata": metadata}, sort_keys=False) + "---\nClean up.\n")


async def held(call) -> Interrupted:
    with pytest.raises(Interrupted) as caught:
        await call
    return caught.value


# -- the attack ----------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", {"action": "edit", "args": {"db": "staging-scratch-db"}}])
async def test_a_decision_on_a_call_whose_input_changed_holds_again_and_nothing_is_dropped(project, decision):
    targets(project, "staging-scratch-db")
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("cleanup"))
    shown = first.request
    assert (shown["tool"], shown["args"]) == ("drop-db", {"db": "staging-scratch-db"})
    assert shown["reason"] == "it deletes every table" and shown["description"] == "Drops a database."

    targets(project, "production-db")  # the input changes before the person answers
    again = await held(manager.resume(first.token, decision))
    assert dropped(project) == []  # production-db was never approved, so it did not run
    assert again.token != first.token and "changed" in str(again)
    assert again.request["args"] == {"db": "production-db"}
    assert again.request["changed"] == {"tool": "drop-db", "args": {"db": "staging-scratch-db"}}
    with pytest.raises(InvocationError, match="resumed already"):
        await manager.resume(first.token, "approve")  # the old token is spent

    # The person now sees production-db and decides about it.
    with pytest.raises(ApprovalDenied, match="not production"):
        await manager.resume(again.token, {"action": "deny", "reason": "not production"})
    assert dropped(project) == []


async def test_an_unchanged_call_takes_its_decision(project):
    targets(project, "staging-scratch-db")
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("cleanup"))
    assert await manager.resume(first.token, "approve") == ["DROPPED staging-scratch-db"]
    assert dropped(project) == [{"db": "staging-scratch-db"}]


async def test_in_an_agents_turn_a_changed_call_holds_again(write, project, tmp_path):
    targets(project, "staging-scratch-db")
    ops_agent(write, [{"calls": [{"name": "cleanup", "arguments": {}}]}, "cleaned"], ["cleanup"])
    db = tmp_path / "sessions.db"
    first = await held(Manager([project], sessions=db).invoke("ops"))
    assert first.request["args"] == {"db": "staging-scratch-db"}
    targets(project, "production-db")
    again = await held(Manager([project], sessions=db).resume(first.token, "approve"))
    assert dropped(project) == [] and "changed" in str(again)
    assert again.request["args"] == {"db": "production-db"}
    assert await Manager([project], sessions=db).resume(again.token, "approve") == "cleaned"
    assert dropped(project) == [{"db": "production-db"}]  # once the person approved it


# -- each decision applies to its own call -------------------------------------------------


async def test_two_calls_of_one_tool_each_get_their_own_decision(project):
    targets(project, "alpha", "beta")
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("cleanup"))
    assert first.request["args"] == {"db": "alpha"}
    second = await held(manager.resume(first.token, {"action": "edit", "args": {"db": "alpha-copy"}}))
    assert second.request["args"] == {"db": "beta"} and "changed" not in second.request
    assert dropped(project) == [{"db": "alpha-copy"}]  # the edit went to alpha's call, not to beta's
    assert await manager.resume(second.token, "approve") == ["DROPPED alpha-copy", "DROPPED beta"]
    # The run replays from its start: alpha's edit applies again to alpha's call, beta's approval to beta's.
    assert dropped(project) == [{"db": "alpha-copy"}, {"db": "alpha-copy"}, {"db": "beta"}]


async def test_one_approval_covers_one_call_even_when_the_same_call_comes_twice(project):
    targets(project, "alpha", "alpha")
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("cleanup"))
    second = await held(manager.resume(first.token, "approve"))
    assert second.request["args"] == {"db": "alpha"} and dropped(project) == [{"db": "alpha"}]
    assert await manager.resume(second.token, "approve") == ["DROPPED alpha", "DROPPED alpha"]


async def test_a_decision_made_before_a_changed_call_is_not_carried_past_it(project):
    targets(project, "alpha", "beta")
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("cleanup"))
    second = await held(manager.resume(first.token, "approve"))  # alpha ran; beta holds
    targets(project, "gamma", "beta")  # alpha's call is gone from the run
    third = await held(manager.resume(second.token, "approve"))
    assert third.request["args"] == {"db": "gamma"} and third.request["changed"]["args"] == {"db": "beta"}
    fourth = await held(manager.resume(third.token, "approve"))  # beta's approval was not kept past the change
    assert fourth.request["args"] == {"db": "beta"} and "changed" not in fourth.request
    assert [d["db"] for d in dropped(project)] == ["alpha", "gamma"]


async def test_an_edit_in_an_agents_turn_applies_to_its_call_only(write, project):
    two = {"calls": [{"name": "drop-db", "arguments": {"db": "a"}}, {"name": "drop-db", "arguments": {"db": "b"}}]}
    done = {"answer": "both", "expect": {"contains": ["DROPPED a2", "DROPPED b"]}}
    ops_agent(write, [two, done], ["drop-db"])
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("ops"))
    assert first.request["args"] == {"db": "a"}
    second = await held(manager.resume(first.token, {"action": "edit", "args": {"db": "a2"}}))
    assert second.request["args"] == {"db": "b"}
    assert await manager.resume(second.token, "approve") == "both"
    assert dropped(project) == [{"db": "a2"}, {"db": "b"}]


# -- batches -------------------------------------------------------------------------------

CALLS = [
    {"id": "one", "tool": "drop-db", "arguments": {"db": "a"}},
    {"id": "two", "tool": "drop-db", "arguments": {"db": "b"}},
]


def batch_calls(tools: Path, calls: list[dict]) -> None:
    (tools / "calls.json").write_text(json.dumps(calls))


async def test_a_batch_decision_applies_only_when_every_held_call_is_the_one_shown(project):
    batch_calls(project, CALLS)
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("batcher"))
    assert first.request["kind"] == "batch" and first.request["calls"] == CALLS
    decision = {"action": "edit", "args": {"decisions": {"one": "deny", "two": "approve"}}}
    swapped = [{**CALLS[0], "arguments": {"db": "b"}}, {**CALLS[1], "arguments": {"db": "production"}}]
    batch_calls(project, swapped)  # call two now drops production: its approval was for b
    again = await held(manager.resume(first.token, decision))
    assert "changed" in str(again) and again.request["calls"] == swapped
    batch_calls(project, CALLS)
    third = await held(manager.resume(again.token, decision))  # the decision was for `swapped` now
    result = await manager.resume(third.token, decision)
    assert "denied" in result[0] and result[1] == CALLS[1]


async def test_a_batch_edit_for_one_call_does_not_reach_another(project):
    batch_calls(project, CALLS)
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("batcher"))
    edit = {"action": "edit", "args": {"decisions": {"one": {"action": "edit", "args": {"db": "a2"}}, "two": "deny"}}}
    result = await manager.resume(first.token, edit)
    assert result[0]["arguments"] == {"db": "a2"} and "denied" in result[1] and result[1]["arguments"] == {"db": "b"}


# -- `$` keys in an approver's edit ----------------------------------------------------------

SMUGGLED = [
    {"db": "x", "$middleware": {"approval": {"remove": True}}},
    {"db": "x", "$context": {"locals": {"model": "evil"}}},
    {"db": "x", "$overrides": {"approval": False}},
    {"db": "x", "$timeout": 1},
    {"db": "x", "$anything": 1},
]


@pytest.mark.parametrize("args", SMUGGLED)
def test_an_edit_decision_with_dollar_keys_is_refused(args):
    key = next(k for k in args if k.startswith("$"))
    with pytest.raises(ConfigurationError) as refused:
        Decision.of({"action": "edit", "args": args})
    assert refused.value.key == key and key in str(refused.value)
    with pytest.raises(ConfigurationError):
        Decision("edit", args=args)


@pytest.mark.parametrize("args", SMUGGLED[:2])
async def test_resume_with_a_dollar_key_edit_is_refused_and_does_not_spend_the_token(project, args):
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("drop-db", {"db": "x"}))
    with pytest.raises(ConfigurationError, match=r"\$"):
        await manager.resume(first.token, {"action": "edit", "args": args})
    assert dropped(project) == []
    assert await manager.resume(first.token, {"action": "edit", "args": {"db": "y"}}) == "DROPPED y"
    assert dropped(project) == [{"db": "y"}]


async def test_an_approver_edit_with_dollar_keys_is_an_approver_error_and_nothing_runs(project):
    smuggled = {"db": "x", "$middleware": {"approval": {"remove": True}}}
    manager = Manager([project], approver=lambda request: {"action": "edit", "args": smuggled}, sessions=MemoryStore())
    with pytest.raises(ApproverError, match=r"\$middleware"):
        await manager.invoke("drop-db", {"db": "x"})

    async def built(request):
        return Decision("edit", args={"db": "x", "$context": {"locals": {"a": 1}}})

    manager.approver = built
    with pytest.raises(ApproverError, match=r"\$context"):
        await manager.invoke("drop-db", {"db": "x"})
    assert dropped(project) == []


async def test_a_batch_edit_with_dollar_keys_is_an_approver_error(project):
    batch_calls(project, CALLS)
    decisions = {"one": {"action": "edit", "args": {"db": "a", "$middleware": {"approval": {"remove": True}}}}}
    answer = {"action": "edit", "args": {"decisions": {**decisions, "two": "approve"}}}
    manager = Manager([project], approver=lambda request: answer, sessions=MemoryStore())
    with pytest.raises(ApproverError, match=r"\$middleware"):
        await manager.invoke("batcher")


async def test_resume_with_a_dollar_key_batch_edit_is_refused_and_does_not_spend_the_token(project):
    batch_calls(project, CALLS)
    manager = Manager([project], sessions=MemoryStore())
    first = await held(manager.invoke("batcher"))
    smuggled = {"one": {"action": "edit", "args": {"db": "a", "$context": {"locals": {"x": 1}}}}, "two": "approve"}
    with pytest.raises(ApproverError, match=r"\$context"):
        await manager.resume(first.token, {"action": "edit", "args": {"decisions": smuggled}})
    assert await manager.resume(first.token, "approve") == CALLS


def test_the_terminal_asks_again_when_an_edit_has_dollar_keys():
    typed = io.StringIO('e\n{"db": "x", "$context": {"locals": {"a": 1}}}\ne\n{"db": "y"}\n')
    said = io.StringIO()
    request = {"kind": "call", "tool": "drop-db", "args": {"db": "x"}, "reason": None, "agent": None}
    assert terminal(typed, said)(request) == Decision("edit", args={"db": "y"})
    assert "$context" in said.getvalue()


def test_the_terminal_says_when_the_call_changed():
    said = io.StringIO()
    request = {
        "kind": "call",
        "tool": "drop-db",
        "args": {"db": "production-db"},
        "changed": {"tool": "drop-db", "args": {"db": "staging-scratch-db"}},
    }
    assert terminal(io.StringIO("n\n\n"), said)(request).action == "deny"
    assert "changed" in said.getvalue() and "staging-scratch-db" in said.getvalue()


# -- the command line ------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_resume_of_a_changed_call_holds_again_and_a_dollar_edit_is_refused(project, tmp_path):
    db = tmp_path / "s.db"
    targets(project, "staging-scratch-db")
    with pytest.raises(Interrupted) as caught:
        Manager([project], sessions=db).invoke_sync("cleanup")
    token = caught.value.token
    where = ("--path", str(project), "--store", str(db))

    code, _, err = run("resume", token, "--edit", '{"db": "x", "$middleware": {"approval": {"remove": true}}}', *where)
    assert code == 1 and "ConfigurationError" in err and "$middleware" in err

    targets(project, "production-db")
    code, out, err = run("resume", token, "--approve", *where)
    assert code == 3 and "changed" in err and "production-db" in err  # 3: paused again, waiting for a decision
    assert "DROPPED" not in out and dropped(project) == []
    new = err.split("toolcascade resume ", 1)[1].split()[0]
    assert new != token
    code, out, err = run("resume", new, "--approve", *where)
    assert code == 0, err
    assert "DROPPED production-db" in out and dropped(project) == [{"db": "production-db"}]


# -- MCP: a 2026-era client answers on its retry, which resumes the run -------------------------


async def test_mcp_retry_answering_about_a_call_whose_input_changed_is_asked_again(project, tmp_path):
    targets(project, "staging-scratch-db")
    asked: list[str] = []

    async def person(context, params) -> ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:  # the input changes while the person reads the question
            targets(project, "production-db")
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action="accept", content={"approve": False, "reason": "not production"})

    manager = Manager([project], sessions=tmp_path / "sessions.db")
    with anyio.fail_after(20):
        async with Client(build_server(manager), mode="auto", elicitation_callback=person) as client:
            result = await client.call_tool("cleanup", {})
    assert "staging-scratch-db" in asked[0] and "production-db" in asked[1]  # asked again, about what runs now
    assert "changed" in asked[1] and "staging-scratch-db" in asked[1]  # and told why, with what it was
    assert result.is_error and "not production" in result.content[0].text
    assert dropped(project) == []
