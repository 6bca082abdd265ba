"""Instruction files (AGENTS.md, CLAUDE.md, Copilot, Cursor, our own) applied to agents and explained (issue 30).

The project in ``tests/formats/instructions`` is copied to tmp_path for every
test, with a ``.git`` folder making it the project root. Agents run on the
offline scripted model; a ``model-pipeline`` middleware records each request.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator import ConfigurationError, Manager
from orchestrator.errors import Interrupted
from orchestrator.events import Event
from orchestrator.instructions import explain_instructions, instruction_problems, project_root

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "formats" / "instructions"
ALL = {"instructions": True}

RECORDER = """
async def main(ctx):
    ctx.nonlocals.setdefault("requests", []).append(list(ctx.target.args["messages"]))
    return await ctx.target.manager.next()
"""
TOOL = """
frontmatter = {"description": "{name}", "metadata": {"params": {
    "type": "object", "properties": {"path": {"type": "string"}, "command": {"type": "string"}}}}}
def main(ctx):
    return "{name} done"
"""

# holds a call until a resumed run carries a decision (as the approval middleware does)
HOLD = """
from orchestrator.approval import take_decision
from orchestrator.errors import ApprovalRequired
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    if take_decision() is None:
        raise ApprovalRequired("needs approval", request={"tool": ctx.target.tool.name}, tool=ctx.target.tool.name)
    return await ctx.target.manager.next()
"""
# records each request in requests.jsonl beside it, for a run resumed by another manager
LOGGER = """
import json
from pathlib import Path
async def main(ctx):
    with open(Path(__file__).with_name("requests.jsonl"), "a") as out:
        out.write(json.dumps(ctx.target.args["messages"]) + "\\n")
    return await ctx.target.manager.next()
"""
# rewrites the conversation once it holds a tool result: the call and its result become one assistant message
FORGET = """
async def main(ctx):
    conversation = ctx.target.locals["conversation"]
    if any(m["role"] == "tool" for m in conversation.messages):
        conversation.rewrite([conversation.messages[0], {"role": "assistant", "content": "I ran the shell."}])
        ctx.target.args = {**ctx.target.args, "messages": conversation.request()}
    ctx.nonlocals.setdefault("requests", []).append(list(ctx.target.args["messages"]))
    return await ctx.target.manager.next()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    shutil.copytree(FIXTURE, target)
    (target / ".git").mkdir()
    tools = target / "tools"
    tools.mkdir()
    (tools / "recorder.py").write_text(RECORDER)
    for name in ("shell", "read"):
        (tools / f"{name}.py").write_text(TOOL.replace("{name}", name))
    return target


def agent(project: Path, name: str, script: list, body: str = "Look at {{ args.file }}.", **meta: Any) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, "model-pipeline": {"recorder": {}}, **meta}
    front = yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}, sort_keys=False)
    (project / "tools" / f"{name}.md").write_text(f"---\n{front}---\n{body}\n")


def verdicts(project: Path, args: Any, meta: Any = ALL, cwd: Path | None = None) -> dict[str, Any]:
    return {v.file: v for v in explain_instructions(meta, args, cwd or project, tool="helper")}


def systems(request: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in request if m["role"] == "system"]


# -- each host's format, and why each file applies or not ---------------------------------------


def test_each_hosts_files_are_read_and_each_verdict_says_why(project):
    found = verdicts(project, {"file": "src/app.py"})
    applied = {file for file, v in found.items() if v.applied}
    assert applied == {
        "AGENTS.md",
        "CLAUDE.md",
        ".github/copilot-instructions.md",
        ".github/instructions/python.instructions.md",
        ".cursor/rules/always.mdc",
    }
    assert {found[f].host for f in applied} == {"agents", "claude", "copilot", "cursor"}
    assert found[".github/instructions/python.instructions.md"].reason == "applyTo '**/*.py' matched src/app.py"
    assert str(found[".github/instructions/python.instructions.md"]) == (
        ".github/instructions/python.instructions.md (copilot): applied: applyTo '**/*.py' matched src/app.py"
    )
    assert found[".cursor/rules/always.mdc"].reason == "alwaysApply: true"
    assert "matched none of the files the call names (src/app.py)" in found[".cursor/rules/tests.mdc"].reason
    frontend = found[".github/instructions/frontend.instructions.md"]
    assert not frontend.applied and "'src/ui/**/*.{ts,tsx}'" in frontend.reason
    assert "no applyTo" in found[".github/instructions/by-hand.instructions.md"].reason
    assert "*.instructions.md" in found[".github/instructions/misnamed.md"].reason
    assert "description" in found[".cursor/rules/requested.mdc"].reason
    assert "only when mentioned" in found[".cursor/rules/forgotten.mdc"].reason
    assert "did you mean 'alwaysApply'" in found[".cursor/rules/typo.mdc"].reason
    shell = found[".toolcascade/instructions/shell.md"]
    assert (shell.host, shell.applied, shell.when) == ("toolcascade", False, "after-call")
    assert "added after the agent calls shell" in shell.reason


def test_globstar_braces_and_cursors_unquoted_globs_match_the_files_named(project):
    found = verdicts(project, {"paths": ["src/ui/view.tsx", "tests/helpers.py"], "note": "not a path at all"})
    assert found[".github/instructions/frontend.instructions.md"].reason == (
        "applyTo 'src/ui/**/*.{ts,tsx}' matched src/ui/view.tsx"
    )
    assert found[".cursor/rules/tests.mdc"].reason == "globs 'tests/**/*.py' matched tests/helpers.py"
    # Cursor writes `globs: *.tsx,*.ts` unquoted (not YAML); a glob without / matches a name in any folder
    assert found[".cursor/rules/typescript.mdc"].reason == "globs '*.tsx' matched src/ui/view.tsx"
    assert found[".github/instructions/python.instructions.md"].reason == "applyTo '**/*.py' matched tests/helpers.py"


def test_claude_reads_its_folder_file_and_the_local_one_too(project):
    (project / "src" / ".claude").mkdir()
    (project / "src" / ".claude" / "CLAUDE.md").write_text("Claude in src.\n")
    (project / "src" / "CLAUDE.local.md").write_text("My own notes.\n")
    found = [v.file for v in explain_instructions(ALL, {}, project / "src") if v.host in ("agents", "claude")]
    assert found == ["AGENTS.md", "CLAUDE.md", "src/AGENTS.md", "src/.claude/CLAUDE.md", "src/CLAUDE.local.md"]


def test_paths_outside_the_project_name_no_file(project, tmp_path):
    (tmp_path / "outside.py").write_text("x = 1\n")
    found = verdicts(project, {"file": "../outside.py", "other": str(tmp_path / "outside.py")})
    python = found[".github/instructions/python.instructions.md"]
    assert not python.applied
    assert "the call names no file inside the project" in python.reason


def test_hosts_are_chosen_by_metadata_and_off_by_default(project):
    off = verdicts(project, {"file": "src/app.py"}, meta={})
    assert not any(v.applied for v in off.values())
    assert off["AGENTS.md"].reason.startswith("not read: instructions is off for this agent")
    cursor = verdicts(project, {"file": "src/app.py"}, meta={"instructions": {"hosts": ["cursor"]}})
    assert {f for f, v in cursor.items() if v.applied} == {".cursor/rules/always.mdc"}
    assert cursor["AGENTS.md"].reason == "not read: instructions.hosts leaves out agents"
    with pytest.raises(ConfigurationError, match="did you mean 'cursor'") as caught:
        verdicts(project, {}, meta={"instructions": {"hosts": ["curser"]}})
    assert (caught.value.tool, caught.value.key) == ("helper", "instructions.hosts")
    with pytest.raises(ConfigurationError, match="instructions must be true, false or"):
        verdicts(project, {}, meta={"instructions": "yes"})


def test_the_project_root_is_the_nearest_git_folder_else_a_search_path_else_cwd(project, tmp_path):
    assert project_root(project / "src" / "ui") == project
    (project / ".git").rmdir()
    assert project_root(project / "src", [project]) == project
    assert project_root(project / "src", [tmp_path / "elsewhere"]) == project / "src"


# -- applied to an agent's requests -------------------------------------------------------------


async def test_an_agent_gets_the_files_that_apply_after_its_own_system_message(project):
    agent(
        project,
        "helper",
        [{"answer": "done", "expect": {"contains": ["make test", "every public function", "type hints everywhere"]}}],
        system="You are the helper.",
        **ALL,
    )
    manager = Manager([project / "tools"], cwd=project / "src")
    box: dict[str, Any] = {}
    assert await manager.invoke("helper", {"file": "app.py"}, context={"nonlocals": box}) == "done"
    sent = systems(box["requests"][0])
    assert sent[0] == "You are the helper."
    heads = [text.split(":\n", 1)[0] for text in sent[1:]]
    # the root's AGENTS.md before the nearer one in src/; only what applies
    assert heads == [
        "Instructions from AGENTS.md",
        "Instructions from CLAUDE.md",
        "Instructions from src/AGENTS.md",
        "Instructions from .github/copilot-instructions.md",
        "Instructions from .github/instructions/python.instructions.md",
        "Instructions from .cursor/rules/always.mdc",
    ]
    assert not any("Frontend:" in text or "Shell:" in text for text in sent)


async def test_without_instructions_metadata_nothing_is_added(project):
    agent(project, "plain", ["done"])
    box: dict[str, Any] = {}
    assert await Manager([project / "tools"], cwd=project).invoke("plain", {"file": "x"}, context={"nonlocals": box})
    assert systems(box["requests"][0]) == []


async def test_a_folder_authority_chooses_the_hosts(project):
    (project / "tools" / "AUTHORITY.md").write_text("---\nmetadata:\n  instructions: {hosts: [cursor]}\n---\n")
    agent(project, "ruled", [{"answer": "done", "expect": {"contains": "British English"}}])
    box: dict[str, Any] = {}
    await Manager([project / "tools"], cwd=project).invoke("ruled", {"file": "x"}, context={"nonlocals": box})
    assert [text.split(":\n", 1)[0] for text in systems(box["requests"][0])] == [
        "Instructions from .cursor/rules/always.mdc"
    ]


async def test_a_tool_triggered_instruction_is_added_only_after_the_agent_calls_that_tool(project):
    script = [
        {"calls": [{"name": "read", "arguments": {"path": "README"}}], "expect": {"contains": "make test"}},
        {"calls": [{"name": "shell", "arguments": {"command": "ls"}}], "expect": {"last-role": "tool"}},
        {"calls": [{"name": "shell", "arguments": {"command": "pwd"}}], "expect": {"contains": "quote every path"}},
        {"answer": "done", "expect": {"contains": "quote every path"}},
    ]
    agent(project, "operator", script, tools=["read", "shell"], **ALL)
    events: list[Event] = []
    manager = Manager([project / "tools"], cwd=project, on_event=events.append)
    box: dict[str, Any] = {}
    assert await manager.invoke("operator", {"file": "src"}, context={"nonlocals": box}) == "done"
    first, second, third, fourth = box["requests"]
    assert not any("Shell:" in str(m["content"]) for m in first + second)
    added = [i for i, m in enumerate(third) if "Shell: quote every path" in str(m["content"])]
    assert len(added) == 1 and third[added[0]]["role"] == "system"
    assert third[added[0] - 1] == {"role": "tool", "tool_call_id": "call_2_1", "name": "shell", "content": "shell done"}
    assert [str(m["content"]).count("Shell:") for m in fourth].count(1) == 1  # added once, not once per call
    announced = [e.data["files"] for e in events if e.kind == "agent.instructions"]
    assert announced[-1] == [
        {
            "file": ".toolcascade/instructions/shell.md",
            "host": "toolcascade",
            "applied": True,
            "reason": "the agent called shell",
            "when": "after-call",
        }
    ]
    assert {f["file"] for f in announced[0] if f["applied"]} >= {"AGENTS.md", ".cursor/rules/always.mdc"}


async def test_a_glob_instruction_follows_a_tool_call_that_names_a_matching_file(project):
    script = [
        {"calls": [{"name": "read", "arguments": {"path": "src/ui/view.tsx"}}]},
        {"answer": "done", "expect": {"contains": "function components with typed props"}},
    ]
    agent(project, "reader", script, tools=["read"], instructions={"hosts": ["copilot"]})
    box: dict[str, Any] = {}
    manager = Manager([project / "tools"], cwd=project)
    assert await manager.invoke("reader", {"file": "notes"}, context={"nonlocals": box}) == "done"
    assert not any("Frontend:" in str(m["content"]) for m in box["requests"][0])
    last = box["requests"][1]
    assert last[-2]["role"] == "tool" and last[-1]["content"].startswith(
        "Instructions from .github/instructions/frontend.instructions.md"
    )


async def test_instructions_are_not_stored_in_the_session(project, tmp_path):
    agent(project, "keeper", ["first", "second"], **ALL)
    manager = Manager([project / "tools"], cwd=project, sessions=tmp_path / "sessions.db")
    await manager.invoke("keeper", {"file": "src/app.py"}, context={"session": "s1"})
    box: dict[str, Any] = {}
    await manager.invoke("keeper", {"file": "src/app.py"}, context={"session": "s1", "nonlocals": box})
    stored = await manager.sessions.messages("s1")
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert sum("Instructions from AGENTS.md" in text for text in systems(box["requests"][0])) == 1
    manager.close()


# -- check ------------------------------------------------------------------------------------


def test_check_reports_each_file_its_host_would_ignore_at_its_line(project):
    rules = project / ".cursor" / "rules"
    (rules / "broken.mdc").write_text("---\ndescription: Broken\nthis line is not yaml\n---\nBody.\n")
    (rules / "stringly.mdc").write_text('---\nglobs: "*.py"\nalwaysApply: "yes"\n---\nBody.\n')
    (project / ".github" / "instructions" / "numbers.instructions.md").write_text("---\napplyTo: 42\n---\nBody.\n")
    problems = {
        (Path(p.path).relative_to(project).as_posix(), p.line, p.severity): p.message
        for p in instruction_problems(project)
    }
    assert problems.keys() == {
        (".cursor/rules/broken.mdc", 3, "error"),
        (".cursor/rules/forgotten.mdc", 1, "warning"),
        (".cursor/rules/stringly.mdc", 3, "error"),
        (".cursor/rules/typo.mdc", 3, "error"),
        (".github/instructions/by-hand.instructions.md", 1, "warning"),
        (".github/instructions/misnamed.md", 1, "warning"),
        (".github/instructions/numbers.instructions.md", 2, "error"),
    }
    assert problems[(".cursor/rules/broken.mdc", 3, "error")].startswith("unparseable frontmatter")
    assert "alwaysApply must be true or false" in problems[(".cursor/rules/stringly.mdc", 3, "error")]
    assert (
        "Cursor ignores the key 'always_apply': did you mean 'alwaysApply'?"
        == (problems[(".cursor/rules/typo.mdc", 3, "error")])
    )
    assert "applyTo must be a glob" in problems[(".github/instructions/numbers.instructions.md", 2, "error")]
    assert verdicts(project, {})[".cursor/rules/broken.mdc"].reason.startswith("not applied: unparseable frontmatter")


def test_a_key_its_host_skips_is_reported_and_the_file_read_without_it(project):
    (project / ".github" / "instructions" / "owned.instructions.md").write_text(
        "---\nowner: platform-team\napplyTo: '**/*.py'\n---\nOwned: ask the platform team.\n"
    )
    found = verdicts(project, {"file": "src/app.py"})
    assert found[".github/instructions/owned.instructions.md"].applied
    problems = [(p.line, p.severity, p.message) for p in instruction_problems(project) if "owned" in str(p.path)]
    assert problems == [
        (2, "warning", "Copilot ignores the key 'owner': it reads applyTo, description, name, excludeAgent")
    ]


def test_a_link_out_of_the_project_is_never_read(project, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the deploy key")
    (project / "AGENTS.md").unlink()
    (project / "AGENTS.md").symlink_to(secret)
    (project / "CLAUDE.md").unlink()
    (project / "CLAUDE.md").symlink_to(project / "src" / "AGENTS.md")  # inside the project: read
    found = verdicts(project, {})
    assert not found["AGENTS.md"].applied and "outside the project" in found["AGENTS.md"].reason
    assert found["CLAUDE.md"].applied
    assert [p.message for p in instruction_problems(project) if p.path == str(project / "AGENTS.md")] == [
        "it links to a file outside the project: never read"
    ]


async def test_a_resumed_run_keeps_its_instructions_once_and_weaves_the_tool_triggered_one(project, tmp_path):
    (project / "tools" / "hold.py").write_text(HOLD)
    (project / "tools" / "guarded.py").write_text(
        TOOL.replace("{name}", "guarded").replace('"metadata": {', '"metadata": {"hold": {}, ', 1)
    )
    (project / ".toolcascade" / "instructions" / "guarded.md").write_text(
        "---\napplies-to-tools: [guarded]\n---\nGuarded: say what you changed.\n"
    )
    script = [{"calls": [{"name": "guarded", "arguments": {"command": "deploy"}}]}, "deployed"]
    (project / "tools" / "logger.py").write_text(LOGGER)
    agent(project, "deployer", script, tools=["guarded"], **{"model-pipeline": {"logger": {}}}, **ALL)
    db = tmp_path / "sessions.db"
    with pytest.raises(Interrupted) as caught:
        await Manager([project / "tools"], cwd=project, sessions=db).invoke("deployer", {"file": "src/app.py"})
    manager = Manager([project / "tools"], cwd=project, sessions=db)
    assert await manager.resume(caught.value.token, "approve") == "deployed"
    requests = [json.loads(line) for line in (project / "tools" / "requests.jsonl").read_text().splitlines()]
    last = requests[-1]
    assert len(requests) == 2
    assert sum(text.startswith("Instructions from AGENTS.md") for text in systems(last)) == 1
    assert last[-1]["content"].startswith("Instructions from .toolcascade/instructions/guarded.md")
    assert last[-2] == {"role": "tool", "tool_call_id": "call_1_1", "name": "guarded", "content": "guarded done"}


async def test_a_conversation_rewritten_without_the_call_keeps_what_it_brought_in(project):
    (project / "tools" / "forget.py").write_text(FORGET)
    script = [
        {"calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
        {"answer": "done", "expect": {"contains": "quote every path"}},
    ]
    agent(project, "forgetful", script, tools=["shell"], **{"model-pipeline": {"forget": {}}}, **ALL)
    box: dict[str, Any] = {}
    manager = Manager([project / "tools"], cwd=project)
    assert await manager.invoke("forgetful", {"file": "x"}, context={"nonlocals": box}) == "done"
    last = box["requests"][-1]
    assert [m["role"] for m in last[-3:]] == ["system", "user", "assistant"]
    assert last[-3]["content"].startswith("Instructions from .toolcascade/instructions/shell.md")


def test_the_cli_runs_an_agent_with_the_instructions_of_its_working_folder(project, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    expect = {"contains": ["make test", "type hints everywhere"]}
    agent(project, "helper", [{"answer": "done", "expect": expect}], **{"model-pipeline": {}}, **ALL)
    monkeypatch.chdir(project / "src")
    result = CliRunner().invoke(cli, ["run", "helper", '{"file": "app.py"}', "--path", str(project / "tools")])
    assert (result.exit_code, result.output.strip()) == (0, "done")


def test_run_verbose_says_which_instruction_files_applied_and_why(project, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    agent(project, "helper", [{"answer": "done"}], **{"model-pipeline": {}}, **ALL)
    monkeypatch.chdir(project / "src")
    result = CliRunner().invoke(
        cli, ["run", "helper", '{"file": "app.py"}', "--path", str(project / "tools"), "--verbose"]
    )
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "AGENTS.md (agents)" in line]
    assert said and said[0].split(": ", 1)[-1]  # the file, its host, and whether and why it applied
    assert any(line.startswith("AGENTS.md (agents): applied") for line in result.stderr.splitlines())


def test_the_check_command_reports_instruction_files_their_host_would_ignore(project, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    (project / ".cursor" / "rules" / "stringly.mdc").write_text('---\nglobs: "*.py"\nalwaysApply: "yes"\n---\nBody.\n')
    monkeypatch.chdir(project)
    result = CliRunner().invoke(cli, ["check", "--path", "tools"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if "stringly.mdc" in line]
    assert lines and lines[0].startswith(str(Path(".cursor") / "rules" / "stringly.mdc") + ":3:")
    assert "alwaysApply must be true or false" in lines[0]


async def test_metadata_names_an_instruction_added_only_after_the_agent_calls_its_tool(project):
    """`instructions: {tools: {TOOL: text}}`: a folder's authority or the agent says what to follow when using a tool."""
    script = [
        {"calls": [{"name": "read", "arguments": {"path": "README"}}], "expect": {"last-role": "user"}},
        {"calls": [{"name": "shell", "arguments": {"command": "ls"}}], "expect": {"last-role": "tool"}},
        {"answer": "done", "expect": {"contains": "Never run rm -rf"}},
    ]
    meta = {"instructions": {"tools": {"shell": "Never run rm -rf."}}}
    agent(project, "careful", script, tools=["read", "shell"], **meta)
    events: list[Event] = []
    manager = Manager([project / "tools"], cwd=project, on_event=events.append)
    box: dict[str, Any] = {}
    assert await manager.invoke("careful", {"file": "src"}, context={"nonlocals": box}) == "done"
    first, second, third = box["requests"]
    assert not any("Never run rm -rf" in str(m["content"]) for m in first + second)  # no host's files, no rule yet
    assert sum("Never run rm -rf" in str(m["content"]) for m in third) == 1
    announced = [e.data["files"] for e in events if e.kind == "agent.instructions"]
    assert announced[0] == [
        {
            "file": "instructions.tools.shell",
            "host": "metadata",
            "applied": False,
            "reason": "not applied yet: added after the agent calls shell",
            "when": "after-call",
        }
    ]
    assert announced[-1][0]["reason"] == "the agent called shell"
