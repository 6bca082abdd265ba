"""The conversation commands (issue 14): chat on a pseudo-terminal, sessions list/show/delete, resume."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from orchestrator import Manager
from orchestrator.cli import cli
from orchestrator.errors import Interrupted
from orchestrator.sessions import SQLiteStore

CHAT = """---
description: Remembers names.
metadata:
  params: {type: object, properties: {line: {type: string}}}
  model:
    provider: scripted
    script:
      - Nice to meet you, Ada.
      - {answer: "You are Ada.", expect: {contains: ["I am Ada", "Nice to meet you, Ada."]}}
---
{{ args.line }}
"""

HOLD = """
from orchestrator.approval import take_decision
from orchestrator.errors import ApprovalRequired
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    decision = take_decision()
    if decision is None:
        raise ApprovalRequired("held", request={"tool": ctx.target.tool.name, "args": dict(ctx.target.args)})
    if decision.action == "deny":
        raise PermissionError(decision.reason)
    if decision.action == "edit":
        ctx.target.args = dict(decision.args)
    return await ctx.target.manager.next()
"""

SEND = """
frontmatter = {"metadata": {"hold": {}, "params": {"type": "object", "properties": {"to": {"type": "string"}}}}}
def main(ctx):
    return "sent to " + ctx.args["to"]
"""

MAILER = """---
metadata:
  params: {type: object, properties: {line: {type: string}}}
  tools: [send]
  model:
    provider: scripted
    script:
      - calls: [{name: send, arguments: {to: bob}}]
      - {answer: "Done.", expect: {contains: "sent to"}}
---
{{ args.line }}
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(NO_COLOR="1", COLUMNS="200", PYTHONWARNINGS="error", TERM="xterm")
    return env


def on_terminal(args: list[str], lines: list[str], cwd: Path) -> tuple[int, str]:
    """Run toolcascade with stdin, stdout and stderr on a pseudo-terminal, typing ``lines``; code and screen."""
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=environment(),
    )
    os.close(slave)
    os.write(master, "".join(line + "\n" for line in lines).encode())
    screen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # closed: the process is gone
                    break
                if not chunk:
                    break
                screen += chunk
            elif process.poll() is not None:
                break
        code = process.wait(timeout=30)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, screen.decode(errors="replace").replace("\r\n", "\n")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_chat_on_a_terminal_keeps_the_conversation_in_the_session(write, tmp_path):
    write("tools/namer.md", CHAT)
    db = tmp_path / "s.db"
    code, screen = on_terminal(["chat", "namer", "--store", str(db)], ["I am Ada", "Who am I?", "/exit"], tmp_path)
    assert code == 0, screen
    assert "Nice to meet you, Ada." in screen and "You are Ada." in screen
    session = screen.split("session ", 1)[1].split()[0]  # the new session's id is printed first
    stored = anyio.run(SQLiteStore(db).messages, session)
    assert [m["content"] for m in stored] == ["I am Ada", "Nice to meet you, Ada.", "Who am I?", "You are Ada."]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_chat_asks_about_a_held_call_and_continues(write, tmp_path):
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write("tools/mailer.md", MAILER)
    code, screen = on_terminal(
        ["chat", "mailer", "--store", str(tmp_path / "s.db"), "--session", "m1"], ["mail bob", "y", "/exit"], tmp_path
    )
    assert code == 0, screen
    assert 'approval needed: send {"to": "bob"}' in screen and "Done." in screen


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_sessions_list_show_and_delete(tmp_path):
    db = str(tmp_path / "s.db")
    store = SQLiteStore(db)
    calls = [{"id": "c1", "name": "lookup", "arguments": {"word": "cat"}}]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
    ]
    anyio.run(lambda: store.append("talk-1", messages, agent="helper"))
    code, out, _ = run("sessions", "list", "--store", db)
    assert code == 0 and "talk-1" in out and "helper" in out and " 3 " in out
    code, out, _ = run("sessions", "list", "--store", db, "--json")
    assert json.loads(out)[0]["id"] == "talk-1"
    code, out, _ = run("sessions", "show", "talk-1", "--store", db)
    assert out.splitlines() == ["user: hi", 'assistant: → lookup {"word": "cat"}', "tool: a cat"]
    code, out, _ = run("sessions", "show", "talk-1", "--store", db, "--json")
    assert json.loads(out)["messages"] == messages
    code, _, err = run("sessions", "delete", "talk-1", "--store", db)
    assert code == 0 and "deleted session talk-1" in err
    code, _, err = run("sessions", "show", "talk-1", "--store", db)
    assert code == 1 and "error: no session 'talk-1'" in err
    code, _, err = run("sessions", "show", "bad id!", "--store", db)
    assert code == 2 and "letters, digits" in err
    code, _, err = run("sessions", "list", "--store", str(tmp_path))
    assert code == 2  # a folder is not a store file


def test_a_corrupt_store_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite" * 100)
    code, _, err = run("sessions", "list", "--store", str(bad))
    assert code == 1 and err.startswith("error: ConfigurationError: ") and "bad.db" in err


def held(tools: Path, db: Path) -> str:
    manager = Manager([tools], sessions=db)
    with pytest.raises(Interrupted) as caught:
        manager.invoke_sync("mailer", {"line": "mail bob"})
    return caught.value.token


@pytest.mark.parametrize(
    ("decision", "shown"),
    [
        (["--approve"], "Done."),
        (["--deny", "--reason", "not today"], "Done."),
        (["--edit", '{"to": "carol"}'], "Done."),
    ],
)
def test_resume_continues_the_run_and_prints_its_result(write, tools, tmp_path, decision, shown):
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write(
        "tools/mailer.md",
        MAILER.replace(
            '"sent to"',
            {"--approve": '"sent to bob"', "--deny": '"not today"', "--edit": '"sent to carol"'}[decision[0]],
        ),
    )
    db = tmp_path / "s.db"
    token = held(tools, db)
    code, out, err = run("resume", token, *decision, "--path", str(tools), "--store", str(db))
    assert (code, out) == (0, shown + "\n"), err
    code, _, err = run("resume", token, "--approve", "--path", str(tools), "--store", str(db))
    assert code == 1 and "error: InvocationError: no suspended run has the token" in err


def test_resume_needs_exactly_one_decision(tmp_path):
    code, _, err = run("resume", "tok", "--store", str(tmp_path / "s.db"))
    assert code == 2 and "exactly one of --approve, --deny, --edit JSON or --answer TEXT" in err
    code, _, err = run("resume", "tok", "--approve", "--reason", "x", "--store", str(tmp_path / "s.db"))
    assert code == 2 and "--reason goes with --deny" in err
    code, _, err = run("resume", "tok", "--edit", "{bad", "--store", str(tmp_path / "s.db"))
    assert code == 1 and "--edit is not valid JSON" in err


def test_piped_chat_leaves_a_held_turn_for_resume_and_reads_on(write, tools, tmp_path):
    # Piped lines are the conversation: the line after a held turn is not taken as its answer.
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write("tools/mailer.md", MAILER.replace('"sent to"', '"sent to bob"'))
    db = tmp_path / "s.db"
    result = CliRunner().invoke(
        cli,
        ["chat", "mailer", "--session", "p1", "--path", str(tools), "--store", str(db)],
        input="mail bob\ny\n/exit\n",
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert 'paused: waiting for a decision on send {"to": "bob"}' in result.stderr
    command = next(line for line in result.stderr.splitlines() if "continue: toolcascade resume" in line)
    words = command.split("continue: ", 1)[1].split()
    assert words[-4:] == ["--path", str(tools), "--store", str(db)]
    code, out, err = run(*words[1:])
    assert (code, out) == (0, "Done.\n"), err


ASKING = """
from orchestrator.questions import ask_caller
frontmatter = {"description": "Asks for a unit.", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    unit = await ask_caller(ctx, "Which unit, C or F?", {"type": "string", "enum": ["C", "F"]})
    return f"21 {unit}"
"""


def test_a_paused_question_says_what_it_asks_and_resume_answer_continues_it(write, tools, tmp_path):
    write("tools/asking.py", ASKING)
    where = ("--path", str(tools), "--store", str(tmp_path / "q.db"))
    code, out, err = run("run", "asking", "--no-log", *where)
    assert code == 3 and out == "", err
    assert "paused: asking asks: Which unit, C or F?" in err and '"enum": ["C", "F"]' in err
    command = next(line for line in err.splitlines() if "continue: toolcascade resume" in line).split("continue: ")[1]
    words = command.split()
    assert words[3:5] == ["--answer", "ANSWER"]
    token = words[2]
    code, _, err = run("resume", token, "--answer", "kelvin", *where)  # fails the schema: still paused
    assert code == 1 and "AnswerValidationError" in err
    code, _, err = run("resume", token, "--answer", "F", "--approve", *where)
    assert code == 2 and "exactly one of" in err
    code, out, err = run("resume", token, "--answer", "F", *where)  # plain text, not JSON, is the answer as written
    assert (code, out) == (0, "21 F\n"), err


def test_resume_answer_never_approves_a_held_call(write, tools, tmp_path):
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write("tools/mailer.md", MAILER.replace('"sent to"', '"sent to bob"'))
    db = tmp_path / "s.db"
    token = held(tools, db)
    code, _, err = run("resume", token, "--answer", '"approve"', "--path", str(tools), "--store", str(db))
    assert code == 1, err
    code, out, err = run("resume", token, "--approve", "--path", str(tools), "--store", str(db))
    assert (code, out) == (0, "Done.\n"), err  # the refused answer did not spend the token
