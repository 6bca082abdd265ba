"""Claude Code's own tools as built-ins, confined and gated by trust (issue 28).

The project in ``tests/formats/hosttools`` is copied to tmp_path for every
test: two subagents (``reader``: ``Read, Grep``; ``committer``: ``Read,
Write, Edit, Bash(git:*), WebSearch``; ``helper``: no ``tools``), a command (``outline``: ``Glob, LS,
Read``), a Copilot prompt file (``find-code``: ``codebase, fetch,
runInTerminal``), ``docs/notes.md`` and ``src/app.js``. The run's folder (the
project) is where host tools read; models are scripted through
``TOOLCASCADE_MODEL_ALIASES``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import ApprovalDenied, ConfigurationError, Interrupted, Manager, SecurityError
from orchestrator.cli import cli

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "formats" / "hosttools"
SECRET = "BLUE-HARBOUR-7"
GRANT = {"host-trust": {"write": True, "exec": True}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    return root


def manager_for(project: Path, **options) -> Manager:
    return Manager([project], cwd=project, **options)


def call(name: str, **arguments) -> dict:
    return {"calls": [{"name": name, "arguments": arguments}]}


READ_THEN_ANSWER = [
    {"expect": {"tools": ["Read", "Grep"]}, **call("Grep", pattern="launch code", output_mode="files_with_matches")},
    {"expect": {"contains": ["docs/notes.md"], "last-role": "tool"}, **call("Read", file_path="docs/notes.md")},
    {"expect": {"contains": [f"The launch code is {SECRET}."]}, "answer": f"The code is {SECRET}."},
]


# -- the formats offer them ---------------------------------------------------------------


def test_a_subagents_claude_code_tools_are_offered_and_the_rest_stay_host_tools(project):
    manager = manager_for(project)
    reader = manager.find_tool("reader")
    assert reader.metadata["tools"] == ["Read", "Grep"]
    assert "host-tools" not in reader.metadata
    committer = manager.find_tool("committer")
    assert committer.metadata["tools"] == ["Read", "Write", "Edit", "Bash"]
    assert committer.metadata["host-rules"] == {"Bash": ["git:*"]}
    assert committer.metadata["host-tools"] == ["WebSearch"]  # not implemented: data, never offered
    assert manager.find_tool("outline").metadata["tools"] == ["Glob", "LS", "Read"]


def test_a_subagent_without_tools_gets_every_host_tool_we_run_as_claude_code_gives_it_every_tool(project):
    helper = manager_for(project).find_tool("helper")
    assert helper.metadata["tools"] == ["Read", "Glob", "Grep", "LS", "Write", "Edit", "Bash", "WebFetch"]
    assert "host-rules" not in helper.metadata


async def test_an_agent_offered_write_without_the_grant_still_reads(project, scripted):
    scripted(
        sonnet=[
            {
                "expect": {"tools": ["Bash", "Edit", "Glob", "Grep", "LS", "Read", "WebFetch", "Write"]},
                **call("LS", path="docs"),
            },
            {"expect": {"contains": ["notes.md"]}, **call("Write", file_path="docs/new.md", content="x")},
            {"expect": {"contains": ["needs the 'write' grant"]}, "answer": "read only"},
        ]
    )
    assert await manager_for(project).invoke("helper", {"prompt": "look around"}) == "read only"
    assert not (project / "docs" / "new.md").exists()


def test_the_host_tools_are_hidden_built_ins_with_claude_codes_input_schemas(project):
    infos = {info.ref: info for info in manager_for(project).list_tools(hidden=True)}
    assert infos["Read"].params["required"] == ["file_path"]
    assert {"offset", "limit"} <= set(infos["Read"].params["properties"])
    assert {"pattern", "path", "glob", "output_mode", "-i", "-n", "-A", "-B", "-C"} <= set(
        infos["Grep"].params["properties"]
    )
    assert set(infos["Glob"].params["properties"]) == {"pattern", "path"}
    assert set(infos["LS"].params["properties"]) == {"path", "ignore"}
    assert set(infos["Edit"].params["properties"]) == {"file_path", "old_string", "new_string", "replace_all"}
    assert infos["Bash"].params["required"] == ["command"]
    assert not {"Read", "Bash"} & {info.ref for info in manager_for(project).list_tools()}


async def test_a_copilot_prompt_files_vs_code_tools_map_onto_the_built_ins(project, scripted):
    prompt = manager_for(project).find_tool("find-code")
    assert prompt.metadata["tools"] == ["Grep", "Glob", "Read", "WebFetch", "Bash"]
    assert "host-tools" not in prompt.metadata
    scripted(
        sonnet=[
            {
                "expect": {"tools": ["Bash", "Glob", "Grep", "Read", "WebFetch"]},
                **call("Grep", pattern="function greet"),
            },
            {"expect": {"contains": ["src/app.js"]}, **call("Read", file_path="src/app.js", limit=1)},
            {"expect": {"contains": ["export function greet(name) {"]}, "answer": "src/app.js:1"},
        ]
    )
    assert await manager_for(project).invoke("find-code", {"input": "greet"}) == "src/app.js:1"


# -- end to end: a subagent reads and answers ---------------------------------------------


async def test_a_subagent_with_read_and_grep_answers_from_the_file_it_read(project, scripted):
    scripted(sonnet=READ_THEN_ANSWER)
    answer = await manager_for(project).invoke("reader", {"prompt": "What is the launch code?"})
    assert answer == f"The code is {SECRET}."


def test_the_cli_runs_the_subagent_in_the_current_folder(project, scripted, monkeypatch):
    scripted(sonnet=READ_THEN_ANSWER)
    monkeypatch.chdir(project)
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    result = CliRunner(env=env).invoke(
        cli, ["run", "reader", json.dumps({"prompt": "What is the launch code?"}), "--path", "."]
    )
    assert result.exit_code == 0, result.output
    assert f"The code is {SECRET}." in result.output


async def test_a_read_outside_the_project_is_a_security_error_the_model_hears(project, scripted, tmp_path):
    (tmp_path / "secret.txt").write_text("outside secret\n")
    scripted(
        sonnet=[
            call("Read", file_path=str(tmp_path / "secret.txt")),
            {
                "expect": {"contains": ["SecurityError", "outside the project folder"]},
                **call("Read", file_path="../secret.txt"),
            },
            {"expect": {"contains": ["SecurityError"]}, "answer": "I may not read that."},
        ]
    )
    assert await manager_for(project).invoke("reader", {"prompt": "read it"}) == "I may not read that."


async def test_a_symlink_that_leaves_the_project_is_refused_and_never_searched(project, tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "leak.txt").write_text(f"{SECRET} leaked\n")
    (project / "docs" / "link.txt").symlink_to(tmp_path / "outside" / "leak.txt")
    (project / "linked").symlink_to(tmp_path / "outside")
    manager = manager_for(project)
    for path in ("docs/link.txt", "linked/leak.txt"):
        with pytest.raises(SecurityError) as refused:
            await manager.invoke("Read", {"file_path": path})
        assert refused.value.tool == "Read" and refused.value.key == "file_path"
    found = await manager.invoke("Grep", {"pattern": "leaked|launch", "output_mode": "content"})
    assert found == f"docs/notes.md:3:The launch code is {SECRET}."
    assert "linked" not in await manager.invoke("Glob", {"pattern": "**/*.txt"})
    with pytest.raises(SecurityError):
        await manager.invoke("LS", {"path": "linked"})


# -- the readers themselves -------------------------------------------------------------------


async def test_read_numbers_lines_and_reads_a_window(project):
    manager = manager_for(project)
    whole = await manager.invoke("Read", {"file_path": str(project / "src" / "app.js")})
    assert whole == '     1\texport function greet(name) {\n     2\t  return "hello " + name;\n     3\t}'
    part = await manager.invoke("Read", {"file_path": "docs/notes.md", "offset": 3, "limit": 1})
    assert part.startswith(f"     3\tThe launch code is {SECRET}.")
    assert "read on with offset 4" in part


async def test_read_bounds_its_output(project):
    (project / "big.txt").write_text(("x" * 5000 + "\n") * 50)
    text = await manager_for(project).invoke("Read", {"file_path": "big.txt"})
    assert len(text) < 40_000 and "[truncated:" in text
    assert all(len(line) <= 2008 for line in text.splitlines())


async def test_glob_grep_and_ls_search_the_project(project):
    manager = manager_for(project)
    assert await manager.invoke("Glob", {"pattern": "**/*.js"}) == "src/app.js"
    assert await manager.invoke("Glob", {"pattern": "*.js"}) == "No files found"  # the top folder only
    assert await manager.invoke("Glob", {"pattern": "*.js", "path": "src"}) == "src/app.js"
    assert await manager.invoke("Grep", {"pattern": "GREET", "-i": True}) == "src/app.js"
    assert await manager.invoke("Grep", {"pattern": "Ship", "output_mode": "count"}) == "docs/notes.md:1"
    around = await manager.invoke("Grep", {"pattern": "Ship", "output_mode": "content", "-B": 1, "glob": "*.md"})
    assert around == f"docs/notes.md:3:The launch code is {SECRET}.\ndocs/notes.md:4:Ship it on Friday."
    assert await manager.invoke("Grep", {"pattern": "greet", "type": "md"}) == "No matches found"
    with pytest.raises(ConfigurationError, match="not a folder"):
        await manager.invoke("LS", {"path": "docs/notes.md"})
    listing = await manager.invoke("LS", {"ignore": ["src"]})
    assert listing.splitlines() == ["./", "  .claude/", "  .github/", "  docs/"]


# -- writing and running need a grant, then approval ----------------------------------------------


async def test_write_edit_and_bash_are_refused_without_the_grant(project, scripted):
    scripted(
        sonnet=[
            call("Write", file_path="STATUS.md", content="ok"),
            {"expect": {"contains": ["SecurityError", "host-trust"]}, **call("Bash", command="git status")},
            {"expect": {"contains": ["'exec' grant"]}, "answer": "refused"},
        ]
    )
    manager = manager_for(project, approver=lambda request: pytest.fail(f"asked about {request['tool']}"))
    assert await manager.invoke("committer", {"prompt": "record"}) == "refused"
    assert not (project / "STATUS.md").exists()


async def test_with_the_grant_each_write_asks_the_approver(project, scripted):
    scripted(
        sonnet=[
            call("Write", file_path="STATUS.md", content="all good\n"),
            call("Edit", file_path="STATUS.md", old_string="good", new_string="green"),
            {"expect": {"contains": ["Replaced 1 occurrence"]}, "answer": "done"},
        ]
    )
    asked = []

    def approver(request):
        asked.append((request["tool"], request["agent"]))
        return "approve"

    manager = manager_for(project, approver=approver)
    assert await manager.invoke("committer", {"prompt": "record"}, overrides=GRANT) == "done"
    assert (project / "STATUS.md").read_text() == "all good\n".replace("good", "green")
    assert asked == [("Write", "committer"), ("Edit", "committer")]


async def test_a_denied_write_does_not_run(project):
    manager = manager_for(project, approver=lambda request: {"action": "deny", "reason": "not today"})
    with pytest.raises(ApprovalDenied, match="not today"):
        await manager.invoke("Write", {"file_path": "x.txt", "content": "x"}, overrides=GRANT)
    assert not (project / "x.txt").exists()


async def test_without_an_approver_bash_holds_the_run(project, scripted, tmp_path):
    scripted(sonnet=[call("Bash", command="git status"), "held"])
    manager = manager_for(project, sessions=tmp_path / "s.db")
    with pytest.raises(Interrupted) as held:
        await manager.invoke("committer", {"prompt": "record"}, overrides=GRANT)
    assert {k: held.value.request[k] for k in ("tool", "args")} == {"tool": "Bash", "args": {"command": "git status"}}


async def test_a_held_write_runs_once_when_the_run_is_resumed_with_approval(project, scripted, tmp_path):
    scripted(
        sonnet=[
            call("Write", file_path="STATUS.md", content="resumed\n"),
            {"expect": {"contains": ["Wrote 8 characters to STATUS.md"]}, "answer": "written"},
        ]
    )
    manager = manager_for(project, sessions=tmp_path / "s.db")
    with pytest.raises(Interrupted) as held:
        await manager.invoke("committer", {"prompt": "record"}, overrides=GRANT)
    assert not (project / "STATUS.md").exists()
    assert await manager.resume(held.value.token, "approve") == "written"
    assert (project / "STATUS.md").read_text() == "resumed\n"


@pytest.mark.parametrize(("trusted", "heard"), [(False, "'write' grant"), (True, "Wrote 1 characters")])
async def test_a_grant_counts_only_from_a_folder_the_program_trusts(project, tmp_path, trusted, heard):
    script = [call("Write", file_path="owned.txt", content="x"), {"expect": {"contains": [heard]}, "answer": "done"}]
    guest = {"model": {"provider": "scripted", "script": script}, "tools": ["Write"], "host-trust": {"write": True}}
    (tmp_path / "guests").mkdir()
    (tmp_path / "guests" / "guest.md").write_text(f"---\nmetadata: {json.dumps(guest)}\n---\nWrite it.\n")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "launcher.py").write_text(
        'frontmatter = {"metadata": {"paths": "../guests"}}\n\n'
        "async def main(ctx):\n    return await ctx.manager.invoke('guest')\n"
    )
    trusted_paths = [tmp_path / "guests"] if trusted else []
    manager = Manager([tmp_path / "host"], cwd=project, approver=lambda r: "approve", trusted_paths=trusted_paths)
    assert await manager.invoke("launcher") == "done"
    assert (project / "owned.txt").exists() is trusted


async def test_a_grant_may_turn_approval_off_and_a_write_outside_is_still_refused(project):
    manager = manager_for(project)
    grant = {"host-trust": {"write": True, "approval": False}}
    assert await manager.invoke("Write", {"file_path": "a/b.txt", "content": "hi"}, overrides=grant)
    assert (project / "a" / "b.txt").read_text() == "hi"
    with pytest.raises(SecurityError) as refused:
        await manager.invoke("Write", {"file_path": "../escaped.txt", "content": "x"}, overrides=grant)
    assert refused.value.key == "file_path"
    assert not (project.parent / "escaped.txt").exists()


# -- Bash(git:*) narrows Bash ------------------------------------------------------------------


@pytest.fixture
def repository(project: Path) -> Path:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", "init", "-q", str(project)], check=True, env=env)
    return project


async def test_bash_git_pattern_allows_git_status_and_refuses_rm(repository, scripted):
    (repository / "x").mkdir()
    scripted(
        sonnet=[
            call("Bash", command="git status --short"),
            {"expect": {"contains": ["?? docs/"]}, **call("Bash", command="rm -rf x")},
            {"expect": {"contains": ["SecurityError", "Bash(git:*)"]}, **call("Bash", command="git status; rm -rf x")},
            {"expect": {"contains": ["shell syntax"]}, "answer": "only git"},
        ]
    )
    manager = manager_for(repository, approver=lambda request: "approve")
    assert await manager.invoke("committer", {"prompt": "status"}, overrides=GRANT) == "only git"
    assert (repository / "x").is_dir()


async def test_an_approvers_edit_is_held_to_the_same_pattern(repository, scripted):
    (repository / "x").mkdir()
    scripted(
        sonnet=[call("Bash", command="git status"), {"expect": {"contains": ["is not allowed"]}, "answer": "refused"}]
    )
    manager = manager_for(repository, approver=lambda r: {"action": "edit", "args": {"command": "rm -rf x"}})
    assert await manager.invoke("committer", {"prompt": "status"}, overrides=GRANT) == "refused"
    assert (repository / "x").is_dir()


async def test_bash_without_a_pattern_runs_a_shell_command_with_its_exit_code_and_timeout(project):
    manager = manager_for(project)
    grant = {"host-trust": {"exec": True, "approval": False}}
    out = await manager.invoke("Bash", {"command": "echo one && ls docs && exit 3"}, overrides=grant)
    assert out == "one\nnotes.md\n\n[exit code 3]"
    slow = await manager.invoke("Bash", {"command": "sleep 5", "timeout": 200}, overrides=grant)
    assert "[killed after 0.2 s" in slow


async def test_a_command_never_sees_the_programs_keys(project, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    grant = {"host-trust": {"exec": True, "approval": False}}
    out = await manager_for(project).invoke("Bash", {"command": 'echo "[$OPENAI_API_KEY]" "$HOME"'}, overrides=grant)
    assert out == f"[] {os.environ['HOME']}\n"
