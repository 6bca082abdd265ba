"""Exit codes and streams of the command line (issue 25, point 10), tested on real processes.

0 done; 1 an error; 3 suspended, waiting for a decision (``toolcascade
resume``); 130 interrupted by Ctrl-C. A process exits once it has said why,
even when a thread is still stuck in a sync tool.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.cli import INTERRUPTED, SUSPENDED

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

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
    return await ctx.target.manager.next()
"""

SEND = """
frontmatter = {"metadata": {"hold": {}, "params": {"type": "object", "properties": {"to": {"type": "string"}}}}}
def main(ctx):
    return "sent to " + ctx.args["to"]
"""

MAILER = """---
metadata:
  tools: [send]
  model:
    provider: scripted
    script:
      - calls: [{name: send, arguments: {to: bob}}]
      - calls: [{name: send, arguments: {to: carol}}]
      - {answer: "Done.", expect: {contains: "sent to carol"}}
---
Mail bob, then carol.
"""

# A sync tool that says it started, then sleeps far longer than any bound below.
SLEEPER = """
import pathlib, time
frontmatter = {"metadata": {"$inherit": False}}
def main(ctx):
    pathlib.Path("started").write_text("yes")
    time.sleep(60)
    return "woke"
"""

# An async tool that says it started, then waits.
WAITER = """
import pathlib
import anyio
frontmatter = {"metadata": {"$inherit": False}}
async def main(ctx):
    pathlib.Path("started").write_text("yes")
    await anyio.sleep(60)
    return "woke"
"""

FAILING_AGENT = """---
metadata:
  returns: {type: object, properties: {n: {type: integer}}, required: [n]}
  returns-retries: 0
  model:
    provider: scripted
    script:
      - {answer: '{"m": 1}', usage: {prompt_tokens: 7, completion_tokens: 2}}
---
Count.
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(NO_COLOR="1", COLUMNS="200", PYTHONWARNINGS="error")
    return env


def toolcascade(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(),
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def resume_command(stderr: str) -> list[str]:
    """The ``toolcascade resume ...`` command a pause printed, as argv for this interpreter."""
    lines = [line for line in stderr.splitlines() if "toolcascade resume " in line]
    assert len(lines) == 1, stderr
    words = shlex.split(lines[0][lines[0].index("toolcascade resume ") :])
    return words[1:]


def started(process: subprocess.Popen[str], marker: Path) -> None:
    """Wait until the tool wrote ``marker`` (it runs now)."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)


def interrupted(cwd: Path, *args: str) -> tuple[int, str, float]:
    """Start ``toolcascade ARGS``, press Ctrl-C (SIGINT) once the tool runs; exit code, stderr, seconds to exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started(process, cwd / "started")
        os.kill(process.pid, signal.SIGINT)
        pressed = time.monotonic()
        _, stderr = process.communicate(timeout=60)
        return process.returncode, stderr, time.monotonic() - pressed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_codes_are_distinct():
    assert len({0, 1, 2, SUSPENDED, INTERRUPTED}) == 5
    assert INTERRUPTED == 128 + signal.SIGINT


def test_a_run_that_pauses_for_approval_exits_suspended_and_prints_how_to_resume(write, tmp_path):
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write("tools/mailer.md", MAILER)
    out = toolcascade("run", "mailer", "--path", "tools", "--store", "s.db", cwd=tmp_path)
    assert out.returncode == SUSPENDED, out.stderr
    assert out.stdout == ""
    assert "error" not in out.stderr.lower()  # a pause is not an error
    assert "send" in out.stderr and "bob" in out.stderr  # what is held

    # The printed command works as it is; the second held call pauses the resumed run again.
    again = toolcascade(*resume_command(out.stderr), cwd=tmp_path)
    assert again.returncode == SUSPENDED, again.stderr
    assert "carol" in again.stderr and "error" not in again.stderr.lower()
    done = toolcascade(*resume_command(again.stderr), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr


def test_a_paused_run_with_verbose_prints_its_usage(write, tmp_path):
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    write("tools/mailer.md", MAILER)
    out = toolcascade("run", "mailer", "--store", "s.db", "--verbose", cwd=tmp_path)
    assert out.returncode == SUSPENDED, out.stderr
    assert out.stderr.splitlines()[-1].startswith("usage: ") and "1 model call" in out.stderr


def test_a_failed_run_with_verbose_prints_its_usage(write, tmp_path):
    write("tools/counter.md", FAILING_AGENT)
    out = toolcascade("run", "counter", "--verbose", cwd=tmp_path)
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert lines[0].startswith("error: ReturnsValidationError")
    assert lines[-1].startswith("usage: 7 prompt + 2 completion") and "1 model call" in lines[-1]


def test_ctrl_c_during_a_run_exits_130_at_once(write, tmp_path):
    write("tools/waiter.py", WAITER)
    code, stderr, seconds = interrupted(tmp_path, "run", "waiter")
    assert code == INTERRUPTED, stderr
    assert "Traceback" not in stderr
    assert seconds < 20  # the tool would wait 60 s


def test_ctrl_c_during_a_sync_tool_exits_130_without_waiting_for_its_thread(write, tmp_path):
    write("tools/sleeper.py", SLEEPER)
    code, stderr, seconds = interrupted(tmp_path, "run", "sleeper")
    assert code == INTERRUPTED, stderr
    assert "Traceback" not in stderr
    assert seconds < 20  # the thread sleeps 60 s


def test_a_timeout_in_a_sync_tool_exits_once_the_error_is_printed(write, tmp_path):
    write("tools/sleeper.py", SLEEPER)
    began = time.monotonic()
    out = toolcascade("run", "sleeper", '{"$timeout": 1}', cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith("error: InvocationTimeout")
    assert time.monotonic() - began < 20  # the thread sleeps 60 s


def test_ctrl_c_in_chat_exits_130(write, tmp_path):
    write("tools/waiter.py", WAITER)
    write(
        "tools/talker.md",
        "---\nmetadata:\n  tools: [waiter]\n  model:\n    provider: scripted\n"
        "    script:\n      - calls: [{name: waiter, arguments: {}}]\n      - fine\n---\n{{ args.message }}\n",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "chat", "talker", "--store", "s.db"],
        cwd=tmp_path,
        env=environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None
        process.stdin.write("hello\n")
        process.stdin.flush()
        started(process, tmp_path / "started")
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == INTERRUPTED, stderr
        assert "Traceback" not in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_engine_warnings_on_stderr_name_files_as_check_does(tmp_path, monkeypatch, capsys):
    # issue 25, point 10: what the CLI prints names files under the current folder relative to it, warnings too
    import logging

    from orchestrator.exits import warnings_as_written

    monkeypatch.chdir(tmp_path)
    handler = warnings_as_written()
    try:
        assert warnings_as_written() is handler  # once per process, however many commands install it
        engine = logging.getLogger("orchestrator.planner")
        engine.warning("%s:3: $order of 'ghost' names 'ghost'", tmp_path / "tools" / "AUTHORITY.md")
        engine.info("not shown: below WARNING")
        assert capsys.readouterr().err == "tools/AUTHORITY.md:3: $order of 'ghost' names 'ghost'\n"
    finally:
        logging.getLogger("orchestrator").removeHandler(handler)


def test_the_codes_are_documented_in_the_help_and_the_readme():
    # issue 25: "Document the codes": `toolcascade --help` and the README's table name each, with its meaning
    from click.testing import CliRunner

    from orchestrator.cli import cli

    said = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    for words in ("0 done", "1 an error", f"{SUSPENDED} a run paused for a decision", f"{INTERRUPTED} Ctrl-C"):
        assert words in said
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| exit status | meaning |") :].split("\n\n")[0].splitlines()[2:]
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table}
    assert rows["0"] == "done" and rows["1"].startswith("an error")
    assert rows[str(SUSPENDED)].startswith("suspended") and "toolcascade resume" in rows[str(SUSPENDED)]
    assert rows[str(INTERRUPTED)].startswith("interrupted with Ctrl-C")
