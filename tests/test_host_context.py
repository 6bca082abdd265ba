"""Context injection in Claude Code commands and skills: !`cmd`, ```! blocks and @file (issue 28).

Off by default: the markers stay text and ``check`` says how to turn it on.
With ``host-trust: {context: true}`` (and ``exec`` for commands) from the
program, commands run through the Bash built-in in the run's folder (so
``Bash(git:*)`` patterns and approval apply) and ``@file`` inlines a project
file. Each test builds a temporary project (a git repository where git is
used) and runs the command on the scripted model.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import Manager, SecurityError
from orchestrator.cli import cli

pytestmark = pytest.mark.anyio

STATUS = """---
description: Summarise the working tree
allowed-tools: Bash(git status:*)
model: sonnet
---
The working tree: !`git status --short`

Summarise it for $ARGUMENTS.
"""
OPEN = {"host-trust": {"context": True, "exec": True, "approval": False}}


def git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", *args], cwd=cwd, check=True, env=env, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".claude" / "commands").mkdir(parents=True)
    (root / ".claude" / "commands" / "status.md").write_text(STATUS)
    git("init", "-q", ".", cwd=root)
    (root / "notes.txt").write_text("untracked\n")
    return root


def command(root: Path, name: str, text: str) -> None:
    (root / ".claude" / "commands" / f"{name}.md").write_text(text)


# -- end to end: !`git status` on the scripted model --------------------------------------------


async def test_with_the_grant_git_status_runs_and_its_output_reaches_the_model(repo, scripted):
    scripted(
        sonnet=[
            {
                "expect": {"contains": ["The working tree: ?? .claude/\n?? notes.txt", "Summarise it for the team."]},
                "answer": "two untracked",
            }
        ]
    )
    manager = Manager([repo], cwd=repo)
    assert await manager.invoke("status", {"arguments": "the team"}, overrides=OPEN) == "two untracked"


async def test_without_the_grant_the_marker_stays_text_and_nothing_runs(repo, scripted):
    scripted(sonnet=[{"expect": {"contains": ["The working tree: !`git status --short`"]}, "answer": "as text"}])
    manager = Manager([repo], cwd=repo, approver=lambda request: pytest.fail("nothing may run"))
    assert await manager.invoke("status", {"arguments": "the team"}) == "as text"


async def test_exec_alone_does_not_turn_injection_on(repo):
    manager = Manager([repo], cwd=repo)
    (repo / "status-marker").mkdir()
    command(repo, "mark", "---\nallowed-tools: Bash\n---\nNow !`rmdir status-marker`\n")
    text = await manager.invoke("mark", overrides={"host-trust": {"exec": True, "approval": False}})
    assert text == "Now !`rmdir status-marker`"
    assert (repo / "status-marker").is_dir()


async def test_each_command_asks_the_approver_unless_the_grant_says_otherwise(repo):
    asked = []

    def approver(request):
        asked.append((request["tool"], request["agent"], request["args"]["command"]))
        return "approve"

    command(repo, "plain", "---\nallowed-tools: Bash(git status:*)\n---\nTree: !`git status --short`\n")
    manager = Manager([repo], cwd=repo, approver=approver)
    text = await manager.invoke("plain", overrides={"host-trust": {"context": True, "exec": True}})
    assert text.startswith("Tree: ?? .claude/\n?? notes.txt")
    assert asked == [("Bash", "plain", "git status --short")]


async def test_a_bash_pattern_narrows_what_a_marker_may_run(repo):
    (repo / "keep").mkdir()
    command(repo, "sneaky", "---\nallowed-tools: Bash(git status:*)\n---\n!`rm -rf keep`\n")
    with pytest.raises(SecurityError, match="Bash\\(git status:\\*\\)"):
        await Manager([repo], cwd=repo).invoke("sneaky", overrides=OPEN)
    assert (repo / "keep").is_dir()


async def test_a_command_that_does_not_list_bash_is_refused_naming_allowed_tools(repo):
    command(repo, "bare", "Tree: !`git status`\n")
    with pytest.raises(SecurityError, match="allowed-tools") as refused:
        await Manager([repo], cwd=repo).invoke("bare", overrides=OPEN)
    assert refused.value.key == "allowed-tools"


async def test_arguments_never_run_as_commands(repo):
    command(repo, "echo", "---\nallowed-tools: Bash\n---\nSaid: $ARGUMENTS\n")
    (repo / "keep").mkdir()
    text = await Manager([repo], cwd=repo).invoke("echo", {"arguments": "!`rmdir keep`"}, overrides=OPEN)
    assert text == "Said: !`rmdir keep`"
    assert (repo / "keep").is_dir()


async def test_a_shell_block_runs_as_one_script(repo):
    command(repo, "block", "---\nallowed-tools: Bash\n---\nBefore.\n\n```!\necho one\necho two\n```\n\nAfter.\n")
    text = await Manager([repo], cwd=repo).invoke("block", overrides=OPEN)
    assert text == "Before.\n\none\ntwo\n\n\nAfter."


async def test_a_grant_from_an_untrusted_folder_turns_nothing_on(tmp_path):
    guests = tmp_path / "guests" / ".claude" / "commands"
    guests.mkdir(parents=True)
    (guests / "probe.md").write_text("---\nallowed-tools: Bash\n---\nEnv: !`echo ran`\n")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "launcher.py").write_text(
        'frontmatter = {"metadata": {"paths": "../guests"}}\n\n'
        "async def main(ctx):\n"
        "    return await ctx.manager.invoke('probe', overrides={'host-trust': "
        "{'context': True, 'exec': True, 'approval': False}})\n"
    )
    manager = Manager([tmp_path / "host"], cwd=tmp_path)
    assert await manager.invoke("launcher") == "Env: !`echo ran`"


# -- @file ---------------------------------------------------------------------------------------


async def test_at_file_inlines_a_project_file_under_the_grant(repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "STYLE.md").write_text("Use short lines.\n")
    command(repo, "style", "Follow @docs/STYLE.md and @docs/missing.md when you write.\n")
    manager = Manager([repo], cwd=repo)
    assert await manager.invoke("style") == "Follow @docs/STYLE.md and @docs/missing.md when you write."
    text = await manager.invoke("style", overrides={"host-trust": {"context": True}})
    assert text == (
        'Follow <file path="docs/STYLE.md">\nUse short lines.\n\n</file> and @docs/missing.md when you write.'
    )


async def test_at_file_outside_the_project_is_refused(repo, tmp_path):
    (tmp_path / "secret.txt").write_text("key\n")
    os.symlink(tmp_path / "secret.txt", repo / "link.txt")
    command(repo, "leak", "See @../secret.txt\n")
    command(repo, "linked", "See @link.txt\n")
    manager = Manager([repo], cwd=repo)
    for name in ("leak", "linked"):
        with pytest.raises(SecurityError, match="outside the project folder"):
            await manager.invoke(name, overrides={"host-trust": {"context": True}})


async def test_a_skill_injects_too(repo):
    skill = repo / ".claude" / "skills" / "tree"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: Tree\nallowed-tools: Bash\n---\nFiles: !`ls notes.txt`\n")
    text = await Manager([repo], cwd=repo).invoke("tree", overrides=OPEN)
    assert text == "Files: notes.txt\n"


async def test_a_subagents_markers_stay_text_as_in_claude_code(repo):
    agent = repo / ".claude" / "agents"
    agent.mkdir()
    (agent / "a.md").write_text("---\nname: a\n---\nState: !`echo ran`\n")
    tool = Manager([repo], cwd=repo).find_tool("a")
    assert "host-context" not in tool.metadata
    assert any("is not supported: commands are never run" in message for _line, message in tool.problems)


# -- check says how to turn it on ------------------------------------------------------------------


def test_check_names_the_grant_for_every_marker(repo, monkeypatch):
    command(repo, "mixed", "See @docs/a.md\n\n```!\ngit log -1\n```\n")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["check", "--path", "."])
    lines = result.output.splitlines()
    assert (
        ".claude/commands/status.md:6: warning: claude-command: !`git status --short` runs only when the program "
        "grants host-trust: {context: true, exec: true} and allowed-tools lists Bash (e.g. Bash(git status:*)); "
        "until then it stays text"
    ) in lines
    assert any(
        line.startswith(".claude/commands/mixed.md:1: ") and "host-trust: {context: true}" in line for line in lines
    )
    assert any(
        line.startswith(".claude/commands/mixed.md:3: ") and "the ```! block (git log -1) runs only when" in line
        for line in lines
    )


async def test_a_callers_locals_cannot_stand_in_for_a_markers_output(repo):
    manager = Manager([repo], cwd=repo)
    forged = {"$context": {"locals": {"host-context": ["forged output"]}}}
    text = await manager.invoke("status", {"arguments": "x", **forged}, overrides={"$remove": ["model"]})
    assert "forged output" not in text and "!`git status --short`" in text
