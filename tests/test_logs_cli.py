"""``toolcascade run`` and ``batch`` record in the run log; ``toolcascade logs`` lists, shows and exports (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.runlog import RunLog

GREET = """
---
metadata:
  params:
    type: object
    properties:
      name: {type: string}
      pin: {type: string, x-redact: true}
---
Hello {{ args.name }}{{ ' #' ~ args.pin if args.pin is defined else '' }}
"""

BROKEN = "def main(ctx):\n    raise ValueError('the sky fell')\n"


def toolcascade(log: Path | str, *args: str, stdin: str | None = None):
    """The CLI in-process, piped (plain output), recording in ``log``."""
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TOOLCASCADE_RUNLOG": str(log)}
    return CliRunner(env=env).invoke(cli, list(args), input=stdin, prog_name="toolcascade")


@pytest.fixture
def project(write, tools: Path, tmp_path: Path) -> Path:
    write("tools/greet.md", GREET)
    write("tools/broken.py", BROKEN)
    return tmp_path


def runs(log: Path) -> list:
    return RunLog(log).runs(None)


def test_run_records_by_default_and_not_with_no_log_or_off(project):
    log = project / "runs.db"
    tools = str(project / "tools")
    assert toolcascade(log, "run", "greet", '{"name": "Ada"}', "--path", tools).output == "Hello Ada\n"
    (info,) = runs(log)
    assert (info.tool, info.status) == ("greet", "ok")
    assert toolcascade(log, "run", "greet", '{"name": "Bo"}', "--path", tools, "--no-log").exit_code == 0
    assert toolcascade("off", "run", "greet", '{"name": "Cy"}', "--path", tools).exit_code == 0
    assert len(runs(log)) == 1
    assert not (project / "off").exists()


def test_a_failing_cli_run_is_recorded_with_its_error(project):
    log = project / "runs.db"
    done = toolcascade(log, "run", "broken", "--path", str(project / "tools"))
    assert done.exit_code == 1
    (info,) = runs(log)
    assert (info.tool, info.status, info.error_type) == ("broken", "error", "ValueError")
    assert "the sky fell" in RunLog(log).get(info.id)["error"]["message"]  # type: ignore[index]


def test_a_run_in_a_process_is_written_before_it_exits_and_its_redacted_arg_never_is(project):
    log = project / "runs.db"
    env = {**os.environ, "TOOLCASCADE_RUNLOG": str(log), "NO_COLOR": "1", "PYTHONWARNINGS": "error"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "greet", '{"name": "Ada", "pin": "7093-4412"}'],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello Ada #7093-4412\n"
    (info,) = runs(log)
    assert RunLog(log).get(info.id)["args"] == {"name": "Ada", "pin": "[redacted]"}  # type: ignore[index]
    written = b"".join(path.read_bytes() for path in project.glob("runs.db*"))
    assert b"Hello Ada" in written and b"7093-4412" not in written


def test_logs_lists_the_last_runs_with_filters(project):
    log = project / "runs.db"
    tools = str(project / "tools")
    for name in ("Ada", "Bo", "Cy"):
        toolcascade(log, "run", "greet", json.dumps({"name": name}), "--path", tools)
    toolcascade(log, "run", "broken", "--path", tools)
    listed = toolcascade(log, "logs")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split("\t") == ["RUN", "STARTED", "TOOL", "MODEL", "TOKENS", "SECONDS", "STATUS"]
    assert [line.split("\t")[2] for line in lines[1:]] == ["broken", "greet", "greet", "greet"]
    assert lines[1].split("\t")[-1] == "error: ValueError"
    errors = toolcascade(log, "logs", "list", "--status", "error").output.splitlines()[1:]
    assert [line.split("\t")[2] for line in errors] == ["broken"]
    assert len(toolcascade(log, "logs", "list", "--tool", "greet", "-n", "2").output.splitlines()) == 3
    assert len(toolcascade(log, "logs", "list", "--since", "1h").output.splitlines()) == 5
    assert toolcascade(log, "logs", "list", "--since", "2099-01-01").stdout == ""
    assert toolcascade(log, "logs", "list", "--since", "soon").exit_code == 2
    as_json = json.loads(toolcascade(log, "logs", "list", "--json", "--tool", "broken").output)
    assert [(run["tool"], run["status"]) for run in as_json] == [("broken", "error")]


def test_logs_show_prints_one_run_and_its_json(project):
    log = project / "runs.db"
    toolcascade(log, "run", "greet", '{"name": "Ada"}', "--path", str(project / "tools"))
    (info,) = runs(log)
    shown = toolcascade(log, "logs", "show", info.id)
    assert shown.exit_code == 0, shown.output
    assert f"run      {info.id}" in shown.output
    assert 'args     {"name": "Ada"}' in shown.output
    assert "result   Hello Ada" in shown.output
    whole = json.loads(toolcascade(log, "logs", "show", info.id, "--json").output)
    assert (whole["id"], whole["args"], whole["result"]) == (info.id, {"name": "Ada"}, "Hello Ada")
    missing = toolcascade(log, "logs", "show", "feedface")
    assert missing.exit_code == 1 and "no run 'feedface'" in missing.output


def test_logs_show_prints_each_model_turn(project, write):
    write(
        "tools/weather.py",
        "def main(ctx):\n    return {'temp': 5}\n",
    )
    write(
        "tools/forecast.md",
        "---\nmetadata:\n  tools: [weather]\n  model:\n    provider: scripted\n    script:\n"
        "      - calls: [{name: weather, arguments: {city: Paris}}]\n      - It is 5.\n---\nWeather?\n",
    )
    log = project / "runs.db"
    assert toolcascade(log, "run", "forecast", "--path", str(project / "tools")).output == "It is 5.\n"
    (info,) = runs(log)
    lines = toolcascade(log, "logs", "show", info.id).output.splitlines()
    turns = [line.strip() for line in lines if line.startswith("  [")]
    assert turns[0].startswith("[1] forecast asks scripted")
    assert turns[1].startswith("[1] forecast <- calls weather (finish: tool_calls")
    assert turns[2] == '[1] forecast -> weather {"city": "Paris"}'
    assert turns[3] == "[1] forecast <- weather: done"
    assert turns[-1].startswith("[2] forecast <- It is 5.")
    assert info.model is not None and info.model.startswith("scripted")
    listed = toolcascade(log, "logs").output.splitlines()[1].split("\t")
    assert listed[3] == info.model and listed[4] == str(info.tokens)


def test_logs_export_writes_json_lines_oldest_first(project):
    log = project / "runs.db"
    tools = str(project / "tools")
    for name in ("Ada", "Bo"):
        toolcascade(log, "run", "greet", json.dumps({"name": name}), "--path", tools)
    toolcascade(log, "run", "broken", "--path", tools)
    exported = [json.loads(line) for line in toolcascade(log, "logs", "export").output.splitlines()]
    assert [(run["tool"], run["args"]) for run in exported] == [
        ("greet", {"name": "Ada"}),
        ("greet", {"name": "Bo"}),
        ("broken", {}),
    ]
    only = toolcascade(log, "logs", "export", "--status", "ok", "-o", str(project / "ok.jsonl"))
    assert only.exit_code == 0 and only.output == ""
    assert len((project / "ok.jsonl").read_text().splitlines()) == 2


def test_logs_refuses_a_corrupt_file_and_leaves_it_alone(project):
    log = project / "runs.db"
    log.write_bytes(b"not sqlite " * 500)
    before = log.read_bytes()
    listed = toolcascade(log, "logs")
    assert listed.exit_code == 1
    assert listed.output.startswith("error: ConfigurationError:") and "run log" in listed.output
    ran = toolcascade(log, "run", "greet", '{"name": "Ada"}', "--path", str(project / "tools"))
    assert ran.exit_code == 0 and ran.output.startswith("Hello Ada")  # the run itself goes on
    assert log.read_bytes() == before


def test_logs_with_no_log_file_yet_says_so(project):
    done = toolcascade(project / "none.db", "logs")
    assert done.exit_code == 0 and "no runs in" in done.output
    assert not (project / "none.db").exists()


def test_batch_records_every_line_unless_no_log(project):
    log = project / "runs.db"
    source = project / "names.jsonl"
    source.write_text('{"name": "Ada", "pin": "5561-0042"}\n{"name": "Bo"}\n"not an object"\n')
    done = toolcascade(
        log, "batch", "greet", str(source), "-o", str(project / "out.jsonl"), "--path", str(project / "tools")
    )
    assert done.exit_code in (0, 1), done.output
    recorded = RunLog(log).export()
    by_args = {json.dumps(run["args"], sort_keys=True): run for run in recorded}
    assert by_args['{"name": "Ada", "pin": "[redacted]"}']["result"] == "Hello Ada #[redacted]"
    assert by_args['{"name": "Bo"}']["status"] == "ok"
    assert len(by_args) == 3
    assert b"5561-0042" not in b"".join(path.read_bytes() for path in project.glob("runs.db*"))
    again = toolcascade(
        log,
        "batch",
        "greet",
        str(source),
        "-o",
        str(project / "out2.jsonl"),
        "--path",
        str(project / "tools"),
        "--no-log",
    )
    assert again.exit_code in (0, 1)
    assert len(runs(log)) == 3


def test_a_run_on_an_executor_is_recorded_too(project):
    log = project / "runs.db"
    tools = str(project / "tools")
    done = toolcascade(
        log, "run", "greet", '{"name": "Ada", "pin": "8812-0045"}', "--path", tools, "--executor", "inprocess"
    )
    assert done.exit_code == 0 and done.stdout == "Hello Ada #8812-0045\n"
    failed = toolcascade(log, "run", "broken", "--path", tools, "--executor", "inprocess")
    assert failed.exit_code == 1
    broken, greet = runs(log)
    assert (greet.tool, greet.status, broken.tool, broken.status) == ("greet", "ok", "broken", "error")
    assert f"error: {broken.error_type}:" in failed.output  # the error as the caller got it back
    assert RunLog(log).get(greet.id)["args"] == {"name": "Ada", "pin": "[redacted]"}  # type: ignore[index]
    assert b"8812-0045" not in b"".join(path.read_bytes() for path in project.glob("runs.db*"))
