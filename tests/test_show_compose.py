"""`show` explains issue 30's composition: the partials a tool uses, its shorthand schemas, its instruction files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli


def show(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.chdir(folder)
    out = CliRunner().invoke(cli, ["show", *args], env={"COLUMNS": "250", "NO_COLOR": "1"})
    assert out.exit_code == 0, out.output
    return out.output


def test_show_lists_each_partial_with_its_file_and_a_missing_one_with_why(write, tmp_path, monkeypatch):
    write("tools/shared/persona.jinja", "You are kind.")
    write("tools/page.md", '---\ndescription: x\n---\n{% include "shared/persona" %}\n{% include "shared/persna" %}\n')
    text = show(tmp_path, monkeypatch, "page")
    assert f"partial 'shared/persona' in prompt:4: {tmp_path / 'tools' / 'shared' / 'persona.jinja'}" in text
    assert "partial 'shared/persna' in prompt:5: not found" in text and "did you mean 'shared/persona'" in text
    data = json.loads(show(tmp_path, monkeypatch, "page", "--json"))
    assert [(p["name"], p["path"] is None) for p in data["partials"]] == [
        ("shared/persona", False),
        ("shared/persna", True),
    ]


def test_show_prints_a_shorthand_schema_as_the_json_schema_it_means(write, tmp_path, monkeypatch):
    write("tools/post.md", "---\nmetadata:\n  params:\n    title: string\n    draft?: boolean\n---\n{{ args.title }}\n")
    data = json.loads(show(tmp_path, monkeypatch, "post", "--json"))
    assert data["schemas"]["params"]["properties"]["title"] == {"type": "string"}
    assert data["schemas"]["params"]["required"] == ["title"]
    assert "params (shorthand) as JSON Schema" in show(tmp_path, monkeypatch, "post")
    write("tools/plain.md", "---\nmetadata:\n  params: {type: object}\n---\nx\n")
    assert json.loads(show(tmp_path, monkeypatch, "plain", "--json"))["schemas"] == {}


def test_show_agent_args_says_which_instruction_files_apply_and_why(write, tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    write(".github/instructions/python.instructions.md", '---\napplyTo: "**/*.py"\n---\nUse type hints.\n')
    write("src/app.py", "x = 1\n")
    write("src/notes.txt", "n\n")
    write(
        "tools/helper.md",
        "---\nmetadata:\n  model: {provider: scripted, script: [{answer: ok}]}\n  instructions: true\n---\n"
        "Help with {{ args.file }}.\n",
    )
    hit = json.loads(show(tmp_path, monkeypatch, "helper", '{"file": "src/app.py"}', "--json"))["instructions"]
    miss = json.loads(show(tmp_path, monkeypatch, "helper", '{"file": "src/notes.txt"}', "--json"))["instructions"]
    python = ".github/instructions/python.instructions.md"
    assert [(v["file"], v["applied"]) for v in hit] == [(python, True)] and "src/app.py" in hit[0]["reason"]
    assert [(v["file"], v["applied"]) for v in miss] == [(python, False)]
    assert f"instructions {python} (copilot): applied" in show(
        tmp_path, monkeypatch, "helper", '{"file": "src/app.py"}'
    )
