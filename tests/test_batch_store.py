"""``toolcascade batch --store FILE``: each line's Manager keeps its sessions in that SQLite store.

As ``run --store`` and ``chat --store`` name theirs. Only where the lines run
on this machine's file: the in-process executor. Ray workers (and worker
processes, which open ``$TOOLCASCADE_SESSIONS``) are refused with what to do
instead, before anything starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.sessions import SQLiteStore

TUTOR = """---
description: Remembers what it is told.
metadata:
  params: {type: object, properties: {line: {type: string}}}
  model:
    provider: scripted
    script:
      - Noted.
---
{{ args.line }}
"""


def batch(folder: Path, *extra: str) -> Any:
    command = ["batch", "tutor", str(folder / "args.jsonl"), "-o", str(folder / "out.jsonl")]
    return CliRunner().invoke(cli, [*command, "--path", str(folder / "tools"), "--no-log", *extra])


@pytest.fixture
def folder(write: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLCASCADE_SESSIONS", str(tmp_path / "default.db"))  # where lines go without --store
    write("tools/tutor.md", TUTOR)
    lines = [{"line": f"I am {name}.", "$context": {"session": f"talk-{name}"}} for name in ("ada", "bo", "cy")]
    (tmp_path / "args.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path


def test_each_lines_agent_keeps_its_turns_in_the_store_named(folder: Path) -> None:
    store = folder / "lesson.db"
    done = batch(folder, "--store", str(store))
    assert done.exit_code == 0, done.output
    assert [r["result"] for r in map(json.loads, (folder / "out.jsonl").read_text().splitlines())] == ["Noted."] * 3
    kept = SQLiteStore(store)
    assert sorted(s.id for s in anyio.run(kept.sessions)) == ["talk-ada", "talk-bo", "talk-cy"]
    turns = anyio.run(kept.messages, "talk-bo")
    assert [(m["role"], m["content"]) for m in turns] == [("user", "I am bo."), ("assistant", "Noted.")]
    assert not (folder / "default.db").exists()  # nothing went to the default store


@pytest.mark.parametrize("engine", ["ray", "ray=ray://head:10001", "process"])
def test_a_store_with_an_executor_on_other_processes_is_refused_saying_what_to_do(folder: Path, engine: str) -> None:
    refused = batch(folder, "--store", str(folder / "lesson.db"), "--executor", engine)
    assert refused.exit_code == 1
    assert "ConfigurationError" in refused.stderr and "--store" in refused.stderr
    assert "--executor inprocess" in refused.stderr  # what to do instead
    assert not (folder / "out.jsonl").exists() and not (folder / "lesson.db").exists()
