"""The toolcascade command line (SPEC section 8), driven as users drive it: real files, real processes.

What a command prints and returns is judged in this process (``in_process``, click's runner from the
project folder); the console script, ``python -m``, stdin, a terminal and ``--debug``'s traceback run
``toolcascade`` as a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from precompile import compile_project
from samples import GREET, SHOUT

from orchestrator import Event, __version__
from orchestrator.cli import cli
from orchestrator.display import Progress

ECHO = """
frontmatter = {"description": "Returns its args and two metadata keys.", "metadata": {"$inherit": False}}

def main(ctx):
    return {"args": ctx.args, "n": ctx.meta.get("n"), "tags": ctx.meta.get("tags")}
"""


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(NO_COLOR="1", COLUMNS="200", PYTHONWARNINGS="error")
    return env


@pytest.fixture(scope="module", autouse=True)
def bytecode() -> None:
    """The processes below read the project's bytecode, written once (tests/precompile.py), not compile it each."""
    compile_project()


def toolcascade(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        input=stdin,
        env=environment(),
        timeout=60,
    )


def invoke(*args: str, stdin: str | None = None):
    """The CLI in-process (fast), with the same plain-output environment as the subprocesses."""
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner(env=env).invoke(cli, list(args), input=stdin, prog_name="toolcascade")


def in_process(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``toolcascade ARGS`` run from ``cwd`` in this process: its exit status, stdout and stderr apart.

    A fraction of a new interpreter's cost (the tests below judge what the command prints and returns; those
    that judge the process itself, the console script, ``python -m``, a terminal, run ``toolcascade``).
    An exception the CLI lets escape fails the test, as the traceback a real process prints would.
    """
    with contextlib.chdir(cwd):
        result = invoke(*args, stdin=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def project(tmp_path, write, tools):
    write("tools/greet.md", GREET)
    write("tools/shout.py", SHOUT)
    write("tools/echo.py", ECHO)
    return tmp_path


# -- run ------------------------------------------------------------------------


def test_cli_run_passes_json_args_and_prints_string_results_raw(project):
    out = toolcascade("run", "greet", '{"name": "Ada"}', cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "HELLO, ADA!!!\n"
    assert out.stderr == ""  # no progress display when stderr is not a terminal


def test_cli_run_reads_args_from_stdin_with_dash(project):
    out = toolcascade("run", "greet", "-", cwd=project, stdin='{"name": "Bo"}')
    assert out.returncode == 0, out.stderr
    assert out.stdout == "HELLO, BO!!!\n"


def test_cli_run_prints_other_results_as_indented_json(project):
    out = in_process("run", "echo", '{"x": [1, 2]}', cwd=project)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"args": {"x": [1, 2]}, "n": None, "tags": None}
    assert out.stdout.startswith('{\n  "args"')


def test_cli_run_path_option_is_searched(project):
    result = CliRunner().invoke(cli, ["run", "echo", '{"a": 1}', "--path", str(project / "tools")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["args"] == {"a": 1}


def test_cli_run_missing_path_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["run", "echo", "--path", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_cli_run_without_args_uses_empty_object_and_default_tools_folder(project):
    out = in_process("run", "echo", cwd=project)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["args"] == {}


def test_cli_run_set_values_are_yaml_typed(project):
    out = in_process("run", "echo", "--set", "n=3", "--set", "tags=[a, b]", cwd=project)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["n"] == 3
    assert data["tags"] == ["a", "b"]


def test_cli_run_set_overrides_middleware_args(project):
    out = in_process("run", "greet", '{"name": "Ada"}', "--set", "shout={times: 4}", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "HELLO, ADA!!!!!\n"


def test_cli_run_set_without_equals_is_a_usage_error(project):
    out = in_process("run", "echo", "--set", "n", cwd=project)
    assert out.returncode == 2
    assert "'n' is not key=value" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_run_invalid_json_args_say_where(project):
    out = in_process("run", "greet", '{"name": }', cwd=project)
    assert out.returncode == 1
    line = one_error_line(out.stderr)
    assert "ARGS is not valid JSON" in line
    assert "line 1, column 10" in line


def test_cli_run_invalid_json_from_stdin_names_stdin(project):
    out = in_process("run", "greet", "-", cwd=project, stdin="{\n  'name': 1}")
    assert out.returncode == 1
    assert "stdin is not valid JSON" in one_error_line(out.stderr)
    assert "line 2, column 3" in out.stderr


def test_cli_run_bare_word_args_hint_at_json_quotes(project):
    out = in_process("run", "greet", "hello", cwd=project)
    assert out.returncode == 1
    assert "a JSON string needs quotes" in one_error_line(out.stderr)


def test_cli_run_unknown_tool_is_one_line_and_exit_1(project):
    out = in_process("run", "nope", cwd=project)
    assert out.returncode == 1
    line = one_error_line(out.stderr)
    assert line.startswith("error: ToolNotFoundError: no tool 'nope'")
    assert out.stdout == ""


def test_cli_run_validation_error_is_one_line_naming_the_tool(project):
    out = in_process("run", "greet", '{"name": 42}', cwd=project)
    assert out.returncode == 1
    line = one_error_line(out.stderr)
    assert line.startswith("error: ArgsValidationError: ")
    assert "/name" in line
    assert "tool 'greet'" in line


def test_cli_run_definition_error_carries_file_and_line(project, write):
    write("tools/broken.md", "---\ndescription: x\nmetadata: [1\n---\nhi\n")
    out = in_process("run", "broken", cwd=project)
    assert out.returncode == 1
    line = one_error_line(out.stderr)
    assert line.startswith("error: ToolDefinitionError: ")
    assert "broken.md:" in line


def test_cli_run_debug_shows_the_traceback(project):
    out = toolcascade("run", "greet", '{"name": 42}', "--debug", cwd=project)
    assert out.returncode == 1
    assert "Traceback" in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: ArgsValidationError: ")


def test_cli_run_a_failing_tool_body_is_one_line_with_a_debug_hint(project, write):
    write(
        "tools/boom.py", "frontmatter = {'metadata': {'$inherit': False}}\ndef main(ctx):\n    raise ValueError('x')\n"
    )
    out = in_process("run", "boom", cwd=project)
    assert out.returncode == 1
    line = one_error_line(out.stderr)
    assert line == "error: ValueError: x (tool 'boom', tools/boom.py:3) (run with --debug for the traceback)"


def run_on_terminal(project, *, pipe_stdout: bool, tool: str = "slow", extra=()) -> tuple[int, bytes, bytes]:
    """Run `toolcascade run TOOL` with stderr (and stdout unless piped) on a pseudo-terminal."""
    import pty

    master, slave = pty.openpty()
    env = {k: v for k, v in environment().items() if k not in ("NO_COLOR", "COLUMNS")}
    env["TERM"] = "xterm"
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "run", tool, *extra],
            stdout=subprocess.PIPE if pipe_stdout else slave,
            stderr=slave,
            cwd=project,
            env=env,
        )
        os.close(slave)
        stdout, _ = process.communicate(timeout=60)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal is closed once the process is gone
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    return process.returncode, stdout or b"", shown


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_cli_run_shows_progress_on_a_terminal_and_nothing_when_piped(project, write):
    write(
        "tools/slow.py",
        "import anyio\nfrontmatter = {'metadata': {'$inherit': False}}\n"
        "async def main(ctx):\n    await anyio.sleep(0.2)\n    return 'done'\n",
    )
    code, _stdout, shown = run_on_terminal(project, pipe_stdout=False)
    assert code == 0
    assert b"running slow" in shown and b"done" in shown
    code, stdout, shown = run_on_terminal(project, pipe_stdout=True)
    assert code == 0
    assert stdout == b"done\n"  # stdout carries only the result
    assert shown == b""  # and nothing extra is drawn when it is piped


def test_cli_progress_names_visible_tools_and_the_iteration():
    updates: list[str] = []

    class Status:
        def update(self, text: str) -> None:
            updates.append(text)

    progress = Progress(Status())  # type: ignore[arg-type]
    events = [
        Event("invoke.start", "agent", 0, "r"),
        Event("invoke.start", "trust", 1, "r"),  # built-in middleware: not shown
        Event("model.request", "agent", 0, "r", 2),
        Event("invoke.start", "model-call", 1, "r"),
        Event("tool.start", "agent", 0, "r", 2, {"call": "weather"}),
        Event("invoke.start", "weather", 1, "r"),
        Event("invoke.end", "weather", 1, "r"),
        Event("tool.end", "agent", 0, "r", 2, {"call": "weather"}),
    ]
    for event in events:
        progress(event)
    assert updates == [
        "running agent",
        "running agent",
        "running agent · iteration 2 · asking the model",
        "running agent · iteration 2 · asking the model",
        "running agent · iteration 2 · calling weather",
        "running agent · iteration 2 · calling weather › weather",
        "running agent · iteration 2 · calling weather",
        "running agent · iteration 2",
    ]


# -- list -----------------------------------------------------------------------


def test_cli_list_prints_a_table_of_visible_tools(project, write):
    write("tools/secret.md", "---\ndescription: Not for listing.\nmetadata: {visibility: hidden}\n---\nx\n")
    out = in_process("list", cwd=project)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "DESCRIPTION"]
    greet = next(line for line in lines if line.startswith("greet"))
    assert greet.split(None, 2) == ["greet", "markdown", "Greets someone."]
    assert any(line.split()[:2] == ["shout", "python"] for line in lines)
    assert "secret" not in out.stdout
    assert "validate-args" not in out.stdout  # built-ins are hidden


def test_cli_list_all_includes_hidden_tools(project, write):
    write("tools/secret.md", "---\ndescription: Not for listing.\nmetadata: {visibility: hidden}\n---\nx\n")
    out = invoke("list", "--all", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    secret = next(line for line in out.stdout.splitlines() if line.startswith("secret"))
    assert secret.split(None, 3) == ["secret", "markdown", "hidden", "Not for listing."]
    assert "validate-args" in out.stdout


def test_cli_list_shows_a_broken_tool_with_its_error(project, write):
    write("tools/broken.md", "---\nmetadata: [1\n---\nhi\n")
    out = in_process("list", cwd=project)
    assert out.returncode == 0, out.stderr
    broken = next(line for line in out.stdout.splitlines() if line.startswith("broken"))
    assert broken.split()[1] == "error"
    assert "broken.md:2: invalid YAML" in broken  # the unclosed [
    assert "greet" in out.stdout  # one bad file hides nothing else


def test_cli_list_json_is_a_list_of_objects(project, write):
    write("tools/broken.md", "---\nmetadata: [1\n---\nhi\n")
    out = invoke("list", "--json", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    rows = {row["ref"]: row for row in json.loads(out.stdout)}
    assert set(rows) == {"greet", "shout", "echo", "broken"}
    greet = rows["greet"]
    assert set(greet) == {
        "name",
        "ref",
        "kind",
        "description",
        "hidden",
        "params",
        "path",
        "error",
        "format",
        "replaces",
    }
    assert greet["format"] is None  # our own markdown, not an imported format
    assert greet["kind"] == "markdown"
    assert greet["params"]["required"] == ["name"]
    assert greet["path"] == str(project / "tools" / "greet.md")
    assert greet["error"] is None
    assert "invalid YAML" in rows["broken"]["error"]


def test_cli_list_json_all_marks_hidden_tools(project):
    out = invoke("list", "--json", "--all", "--path", str(project / "tools"))
    rows = {row["ref"]: row for row in json.loads(out.stdout)}
    assert rows["validate-args"]["hidden"] is True
    assert rows["greet"]["hidden"] is False


# -- show -----------------------------------------------------------------------


def test_cli_show_explains_keys_levels_verdicts_and_chain(project):
    out = in_process("show", "greet", cwd=project)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "\x1b[" not in text  # piped: no colour codes
    assert "description: Greets someone." in text  # the frontmatter
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "greet (tool)" in rows["shout"] and "middleware" in rows["shout"] and "names a tool" in rows["shout"]
    assert '{"times": 2}' in rows["shout"]
    assert "default (authority)" in rows["validate-args"]
    chain = text[text.index("chain (run order)") :]
    names = [line.split()[1] for line in chain.splitlines()[3:] if line.strip()[:1].isdigit()]
    assert names.index("shout") < names.index("execute")
    assert names[0] == "trust"
    trust = next(line for line in chain.splitlines() if line.split()[1:2] == ["trust"])
    assert "locked" in trust and "$configure" in trust


def test_cli_show_reports_data_keys_with_their_reason(project, write):
    write("tools/note.md", "---\nmetadata:\n  colour: blue\n  greet: {}\n  $static: [greet]\n---\nx\n")
    out = invoke("show", "note", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert "data" in rows["colour"] and "names no tool" in rows["colour"]
    assert "data" in rows["greet"] and "listed in $static" in rows["greet"]


def test_cli_show_json_is_the_explanation(project):
    out = invoke("show", "greet", "--json", "--set", "shout={times: 5}", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["tool"] == "greet"
    shout = next(k for k in data["keys"] if k["key"] == "shout")
    assert shout["value"] == {"times": 5}
    assert shout["level"] == "overrides"
    assert [e["name"] for e in data["chain"]][-1] == "validate-returns"


def test_cli_show_takes_args_for_templated_metadata(project, write):
    write("tools/hello.md", "---\nmetadata:\n  who: '{{ args.name }}'\n---\nhi\n")
    unrendered = invoke("show", "hello", "--json", "--path", str(project / "tools"))
    assert unrendered.exit_code == 0, unrendered.output
    assert next(k for k in json.loads(unrendered.stdout)["keys"] if k["key"] == "who")["value"] == "{{ args.name }}"
    failed = invoke("show", "hello", '{"nobody": 1}', "--path", str(project / "tools"))
    assert failed.exit_code == 1  # with ARGS given, a template that cannot render is an error
    assert failed.stderr.startswith("error: InterpolationError: ")
    out = invoke("show", "hello", '{"name": "Ada"}', "--json", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    assert next(k for k in json.loads(out.stdout)["keys"] if k["key"] == "who")["value"] == "Ada"


def test_cli_show_unknown_tool_is_one_line(project):
    out = in_process("show", "nope", cwd=project)
    assert out.returncode == 1
    assert one_error_line(out.stderr).startswith("error: ToolNotFoundError:")


# -- version, help, serve, import cost -------------------------------------------


def test_cli_version(project):
    out = toolcascade("--version", cwd=project)
    assert out.returncode == 0
    assert out.stdout.startswith("toolcascade") and out.stdout.split()[-1] == __version__


@pytest.mark.parametrize("command", [[], ["run"], ["list"], ["show"], ["check"], ["serve"]])
def test_cli_help_on_every_command_has_examples(command):
    result = CliRunner().invoke(cli, [*command, "--help"], prog_name="toolcascade")
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output
    assert "toolcascade " + (command[0] if command else "run") in result.output


def test_cli_help_from_python_dash_m(project):
    out = toolcascade("--help", cwd=project)
    assert out.returncode == 0
    assert "toolcascade" in out.stdout.splitlines()[0]  # the usage line names the program, not python -m
    for command in ("run", "list", "show", "check", "serve"):
        assert f"  {command} " in out.stdout


def test_cli_serve_without_the_mcp_extra_says_how_to_install_it(project):
    code = (
        "import sys; sys.modules['mcp'] = None; sys.argv = ['toolcascade', 'serve']; "
        "from orchestrator.cli import main; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=project, env=environment(), timeout=60
    )
    assert out.returncode == 1
    assert one_error_line(out.stderr) == (
        "error: toolcascade serve needs the MCP SDK: pip install 'mcp>=2,<3' (or install toolcascade with its mcp extra)"
    )


def test_cli_serve_refuses_a_malformed_http_address(project):
    out = in_process("serve", "--http", "localhost", cwd=project)
    assert out.returncode == 2
    assert "'localhost' is not HOST:PORT" in out.stderr


def test_cli_module_imports_neither_rich_nor_mcp():
    code = "import sys, orchestrator.cli; print(sorted(m for m in ('mcp', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cli_show_without_args_shows_templates_unrendered(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "hello.md").write_text(
        "---\nmetadata:\n  greeting: 'Dear {{ args.customer }}'\n---\n{{ meta.greeting }}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", "hello", "--json", "--path", str(tools)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    keys = {k["key"]: k["value"] for k in json.loads(out.stdout)["keys"]}
    assert keys["greeting"] == "Dear {{ args.customer }}"
    assert "pass ARGS to render them" in out.stderr
    rendered = subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", "hello", '{"customer": "Ada"}', "--json", "--path", str(tools)],
        capture_output=True,
        text=True,
    )
    assert {k["key"]: k["value"] for k in json.loads(rendered.stdout)["keys"]}["greeting"] == "Dear Ada"


AGENT = """---
metadata:
  model:
    provider: scripted
    script:
      - calls: [{name: weather, arguments: {city: Oslo}}]
      - answer: It is nine degrees in Oslo today.
  tools: [weather]
---
Weather in Oslo?
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_cli_run_streams_an_answer_on_a_terminal_and_pipes_stay_clean(project, write):
    write("tools/weather.py", "def main(ctx):\n    return {'celsius': 9}\n")
    write("tools/forecast.md", AGENT)
    code, _stdout, shown = run_on_terminal(project, pipe_stdout=False, tool="forecast")
    assert code == 0, shown
    text = shown.decode()
    assert '→ weather {"city": "Oslo"}' in text and "← weather ok" in text
    assert text.count("It is nine degrees in Oslo today.") == 1  # streamed, then not printed again
    code, stdout, shown = run_on_terminal(project, pipe_stdout=True, tool="forecast")
    assert code == 0, (stdout, shown)  # what it said, should a loaded machine ever make it fail again
    assert stdout == b"It is nine degrees in Oslo today.\n" and shown == b""


def test_cli_run_verbose_prints_the_runs_usage(project, write):
    write("tools/weather.py", "def main(ctx):\n    return {'celsius': 9}\n")
    write("tools/forecast.md", AGENT)
    out = in_process("run", "forecast", "--verbose", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "It is nine degrees in Oslo today.\n"
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("usage: ") and "in 2 model call(s)" in line


REPORT = """---
metadata:
  returns: {type: object, properties: {city: {type: string}, celsius: {type: number}}, required: [city, celsius]}
  model:
    provider: scripted
    script:
      - '{"city": "Oslo", "celsius": 9}'
---
Weather in Oslo?
"""

REPORT_WITH_TOOLS = """---
metadata:
  tools: [weather]
  returns: {type: object, properties: {city: {type: string}, celsius: {type: number}}, required: [city, celsius]}
  model:
    provider: scripted
    script:
      - calls: [{name: weather, arguments: {city: Oslo}}]
      - It is nine degrees in Oslo today.
      - '{"city": "Oslo", "celsius": 9}'
---
Weather in Oslo?
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("agent", [REPORT, REPORT_WITH_TOOLS], ids=["alone", "with-tools"])
def test_cli_run_on_a_terminal_prints_a_returns_answer_once_as_json(project, write, agent):
    write("tools/weather.py", "def main(ctx):\n    return {'celsius': 9}\n")
    write("tools/report.md", agent)
    code, _stdout, shown = run_on_terminal(project, pipe_stdout=False, tool="report")
    assert code == 0
    text = shown.decode().replace("\r\n", "\n")
    assert text.count("Oslo") == (1 if agent is REPORT else 2)  # the answer once (and the tool call's line)
    assert "nine degrees" not in text  # the prose answer the JSON one replaced is not shown
    assert text.endswith('{\n  "city": "Oslo",\n  "celsius": 9\n}\n')
    code, stdout, _shown = run_on_terminal(project, pipe_stdout=True, tool="report")
    assert code == 0 and json.loads(stdout) == {"city": "Oslo", "celsius": 9}


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_cli_run_on_a_terminal_ends_a_turns_text_before_its_tool_calls_and_prints_the_answer_once(project, write):
    write("tools/weather.py", "def main(ctx):\n    return {'celsius': 9}\n")
    write("tools/forecast.md", AGENT.replace("- calls:", "- answer: Let me look.\n        calls:"))
    code, _stdout, shown = run_on_terminal(project, pipe_stdout=False, tool="forecast")
    assert code == 0
    text = shown.decode().replace("\r\n", "\n")
    assert "Let me look.\n" in text  # its line ends before the tool call shows
    assert text.count("It is nine degrees in Oslo today.") == 1


# -- streams and search paths ---------------------------------------------------


def test_cli_check_prints_its_report_and_summary_on_stdout(project, write):
    write("tools/typo.md", "---\ndescripton: oops\n---\nhi\n")
    out = in_process("check", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0].startswith("tools/typo.md:") and "descripton" in lines[0]
    assert lines[-1].startswith("checked 4 tools in tools: 1 warning")
    write("tools/broken.md", "---\nmetadata: [1\n---\nhi\n")
    out = in_process("check", cwd=project)
    assert out.returncode == 1 and out.stderr == ""
    assert "1 error" in out.stdout.splitlines()[-1]


def test_cli_list_shows_a_file_reachable_from_two_search_paths_once(project, monkeypatch):
    monkeypatch.chdir(project)
    alone = [row["ref"] for row in json.loads(invoke("list", "--json", "--path", "tools").stdout)]
    assert sorted(alone) == ["echo", "greet", "shout"]
    out = invoke("list", "--json", "--path", "tools", "--path", ".")
    assert out.exit_code == 0, out.output
    assert [row["ref"] for row in json.loads(out.stdout)] == alone  # not tools/echo ...: the first path's ref wins
    plain = in_process("list", "--path", ".", "--path", "tools", cwd=project)
    assert plain.returncode == 0, plain.stderr
    assert sorted(line.split("\t")[0] for line in plain.stdout.splitlines()[1:]) == [
        "tools/echo",
        "tools/greet",
        "tools/shout",
    ]


def test_cli_identical_search_paths_are_searched_once(project, monkeypatch):
    monkeypatch.chdir(project)
    alone = json.loads(invoke("list", "--json", "--path", "tools").stdout)
    out = invoke("list", "--json", "--path", "tools", "--path", "./tools/", "--path", str(project / "tools"))
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == alone


def test_cli_show_brief_prints_less_than_the_whole_explanation(project):
    full = in_process("show", "greet", cwd=project)
    brief = in_process("show", "greet", "--brief", cwd=project)
    assert brief.returncode == 0, brief.stderr
    assert "shout" in brief.stdout
    assert 0 < len(brief.stdout.splitlines()) < len(full.stdout.splitlines())


def test_cli_run_verbose_names_the_middleware_that_ended_the_chain(project, write):
    write(
        "tools/stopper.py",
        "frontmatter = {'role': 'middleware', 'metadata': {'params': {'type': 'object'}}}\n"
        "def main(ctx):\n    return 'stopped early'\n",
    )
    write("tools/greeter.md", "---\nmetadata:\n  stopper: {}\n---\nHello\n")
    quiet = in_process("run", "greeter", cwd=project)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "stopped early\n", "")
    out = in_process("run", "greeter", "--verbose", cwd=project)
    assert out.returncode == 0 and out.stdout == "stopped early\n"
    told = [line for line in out.stderr.splitlines() if "stopper" in line]
    assert len(told) == 1 and "greeter" in told[0], out.stderr


def test_cli_run_errors_name_files_as_check_does(project, write):
    # issue 25: run printed /abs/path/tools/bad.md:2 where check printed tools/bad.md:2
    write("tools/bad.md", "---\ndescription: [unclosed\n---\nhi\n")
    ran = in_process("run", "bad", cwd=project)
    checked = in_process("check", cwd=project)
    line = one_error_line(ran.stderr)
    assert ran.returncode == 1 and str(project) not in line
    assert "tools/bad.md:2: " in line and "tools/bad.md:2: " in checked.stdout
    (project / "other").mkdir()
    elsewhere = in_process("run", "bad", "--path", str(project / "tools"), cwd=project / "other")
    assert str(project / "tools" / "bad.md") in elsewhere.stderr  # outside the current folder: the whole path
