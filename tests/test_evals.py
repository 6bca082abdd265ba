"""Eval datasets, scorers and variants (issue 31): ``orchestrator.evalsets`` and ``orchestrator.evals`` on the scripted model."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from orchestrator import ConfigurationError, Manager, SecurityError, ToolDefinitionError
from orchestrator.evals import Variant, evaluate, parse_variant, run_variants
from orchestrator.evalsets import as_score, find_dataset, load_dataset
from orchestrator.runlog import RunLog

pytestmark = pytest.mark.anyio

# A scripted model that labels a review by its words: the stand-in for a careful model (its turn is a template).
CAREFUL = {
    "provider": "scripted",
    "script": [
        "{% set t = args.text | default('') %}"
        "{{ 'positive' if 'love' in t else 'negative' if 'broke' in t else 'neutral' }}"
    ],
}
CARELESS = {"provider": "scripted", "script": ["positive"]}
LABEL = """
---
description: Labels a review.
metadata:
  params: {type: object, properties: {text: {type: string}}, required: [text]}
---
Label this review: {{ args.text }}
"""
JUDGE = {
    "description": "Judges a label.",
    "metadata": {
        "returns": {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]},
        "model": {
            "provider": "scripted",
            "script": [
                '{{ \'{"score": 1, "reason": "same"}\' if args.output == args.expected '
                'else \'{"score": 0, "reason": "differs: \' ~ args.output ~ \'"}\' }}'
            ],
        },
    },
}
DATASET = {
    "scorers": [{"regex": "^(positive|negative|neutral)$"}],
    "cases": [
        {"name": "praise", "args": {"text": "I love it"}, "expected": "positive", "scorers": ["exact"]},
        {"name": "broken", "args": {"text": "It broke"}, "expected": "negative", "scorers": [{"judge": "judge"}]},
    ],
}


def front(data: dict) -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False) + "---\n"


@pytest.fixture
def project(write, tools: Path, tmp_path: Path) -> Path:
    write("tools/AUTHORITY.md", front({"metadata": {"model": CAREFUL}}))
    write("tools/label.md", LABEL)
    write("tools/judge.md", front(JUDGE) + "Is {{ args.output }} the label {{ args.expected }}?\n")
    write("tools/label.evals.yaml", yaml.safe_dump(DATASET, sort_keys=False))
    return tmp_path


def loaded(project: Path, given: str | None = None):
    with Manager([project / "tools"]) as manager:
        tool = manager.find_tool("label")
        where, trusted = find_dataset(tool, given)
        return load_dataset(tool, where, trusted=trusted)


async def run(project: Path, *variants: Variant, log: Path | None = None):
    evalset = loaded(project)
    outcomes = await evaluate("label", evalset, variants, [project / "tools"], runlog=log, concurrency=3)
    from orchestrator.evalreport import summary

    return summary("label", evalset, outcomes)


# -- datasets ------------------------------------------------------------------------------------------


def test_the_dataset_beside_the_tool_is_found_and_read_with_its_shared_scorers(project):
    evalset = loaded(project)
    assert evalset.path == project / "tools" / "label.evals.yaml"
    praise, broken = evalset.cases
    assert (praise.name, praise.args, praise.expected) == ("praise", {"text": "I love it"}, "positive")
    assert [s.kind for s in praise.scorers] == ["regex", "exact"]
    assert [s.kind for s in broken.scorers] == ["regex", "judge"]
    assert (praise.line, broken.line) == (4, 10)


def test_json_lines_and_frontmatter_datasets(project, write):
    lines = [{"args": {"text": "I love it"}, "expected": "positive"}, {"args": {"text": "meh"}, "expected": "neutral"}]
    write("cases.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    evalset = loaded(project, str(project / "cases.jsonl"))
    assert [(c.name, [s.kind for s in c.scorers], c.line) for c in evalset.cases] == [
        ("case 1", ["exact"], 1),  # expected and no scorer: exact
        ("case 2", ["exact"], 2),
    ]
    (project / "tools" / "label.evals.yaml").unlink()
    evals = {"evals": [{"args": {"text": "x"}, "scorers": [{"contains": ["a", "b"]}]}]}
    write("tools/label.md", front({**evals, "metadata": {"params": {"type": "object"}}}) + "Label {{ args.text }}\n")
    (case,) = loaded(project).cases
    assert case.scorers[0].value == ("a", "b") and loaded(project).path == project / "tools" / "label.md"


@pytest.mark.parametrize(
    ("dataset", "words", "line"),
    [
        ({"cases": [{"args": {}, "scorers": ["exakt"]}]}, ["unknown scorer 'exakt'", "did you mean 'exact'"], 2),
        ({"cases": [{"args": {}, "expect": "x"}]}, ["unknown key 'expect'", "did you mean 'expected'"], 2),
        ({"cases": [{"expected": "x"}]}, ["case 1 has no args"], 2),
        ({"cases": [{"args": {}, "scorers": ["exact"]}]}, ["exact scorer needs expected"], 2),
        ({"cases": [{"args": {}}]}, ["nothing to score it"], 2),
        ({"cases": [{"args": {}, "scorers": [{"regex": "(unclosed"}]}]}, ["not a valid pattern"], 2),
        ({"cases": [{"args": {}, "scorers": [{"schema": {"type": "nope"}}]}]}, ["not a valid JSON Schema"], 2),
        (
            {"cases": [{"name": "a", "args": {}, "expected": 1}, {"name": "a", "args": {}, "expected": 1}]},
            ["two cases"],
            5,
        ),
        ({"cases": []}, ["non-empty list of cases"], 1),
        ({"casse": []}, ["unknown dataset key 'casse'", "did you mean 'cases'"], 1),
    ],
)
def test_a_malformed_dataset_is_a_configuration_error_at_its_file_and_line(project, write, dataset, words, line):
    path = write("bad.yaml", yaml.safe_dump(dataset, sort_keys=False))
    with pytest.raises(ConfigurationError) as info:
        loaded(project, str(path))
    assert info.value.path == str(path) and info.value.line == line
    for word in words:
        assert word in str(info.value)


def test_a_dataset_that_is_not_yaml_or_json_names_its_line(project, write):
    path = write("bad.jsonl", '{"args": {}, "expected": 1}\n{"args": \n')
    with pytest.raises(ToolDefinitionError) as info:
        loaded(project, str(path))
    assert info.value.line == 2
    with pytest.raises(ConfigurationError, match="no dataset 'nowhere.yaml'"):
        loaded(project, "nowhere.yaml")


def test_a_python_scorer_runs_only_from_a_trusted_dataset(project, write):
    write("tools/checks.py", "def short(output, case):\n    return len(output) < 10\n")
    cases = {"cases": [{"args": {"text": "I love it"}, "scorers": [{"python": "checks.py:short"}]}]}
    path = write("tools/label.evals.yaml", yaml.safe_dump(cases))
    with Manager([project / "tools"]) as manager:
        tool = manager.find_tool("label")
        (case,) = load_dataset(tool, path, trusted=True).cases
        assert case.scorers[0].check is not None and case.scorers[0].check("positive", {}) is True
        with pytest.raises(SecurityError, match="python scorer runs code") as info:
            load_dataset(tool, path, trusted=False)
        assert info.value.path == str(path)
    write(
        "tools/label.evals.yaml", yaml.safe_dump({"cases": [{"args": {}, "scorers": [{"python": "checks.py:shrt"}]}]})
    )
    with pytest.raises(ConfigurationError, match="did you mean 'short'"):
        loaded(project)
    write("tools/label.evals.yaml", yaml.safe_dump({"cases": [{"args": {}, "scorers": [{"python": "../x.py:f"}]}]}))
    with pytest.raises(ConfigurationError, match="no file '../x.py' beside the dataset"):
        loaded(project)


def test_answers_become_scores_or_a_clear_error():
    assert as_score(True, "judge") == (1.0, None)
    assert as_score(0.25, "judge") == (0.25, None)
    assert as_score('{"score": 0.5, "reason": "half"}', "judge") == (0.5, "half")
    assert as_score({"score": False, "reason": "no"}, "judge") == (0.0, "no")
    assert as_score("Pass.", "judge") == (1.0, None)
    assert as_score([1, "fine"], "judge") == (1.0, "fine")
    for bad in (7, "maybe", {"grade": 1}, None):
        with pytest.raises(ConfigurationError, match="judge 'j' answered .*a score is a number from 0 to 1"):
            as_score(bad, "judge 'j'")


# -- scorers -------------------------------------------------------------------------------------------


async def test_each_scorer_kind_scores_an_output(project, write):
    write("tools/checks.py", "async def words(output, case):\n    return {'score': 0.5, 'reason': case['name']}\n")
    scorers = [
        "exact",
        {"contains": ["pos", "tive"]},
        {"regex": "^pos"},
        {"schema": {"type": "object", "required": ["label"]}},
        {"python": "checks.py:words"},
    ]
    cases = {"cases": [{"name": "one", "args": {"text": "I love it"}, "expected": " positive\n", "scorers": scorers}]}
    write("tools/label.evals.yaml", yaml.safe_dump(cases))
    (case,) = loaded(project).cases

    async def no_judge(tool, args):
        raise AssertionError("no judge here")

    found = [await s.score("positive", case, no_judge) for s in case.scorers]
    assert [value for value, _ in found] == [1.0, 1.0, 1.0, 0.0, 0.5]
    assert found[4][1] == "one"
    assert [await s.score('{"label": "x"}', case, no_judge) for s in case.scorers][3] == (1.0, None)  # JSON text
    assert (await case.scorers[1].score("negative", case, no_judge))[1] == "missing 'pos'"


# -- running -------------------------------------------------------------------------------------------


async def test_the_tool_as_written_is_scored_with_a_markdown_judge_and_recorded(project, tmp_path):
    log = tmp_path / "runs.db"
    report = await run(project, Variant("base"), log=log)
    (base,) = report["variants"]
    assert base["score"] == 1.0 and base["error"] is None and base["differs"] == []
    praise, broken = base["cases"]
    assert praise["output"] == "positive" and praise["scores"] == {
        "regex '^(positive|negative|neutral)$'": 1.0,
        "exact": 1.0,
    }
    assert broken["scores"]["judge judge"] == 1.0  # the judge tool answered {"score": 1} through its model
    assert base["tokens"] > 0 and praise["tokens"] > 0 and praise["seconds"] > 0
    assert base["tokens"] == praise["tokens"] + broken["tokens"]  # the task's own: no judge's among them
    assert praise["judge_tokens"] is None and broken["judge_tokens"] > 0  # praise has no judge
    assert base["judge_tokens"] == broken["judge_tokens"] and base["judge_cost"] is None  # scripted: no price
    runs = RunLog(log).runs(None)
    tools = sorted(info.tool for info in runs)
    assert tools == ["judge", "label", "label"]  # every call, the judge's too
    (judged,) = [info for info in runs if info.tool == "judge"]
    assert judged.tokens == broken["judge_tokens"]  # what the judge's own run spent, as the run log has it


async def test_variants_by_set_authority_and_path_side_by_side_with_what_differs(project, write, tmp_path):
    write("cheap.md", front({"metadata": {"model": CARELESS}}))
    write(
        "next/label.md", front({"metadata": {"params": {"type": "object"}, "model": CARELESS}}) + "v2 {{ args.text }}\n"
    )
    variants = [
        Variant("base"),
        parse_variant("careless=--set " + shlex.quote("model=" + json.dumps(CARELESS))),
        parse_variant(f"cheap=--authority {tmp_path / 'cheap.md'}"),
        parse_variant(f"next=--path {tmp_path / 'next'}"),
    ]
    report = await run(project, *variants)
    scores = {v["name"]: v["score"] for v in report["variants"]}
    # careless answers positive: praise is right (1), broken gets its regex (1) but the judge's 0
    assert scores == {"base": 1.0, "careless": 0.75, "cheap": 0.75, "next": 0.75}
    differs = {v["name"]: v["differs"] for v in report["variants"]}
    (careless,) = differs["careless"]
    assert (careless["key"], careless["value"], careless["level"]) == ("model", CARELESS, "--set")
    assert careless["was"] == CAREFUL and careless["was_level"] == "authority AUTHORITY.md"
    (cheap,) = differs["cheap"]
    assert cheap["level"] == f"authority {tmp_path / 'cheap.md'}" and cheap["value"] == CARELESS
    nxt = {item["key"]: item for item in differs["next"]}
    assert sorted(nxt) == ["model", "params"]  # its own params differ too
    assert nxt["model"]["level"] == "tool label" and nxt["model"]["value"] == CARELESS
    broken = next(c for c in report["variants"][1]["cases"] if c["name"] == "broken")
    assert broken["reasons"]["judge judge"] == "differs: positive"
    assert all(v["judge_tokens"] > 0 for v in report["variants"])  # each variant's judges, counted for it
    assert not (project / "tools" / "AUTHORITY.md").read_text().count("positive']")  # the staging copied, never wrote


async def test_a_failing_call_scores_zero_and_a_bad_variant_is_reported(project, write):
    write("tools/label.evals.yaml", yaml.safe_dump({"cases": [{"args": {}, "expected": "x"}]}))  # no text: invalid
    report = await run(project, Variant("base"), Variant("odd", "--set $x=1", {"$order": 5}))
    base, odd = report["variants"]
    (case,) = base["cases"]
    assert case["score"] == 0.0 and case["output"] is None
    assert case["error"].startswith("ArgsValidationError") and "'text'" in case["error"]
    assert base["score"] == 0.0
    assert odd["score"] is None and odd["error"] is not None


def test_variants_are_parsed_with_clear_errors(tmp_path):
    (tmp_path / "a.md").write_text("---\n---\n")
    found = parse_variant(f"v=--set model=openai:gpt-4o --set n=3 --path {tmp_path} --authority={tmp_path / 'a.md'}")
    assert found.overrides == {"model": "openai:gpt-4o", "n": 3}
    assert found.paths == (tmp_path,) and found.authority == tmp_path / "a.md"
    assert parse_variant("plain=") == Variant("plain")
    for bad, words in [
        ("--set x=1", "NAME=OPTIONS"),
        ("v=--sett x=1", "did you mean '--set'"),
        ("v=--set", "--set needs a value"),
        ("v=--set novalue", "not key=value"),
        ("v=--path /no/such/folder", "not a folder"),
        ("v=--authority /no/such.md", "not a file"),
    ]:
        with pytest.raises(ConfigurationError, match=words):
            parse_variant(bad)
    with pytest.raises(ConfigurationError, match="two variants are named 'a'"):
        run_variants(["a=", "a=--set x=1"])
    assert run_variants([]) == [Variant("base")]


async def test_an_authority_variant_refuses_a_tool_that_names_its_authority(project, write, tmp_path):
    write("authorities/house.md", front({"metadata": {"model": CAREFUL}}))
    write("tools/label.md", front({"authority": "house", "metadata": {"params": {"type": "object"}}}) + "L\n")
    write("cheap.md", front({"metadata": {"model": CARELESS}}))
    report = await run(project, Variant("base"), parse_variant(f"cheap=--authority {tmp_path / 'cheap.md'}"))
    base, cheap = report["variants"]
    assert base["score"] == 1.0
    assert cheap["score"] is None and "names its authority ('house')" in cheap["error"]


async def test_a_judge_that_is_no_tool_is_refused_before_any_case_runs(project, write, tmp_path):
    cases = {"cases": [{"name": "one", "args": {"text": "x"}, "scorers": [{"judge": "juge"}]}]}
    write("tools/label.evals.yaml", yaml.safe_dump(cases))
    log = tmp_path / "runs.db"
    with pytest.raises(ConfigurationError, match="case 'one': the judge is no tool") as info:
        await run(project, Variant("base"), log=log)
    assert "judge" in str(info.value) and info.value.line == 2
    assert RunLog(log).runs(None) == []  # nothing ran
