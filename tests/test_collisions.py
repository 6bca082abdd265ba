"""No silent surprises (issue 25, points 1-2): a key that runs a tool not written as middleware, a tool in a
built-in's place, and ``$attach: middleware``, the folder's way to say that only declared middleware runs by key
(R-CAS-7, R-TOOL-6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import ConfigurationError, Manager
from orchestrator.check import check
from orchestrator.cli import cli
from orchestrator.scaffold import scaffold

SUMMARY = """
---
description: A summary.
metadata:
  note: "draft"
---
The summary.
"""

NOTE = """
---
description: A note, a plain template.
---
This is the note's text.
"""

AUTHORITY = """
---
name: house
metadata:
  tone: friendly
---
"""

HELLO = """
---
description: Says hello.
---
Hello in a {{ meta.tone }} tone.
"""

ADD = """
frontmatter = {"description": "Adds.", "metadata": {"params": {"type": "object"}}}


def main(ctx):
    return ctx.args["a"] + ctx.args["b"]
"""

WORDS = """
frontmatter = {"description": "The first words of a text."}


def main(ctx):
    return ctx.args.get("text", "").split()[:2]
"""

COUNT = """
---
description: Counts to a number of words.
metadata:
  words: 3
---
Up to {{ meta.words }} words.
"""

EXECUTE = """
frontmatter = {"description": "My own execute."}


def main(ctx):
    return "executed"
"""

POLISH = """
frontmatter = {
    "role": "middleware",
    "metadata": {"params": {"type": "object", "properties": {"suffix": {"type": "string", "default": "!"}}}},
}


async def main(ctx):
    return f"{await ctx.target.manager.next()}{ctx.args['suffix']}"
"""

ATTACHED = """
---
name: house
metadata:
  $attach: middleware
  tone: friendly
  polish: {suffix: " :)"}
---
"""


def cli_run(*args: str, cwd: Path):
    """The CLI as a user runs it, from ``cwd`` (``./tools`` is searched by default)."""
    before = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"NO_COLOR": "1", "COLUMNS": "250"})
    finally:
        os.chdir(before)


def warnings_of(done) -> list[str]:
    return [line for line in done.stdout.splitlines() if ": warning: " in line]


# -- point 1: a data key sharing a tool's name ---------------------------------------------------------------


def test_a_data_key_naming_a_markdown_template_is_reported_by_check_with_both_files_and_the_fix(write, tmp_path):
    write("tools/summary.md", SUMMARY)
    write("tools/note.md", NOTE)
    # The default rule (R-CAS-7) still runs it: the note's text replaces the summary ...
    assert cli_run("run", "summary", cwd=tmp_path).stdout == "This is the note's text.\n"
    # ... but check says so, where the key is set, naming the tool it runs and the fix.
    done = cli_run("check", cwd=tmp_path)
    assert done.exit_code == 0  # a warning: the rule is kept, the surprise is not silent
    [line] = warnings_of(done)
    assert line.startswith("tools/summary.md:4: warning: 'note' runs tools/note.md as middleware")
    assert "not declared role: middleware" in line and "a markdown template" in line
    assert "write $static: [note] beside it or rename it" in line
    assert "1 warning" in done.stdout
    write("tools/summary.md", SUMMARY.replace('  note: "draft"', '  note: "draft"\n  $static: [note]'))
    assert cli_run("run", "summary", cwd=tmp_path).stdout == "The summary.\n"
    checked = cli_run("check", cwd=tmp_path)
    assert checked.stderr == "" and checked.stdout.endswith(": ok\n")  # the summary alone: nothing found


def test_an_authority_data_key_shared_with_a_new_tool_is_reported_once_at_the_authority(write, tmp_path):
    write("tools/AUTHORITY.md", AUTHORITY)
    write("tools/hello.md", HELLO)
    write("tools/add.py", ADD)
    assert cli_run("run", "hello", cwd=tmp_path).stdout == "Hello in a friendly tone.\n"
    write("tools/tone.md", NOTE)  # an unrelated tool, added later
    # What the user saw: every tool in the folder, python ones included, now returns the new tool's text.
    assert cli_run("run", "add", '{"a": 1, "b": 2}', cwd=tmp_path).stdout == "This is the note's text.\n"
    done = cli_run("check", cwd=tmp_path)
    [line] = warnings_of(done)  # once for the key, not once per tool it reaches
    assert line.startswith("tools/AUTHORITY.md:4: warning: 'tone' runs tools/tone.md as middleware")
    assert "$static: [tone]" in line and "$attach: middleware" in line


def test_a_data_key_naming_a_python_tool_is_reported_and_a_value_its_params_refuse_too(write, tmp_path):
    write("tools/count.md", COUNT)
    write("tools/words.py", WORDS)
    done = cli_run("check", cwd=tmp_path)
    [line] = warnings_of(done)
    assert line.startswith("tools/count.md:4: warning: 'words' runs tools/words.py as middleware")
    assert "never uses ctx.target" in line and "$static: [words]" in line
    # Declared middleware whose params the value cannot be: the args report (an error) names both files.
    write(
        "tools/words.py",
        WORDS.replace(
            '{"description": "The first words of a text."}',
            '{"role": "middleware", "metadata": {"params": {"type": "object"}}}',
        ),
    )
    done = cli_run("check", cwd=tmp_path)
    assert done.exit_code == 1 and warnings_of(done) == []
    [line, summary] = done.stdout.splitlines()
    assert "1 error" in summary
    assert line.startswith("tools/count.md:4: 'words' runs the middleware tools/words.py with args that fail")
    assert line.endswith("if 'words' is meant as data, list it in $static")


def test_middleware_written_to_wrap_or_declared_or_dynamic_is_not_reported(write, tools, tmp_path):
    # SPEC section 9's shout.py: no role, but its code wraps (ctx.target).
    write("tools/shout.py", "frontmatter = {}\n\nasync def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/polish.py", POLISH)
    write("tools/note.md", NOTE)
    write("tools/page.md", "---\nmetadata:\n  shout: {}\n  polish: {}\n  note: {}\n  $dynamic: [note]\n---\nx\n")
    assert check(Manager([tools], cwd=tmp_path)) == []


# -- point 2: a user tool in a built-in's place --------------------------------------------------------------


def test_a_user_tool_named_like_a_built_in_is_reported_by_check_and_marked_by_show(write, tmp_path):
    write("tools/hello.md", HELLO.replace("{{ meta.tone }}", "plain"))
    write("tools/execute.py", EXECUTE)
    write("tools/log.md", NOTE)
    write("tools/team/log.md", NOTE)  # team/log takes no built-in's name
    assert cli_run("run", "hello", cwd=tmp_path).stdout == "executed\n"
    done = cli_run("check", cwd=tmp_path)
    lines = warnings_of(done)
    assert len(lines) == 2
    assert lines[0].startswith("tools/execute.py: warning: this tool takes the place of the built-in 'execute'")
    assert "the default authority runs 'execute' in every tool's pipeline" in lines[0]
    assert lines[1].startswith("tools/log.md: warning: this tool takes the place of the built-in 'log'")
    assert "rename it" in lines[1]
    shown = json.loads(cli_run("show", "hello", "--json", cwd=tmp_path).stdout)
    execute = next(k for k in shown["keys"] if k["key"] == "execute")
    assert execute["reason"] == "names a tool (tools/execute.py, in place of the built-in execute.py)"
    assert json.loads(cli_run("show", "execute", "--json", cwd=tmp_path).stdout)["replaces"] == "built-in execute.py"
    assert json.loads(cli_run("show", "team/log", "--json", cwd=tmp_path).stdout)["replaces"] is None
    assert json.loads(cli_run("show", "hello", "--json", cwd=tmp_path).stdout)["replaces"] is None
    assert (
        "built-in execute.py: wherever it would run, this tool runs instead"
        in cli_run("show", "execute", cwd=tmp_path).stdout
    )
    listed = json.loads(cli_run("list", "--all", "--json", cwd=tmp_path).stdout)
    marks = {row["ref"]: row["replaces"] for row in listed if row["ref"] in ("execute", "log", "team/log", "hello")}
    assert marks == {"execute": "built-in execute.py", "log": "built-in log.py", "team/log": None, "hello": None}
    rows = cli_run("list", "--all", cwd=tmp_path).stdout.splitlines()  # a pipe: tab-separated rows
    assert next(row for row in rows if row.startswith("execute\t")).endswith("(replaces the built-in execute.py)")


# -- the folder opt-in: $attach: middleware -------------------------------------------------------------------


@pytest.mark.anyio
async def test_attach_middleware_keeps_a_key_data_though_a_tool_has_its_name(write, tools, tmp_path):
    write("tools/AUTHORITY.md", ATTACHED)
    write("tools/hello.md", HELLO)
    write("tools/add.py", ADD)
    write("tools/polish.py", POLISH)
    write("tools/tone.md", NOTE)
    manager = Manager([tools], cwd=tmp_path)
    assert await manager.invoke("hello") == "Hello in a friendly tone. :)"  # tone stays data; polish runs
    assert await manager.invoke("add", {"a": 1, "b": 2}) == "3 :)"
    explained = manager.explain("hello")
    tone = explained.key("tone")
    assert tone.verdict == "data"
    assert tone.reason == (
        "$attach: middleware (house): tone names tools/tone.md, which is not declared role: middleware; "
        "list it in $dynamic to run it"
    )
    assert explained.key("polish").verdict == "middleware"
    assert explained.key("execute").verdict == "middleware"  # built-ins are middleware
    assert explained.annotations["$attach"] == "middleware (set by house)"
    assert check(manager) == []
    # Declaring the tool middleware (a file edit, followed by the caches) makes the key run it.
    write("tools/tone.md", "---\nrole: middleware\n---\nThe tone tool.\n")
    manager.refresh()
    assert await manager.invoke("hello") == "The tone tool."  # a template: its text is the result


def test_attach_middleware_through_the_cli_and_for_nested_folders_and_dynamic(write, tmp_path):
    write("tools/AUTHORITY.md", ATTACHED)
    write("tools/polish.py", POLISH)
    write("tools/tone.md", NOTE)
    write("tools/team/AUTHORITY.md", "---\nmetadata:\n  tags: [team]\n---\n")  # inherits the rule
    write("tools/team/hello.md", HELLO)
    write("tools/loud.md", "---\nmetadata:\n  $dynamic: [tone]\n---\nHello in a {{ meta.tone }} tone.\n")
    assert cli_run("run", "team/hello", cwd=tmp_path).stdout == "Hello in a friendly tone. :)\n"
    assert cli_run("run", "loud", cwd=tmp_path).stdout == "This is the note's text. :)\n"  # $dynamic: asked for
    shown = cli_run("show", "team/hello", cwd=tmp_path).stdout
    assert "$attach: middleware (house): tone names tools/tone.md" in " ".join(shown.split())
    checked = cli_run("check", cwd=tmp_path)
    assert checked.exit_code == 0 and checked.stderr == "" and checked.stdout.endswith(": ok\n")


@pytest.mark.anyio
async def test_a_tool_may_say_attach_any_for_itself(write, tools):
    write("tools/AUTHORITY.md", ATTACHED)
    write("tools/polish.py", POLISH)
    write("tools/tone.md", NOTE)
    write("tools/open.md", "---\nmetadata:\n  $attach: any\n---\nHello in a {{ meta.tone }} tone.\n")
    assert await Manager([tools]).invoke("open") == "This is the note's text. :)"


@pytest.mark.anyio
async def test_attach_middleware_data_keys_add_no_edge_to_the_dependency_graph(write, tools):
    # wrap (declared) has a data key naming plain; plain names wrap. Without the rule's edges removed, wrap and
    # plain would form a cycle and auto-static (R-CAS-8) would demote plain's key: wrap would not run.
    write("tools/AUTHORITY.md", "---\nmetadata:\n  $attach: middleware\n---\n")
    write(
        "tools/wrap.py",
        'frontmatter = {"role": "middleware", "metadata": {"plain": 1}}\n\n'
        'async def main(ctx):\n    return f"[{await ctx.target.manager.next()}]"\n',
    )
    write("tools/plain.md", "---\nmetadata:\n  wrap: {}\n---\nbody\n")
    manager = Manager([tools])
    assert await manager.invoke("plain") == "[body]"
    assert manager.explain("wrap").key("plain").verdict == "data"


def test_attach_takes_only_middleware_or_any(write, tools, tmp_path):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  $attach: declared\n---\n")
    write("tools/hello.md", HELLO.replace("{{ meta.tone }}", "plain"))
    with pytest.raises(ConfigurationError) as caught:
        Manager([tools]).invoke_sync("hello")
    assert caught.value.key == "$attach" and caught.value.line == 3
    assert Path(caught.value.path).name == "AUTHORITY.md"
    [problem] = check(Manager([tools], cwd=tmp_path))
    assert problem.path == os.path.join("tools", "AUTHORITY.md") and problem.line == 3
    assert "$attach must be 'middleware'" in problem.message


# -- the starter folder copies the safe pattern -------------------------------------------------------------


def test_the_init_starter_keeps_its_tone_data_when_a_tone_tool_is_added(tmp_path):
    scaffold(tmp_path)
    (tmp_path / "tools/tone.md").write_text(NOTE.lstrip(), encoding="utf-8")
    assert (
        cli_run("run", "hello", '{"name": "Ada"}', cwd=tmp_path).stdout == "Hello, Ada! This is a friendly tool. :)\n"
    )
    checked = cli_run("check", cwd=tmp_path)
    assert checked.exit_code == 0 and checked.stderr == "" and checked.stdout.endswith(": ok\n")
