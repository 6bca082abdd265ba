"""``toolcascade eval`` from the command line (issue 31): the report, the exit status, and a real HTTP model (fakellm)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from servers import fakellm_server

from orchestrator import evalreport
from orchestrator.cli import cli
from orchestrator.logs import dollars
from orchestrator.runlog import RunLog

CAREFUL = {
    "provider": "scripted",
    "script": [
        "{% set t = args.text | default('') %}"
        "{{ 'positive' if 'love' in t else 'negative' if 'broke' in t else 'neutral' }}"
    ],
}
LABEL = "---\nmetadata:\n  params: {type: object, properties: {text: {type: string}}, required: [text]}\n---\nLabel: {{ args.text }}\n"
CASES = {
    "cases": [
        {"name": "praise", "args": {"text": "I love it"}, "expected": "positive"},
        {"name": "broken", "args": {"text": "It broke"}, "expected": "negative"},
    ]
}


def front(data: dict) -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False) + "---\n"


def toolcascade(log: Path | str, *args: str):
    """The CLI in-process, piped (plain output), recording in ``log``."""
    env = {"NO_COLOR": "1", "COLUMNS": "200", "FORCE_COLOR": None, "TOOLCASCADE_RUNLOG": str(log)}
    return CliRunner(env=env).invoke(cli, list(args), prog_name="toolcascade")


@pytest.fixture
def project(write, tools: Path, tmp_path: Path) -> Path:
    write("tools/AUTHORITY.md", front({"metadata": {"model": CAREFUL}}))
    write("tools/label.md", LABEL)
    write("tools/label.evals.yaml", yaml.safe_dump(CASES))
    return tmp_path


def test_the_exit_status_follows_min_score(project):
    log, tools = project / "runs.db", str(project / "tools")
    careless = "careless=--set 'model={provider: scripted, script: [positive]}'"
    done = toolcascade(log, "eval", "label", "--path", tools, "--variant", "house=", "--variant", careless)
    assert done.exit_code == 0, done.output  # no minimum: the report is all
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert rows[0] == ["CASE", "house", "careless"]
    assert rows[1] == ["praise", "1.00", "1.00"] and rows[2] == ["broken", "1.00", "0.00"]
    assert rows[3] == ["mean", "1.00", "0.50"]
    assert rows[4][0] == "tokens" and all(int(cell) > 0 for cell in rows[4][1:])
    assert not any(row[0].startswith("judge") for row in rows)  # no judge ran: no judge totals
    assert "COST" not in done.stdout and not any(row[0] == "cost" for row in rows)  # scripted: no price
    assert "  model = " in done.stdout and "from --set" in done.stdout

    passed = toolcascade(log, "eval", "label", "--path", tools, "--variant", careless, "--min-score", "0.5")
    assert passed.exit_code == 0, passed.stderr
    failed = toolcascade(log, "eval", "label", "--path", tools, "--variant", careless, "--min-score", "0.51")
    assert failed.exit_code == 1
    assert "variant 'careless' scored 0.50, under --min-score 0.51" in failed.stderr
    assert len(RunLog(log).runs(None)) == 2 * 2 + 2 + 2  # every eval call is in the run log
    nothing = toolcascade(log, "eval", "label", "--path", tools, "--no-log")
    assert nothing.exit_code == 0 and len(RunLog(log).runs(None)) == 8


def test_json_report_and_a_baseline_that_falls(project):
    log, tools = project / "runs.db", str(project / "tools")
    report = project / "report.json"
    done = toolcascade(log, "eval", "label", "--path", tools, "--json", "--output", str(report))
    assert done.exit_code == 0
    printed = json.loads(done.stdout)
    assert printed == json.loads(report.read_text())
    (base,) = printed["variants"]
    assert (printed["tool"], printed["cases"], base["name"], base["score"]) == (
        "label",
        ["praise", "broken"],
        "base",
        1.0,
    )
    assert toolcascade(log, "eval", "label", "--path", tools, "--baseline", str(report)).exit_code == 0
    # the model gets worse: the same variant scores under its baseline
    careless = front({"metadata": {"model": {"provider": "scripted", "script": ["positive"]}}})
    (project / "tools" / "AUTHORITY.md").write_text(careless)
    fell = toolcascade(log, "eval", "label", "--path", tools, "--baseline", str(report))
    assert fell.exit_code == 1 and "variant 'base' scored 0.50, under its baseline's 1.00" in fell.stderr
    report.write_text('{"not": "a report"}')
    bad = toolcascade(log, "eval", "label", "--path", tools, "--baseline", str(report))
    assert bad.exit_code == 1 and "not a report of toolcascade eval" in bad.stderr


def test_bad_input_is_one_clear_error_line(project, write, monkeypatch):
    log, tools = project / "runs.db", str(project / "tools")
    write("tools/label.evals.yaml", yaml.safe_dump({"cases": [{"args": {}, "scorers": ["exakt"]}]}))
    done = toolcascade(log, "eval", "label", "--path", tools)
    assert done.exit_code == 1
    assert done.stderr.startswith("error: ConfigurationError: ") and "did you mean 'exact'" in done.stderr
    assert "label.evals.yaml:2" in done.stderr
    bad = toolcascade(log, "eval", "label", "--path", tools, "--variant", "v=--sett x=1")
    assert bad.exit_code == 1 and "did you mean '--set'" in bad.stderr
    missing = toolcascade(log, "eval", "labl", "--path", tools)
    assert missing.exit_code == 1 and "ToolNotFoundError" in missing.stderr
    write("tools/label.evals.yaml", yaml.safe_dump(CASES))
    monkeypatch.setitem(sys.modules, "pydantic_evals", None)  # as when the eval extra is not installed
    extra = toolcascade(log, "eval", "label", "--path", tools)
    assert extra.exit_code == 1 and "pydantic-evals" in extra.stderr and "eval extra" in extra.stderr


RULES = {
    "rules": [
        {"name": "judge-no", "when": {"messages_contain": "judge: is neutral"}, "respond": {"content": '{"score": 0}'}},
        {"name": "judge-yes", "when": {"messages_contain": "judge: is"}, "respond": {"content": '{"score": 1}'}},
        {
            "name": "mini-love",
            "when": {"model_matches": "gpt-4o-mini", "messages_contain": "love"},
            "respond": {"content": "positive"},
        },
        {"name": "mini-other", "when": {"model_matches": "gpt-4o-mini"}, "respond": {"content": "negative"}},
        {"name": "other-model", "when": {"model_matches": "gpt-4.1-nano"}, "respond": {"content": "neutral"}},
    ]
}


def test_eval_over_http_with_a_model_variant_costs_and_a_judge(tmp_path_factory, project, write, monkeypatch):
    with fakellm_server(tmp_path_factory.mktemp("fakellm-eval"), RULES) as base:
        monkeypatch.setenv("TC_EVAL_KEY", "sk-eval")
        model = {"provider": "openai", "name": "gpt-4o-mini", "base-url": f"{base}/v1", "api-key-env": "TC_EVAL_KEY"}
        model["options"] = {"stream": False}  # fakellm reports usage on whole answers
        write("tools/AUTHORITY.md", front({"metadata": {"model": model}}))
        judge = {"returns": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}}
        # the judge asks the folder's priced model (fakellm's judge rules answer it)
        write("tools/judge.md", front({"metadata": judge}) + "Judge: is {{ args.output }} {{ args.expected }}?\n")
        cases = {**CASES, "scorers": [{"judge": "judge"}, {"contains": "e"}]}
        write("tools/label.evals.yaml", yaml.safe_dump(cases))
        log, tools = project / "runs.db", str(project / "tools")
        nano = f"nano=--set 'model={json.dumps({**model, 'name': 'gpt-4.1-nano'})}'"
        done = toolcascade(log, "eval", "label", "--path", tools, "--variant", "mini=", "--variant", nano, "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    mini, other = report["variants"]
    assert [c["output"] for c in mini["cases"]] == ["positive", "negative"]
    assert [c["output"] for c in other["cases"]] == ["neutral", "neutral"]
    assert (mini["score"], other["score"]) == (1.0, 0.5)  # the judge's 0 and contains' 1 for each of nano's
    assert mini["tokens"] > 0 and other["tokens"] > 0
    assert mini["cost"] is not None and mini["cost"] > 0 and report["prices"].startswith("genai-prices ")
    (differ,) = other["differs"]
    assert differ["key"] == "model" and differ["level"] == "--set" and differ["was_level"] == "authority AUTHORITY.md"
    runs = RunLog(log).runs(None)
    labelled = [info for info in runs if info.tool == "label"]
    assert len(labelled) == 4 and all(info.cost is not None for info in labelled if info.model == "openai:gpt-4o-mini")
    # the judges' tokens and cost are counted, apart from the task's own
    judged = [info for info in runs if info.tool == "judge"]
    assert len(judged) == 4 and all(info.cost is not None and info.tokens for info in judged)
    assert mini["judge_tokens"] > 0 and other["judge_tokens"] > 0
    assert mini["judge_tokens"] + other["judge_tokens"] == sum(info.tokens for info in judged)
    assert mini["judge_cost"] + other["judge_cost"] == pytest.approx(sum(info.cost for info in judged))
    mini_runs = [info for info in labelled if info.model == "openai:gpt-4o-mini"]
    assert mini["cost"] == pytest.approx(sum(info.cost for info in mini_runs))  # no judge's cost in it
    assert mini["tokens"] == sum(info.tokens for info in mini_runs)
    table = {row[0]: row[1:] for row in evalreport.rows(report)}
    assert table["judge tokens"] == [str(mini["judge_tokens"]), str(other["judge_tokens"])]
    assert table["judge cost"] == [dollars(mini["judge_cost"]), dollars(other["judge_cost"])]


def test_on_a_terminal_the_report_is_a_rich_table(project, monkeypatch):
    import orchestrator.evals

    monkeypatch.setattr(orchestrator.evals, "terminal", lambda: True)  # as when stdout is a terminal
    done = toolcascade(project / "runs.db", "eval", "label", "--path", str(project / "tools"))
    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    assert "\t" not in done.stdout and any(set(line.strip()) == {"─", " "} or "───" in line for line in lines)
    head = next(line for line in lines if "CASE" in line)
    assert head.split() == ["CASE", "base"]
    assert next(line for line in lines if line.strip().startswith("mean")).split() == ["mean", "1.00"]
