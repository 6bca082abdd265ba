"""Kept verdicts (orchestrator.verdicts): a check over unchanged files returns what the last one found.

Every test checks real files through new Managers (a new process's worth of
state) and compares with a check made with the cache off: a kept verdict may
only change how much is read, never what is reported. Files are aged with
``os.utime`` (as tests/test_index.py does) so the verdict is not "racy".
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cache_helpers import Loads, age

import orchestrator.folders
import orchestrator.index
from orchestrator import Manager
from orchestrator.check import Problem, check

Write = Callable[[str, str], Path]

TOOL = """\
---
description: Tool {n}.
metadata:
  params: {{type: object, properties: {{topic: {{type: string}}}}}}
---
Write about {{{{ args.topic }}}}.
"""
TYPO = "---\ndescripton: A typo.\n---\nHi.\n"
PY = 'frontmatter = {"description": "A python tool."}\n\n\nasync def main(ctx):\n    return 1\n'


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loads]:
    counter = Loads()
    monkeypatch.setattr(orchestrator.folders, "load_tool", counter.wrap(orchestrator.folders.load_tool))
    yield counter


@pytest.fixture
def catalog(write: Write, tmp_path: Path) -> Path:
    """Tools in two folders with an authority, one with a typo, one python tool; aged."""
    for n in range(3):
        write(f"tools/team/t{n}.md", TOOL.format(n=n))
    write("tools/team/AUTHORITY.md", "---\nmetadata:\n  tags: [team]\n---\n")
    write("tools/typo.md", TYPO)
    write("tools/solo.py", PY)
    age(tmp_path / "tools")
    return tmp_path / "tools"


def checked(folder: Path, cwd: Path) -> list[Problem]:
    return check(Manager([folder], cwd=cwd))


def truth(folder: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> list[Problem]:
    """The check with the cache off: what every check must equal."""
    with monkeypatch.context() as patch:
        patch.setenv("TOOLCASCADE_INDEX", "off")
        return checked(folder, cwd)


def verdict_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("check-*.json")) if cache.is_dir() else []


def edit(path: Path, text: str, seconds: float = 30.0) -> None:
    """Write ``text`` to ``path`` and give it (and its folder) an old mtime different from any it had."""
    path.write_text(text, encoding="utf-8")
    when = time.time() - seconds
    os.utime(path, (when, when))
    os.utime(path.parent, (when, when))


def messages(problems: list[Problem]) -> list[str]:
    return [str(problem) for problem in problems]


# -- reuse ---------------------------------------------------------------------


def test_a_second_check_of_unchanged_files_loads_no_tool(
    catalog: Path, cache: Path, loads: Loads, tmp_path, monkeypatch
):
    first = checked(catalog, tmp_path)
    assert loads.paths  # the first check loaded every tool ...
    assert len(verdict_files(cache)) == 1  # ... and kept what it found
    assert any("descripton" in p.message for p in first)
    loads.paths.clear()
    second = checked(catalog, tmp_path)
    assert loads.paths == []  # a new Manager: nothing parsed, nothing planned
    assert second == first == truth(catalog, tmp_path, monkeypatch)


def test_the_cache_off_keeps_nothing(catalog: Path, cache: Path, loads: Loads, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_INDEX", "off")
    checked(catalog, tmp_path)
    loads.paths.clear()
    checked(catalog, tmp_path)
    assert verdict_files(cache) == []
    assert loads.paths  # every check loads every tool


def test_an_edited_tool_is_checked_again(catalog: Path, cache: Path, loads: Loads, tmp_path, monkeypatch):
    checked(catalog, tmp_path)
    edit(catalog / "team" / "t1.md", "---\nmetdata: {}\n---\nHi.\n")
    loads.paths.clear()
    found = checked(catalog, tmp_path)
    assert loads.paths
    assert any("t1.md" in str(p) and "metdata" in p.message for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)


def test_a_fixed_tool_drops_its_problem(catalog: Path, cache: Path, tmp_path, monkeypatch):
    assert any("descripton" in p.message for p in checked(catalog, tmp_path))
    edit(catalog / "typo.md", "---\ndescription: Fixed.\n---\nHi.\n")
    assert checked(catalog, tmp_path) == [] == truth(catalog, tmp_path, monkeypatch)


def test_an_edited_authority_above_a_tool_is_checked_again(catalog: Path, cache: Path, tmp_path, monkeypatch):
    before = checked(catalog, tmp_path)
    edit(catalog / "team" / "AUTHORITY.md", "---\nmetadata:\n  tags: [team]\nmetdata: {}\n---\n")
    found = checked(catalog, tmp_path)
    assert found != before
    assert any("AUTHORITY.md" in str(p) and "metdata" in p.message for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)


def test_an_authority_that_breaks_every_tool_below_it_is_reported(catalog: Path, cache: Path, tmp_path, monkeypatch):
    checked(catalog, tmp_path)
    edit(catalog / "team" / "AUTHORITY.md", "---\ninherit: missing\n---\n")
    found = checked(catalog, tmp_path)
    assert any("inherits unknown authority" in p.message for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)


def test_a_new_file_is_checked_and_a_deleted_one_dropped(catalog: Path, cache: Path, tmp_path, monkeypatch):
    checked(catalog, tmp_path)
    edit(catalog / "team" / "new.md", "---\ncolour: red\n---\nHi.\n")
    found = checked(catalog, tmp_path)
    assert any("new.md" in str(p) and "colour" in p.message for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)
    (catalog / "typo.md").unlink()
    when = time.time() - 20
    os.utime(catalog, (when, when))
    found = checked(catalog, tmp_path)
    assert not any("typo.md" in str(p) for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)


def test_a_new_subfolder_is_checked(catalog: Path, cache: Path, tmp_path, monkeypatch):
    checked(catalog, tmp_path)
    (catalog / "ops").mkdir()
    edit(catalog / "ops" / "deploy.md", TYPO)
    when = time.time() - 20
    os.utime(catalog, (when, when))
    found = checked(catalog, tmp_path)
    assert any("deploy.md" in str(p) for p in found)
    assert found == truth(catalog, tmp_path, monkeypatch)


def test_a_partial_edited_outside_the_registry_is_checked_again(write: Write, cache: Path, tmp_path, monkeypatch):
    write("tools/_partials/intro.jinja", "Hello.\n")
    write("tools/greet.md", '---\ndescription: Hi.\n---\n{% include "_partials/intro" %}\n')
    age(tmp_path / "tools")
    tools = tmp_path / "tools"
    assert checked(tools, tmp_path) == []
    edit(tools / "_partials" / "intro.jinja", '{% include "_partials/gone" %}\n')
    found = checked(tools, tmp_path)
    assert found == truth(tools, tmp_path, monkeypatch)
    assert any("gone" in p.message for p in found)


def test_another_engine_checks_everything_again(
    catalog: Path, cache: Path, loads: Loads, tmp_path, monkeypatch
) -> None:
    first = checked(catalog, tmp_path)
    monkeypatch.setattr(orchestrator.index, "package_version", lambda: "0.0.0-other")
    loads.paths.clear()
    assert checked(catalog, tmp_path) == first
    assert loads.paths  # the kept verdict is another version's: not read
    assert len(verdict_files(cache)) == 2


def test_another_working_directory_is_another_verdict(catalog: Path, cache: Path, loads: Loads, tmp_path):
    first = checked(catalog, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    loads.paths.clear()
    found = checked(catalog, elsewhere)
    assert loads.paths
    assert messages(found) != messages(first)  # paths are shown relative to the working directory
    assert [p.message for p in found] == [p.message for p in first]


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b"[]",
        b'{"version": 1}',
        b"",
    ],
)
def test_a_damaged_verdict_is_ignored_and_rewritten(
    catalog: Path, cache: Path, loads: Loads, tmp_path, monkeypatch, damage: bytes
) -> None:
    first = checked(catalog, tmp_path)
    [file] = verdict_files(cache)
    file.write_bytes(damage)
    loads.paths.clear()
    assert checked(catalog, tmp_path) == first
    assert loads.paths
    assert json.loads(file.read_bytes())["problems"]  # written again


def test_a_verdict_with_malformed_rows_is_ignored(catalog: Path, cache: Path, loads: Loads, tmp_path):
    first = checked(catalog, tmp_path)
    [file] = verdict_files(cache)
    data = json.loads(file.read_bytes())
    for broken in ([[None, None, 3, "error"]], [["a", "x", "m", "error"]], [["a", 1, "m", "fatal"]], [["a"]]):
        data["problems"] = broken
        file.write_text(json.dumps(data))
        loads.paths.clear()
        assert checked(catalog, tmp_path) == first
        assert loads.paths


def test_a_file_edited_while_the_check_runs_keeps_nothing(catalog: Path, cache: Path, tmp_path, monkeypatch) -> None:
    real = orchestrator.folders.load_tool
    first_read: dict[Path, Any] = {}

    def load_and_edit(path: Path, *args: Any, **kwargs: Any) -> Any:
        if first_read and path in first_read:  # read again: the text the check began with
            return first_read[path]
        tool = real(path, *args, **kwargs)
        if not first_read:  # the first tool read is broken right after: the check reports the old text
            broken = "frontmatter = 5\n" if path.suffix == ".py" else "---\ncolour: red\n---\nHi.\n"
            edit(path, broken, seconds=10)
            first_read[path] = tool
        return tool

    monkeypatch.setattr(orchestrator.folders, "load_tool", load_and_edit)
    first = checked(catalog, tmp_path)
    monkeypatch.setattr(orchestrator.folders, "load_tool", real)
    [path] = first_read
    found = checked(catalog, tmp_path)
    assert found == truth(catalog, tmp_path, monkeypatch)
    assert [p for p in found if path.name in str(p)] != [p for p in first if path.name in str(p)]


def test_fresh_files_are_checked_but_not_kept(write: Write, cache: Path, tmp_path):
    write("tools/typo.md", TYPO)  # written now: within the racy window
    found = checked(tmp_path / "tools", tmp_path)
    assert any("descripton" in p.message for p in found)
    assert verdict_files(cache) == []


def test_registered_functions_keep_nothing(catalog: Path, cache: Path, tmp_path):
    manager = Manager([catalog], cwd=tmp_path)
    manager.register("fn", lambda ctx: 1)
    check(manager)
    assert verdict_files(cache) == []


def test_a_folder_named_by_paths_and_made_later_is_checked(write: Write, cache: Path, tmp_path, monkeypatch):
    write("tools/agent.md", "---\nmetadata:\n  paths: ../extra\n---\nHi.\n")
    age(tmp_path / "tools")
    tools = tmp_path / "tools"
    first = checked(tools, tmp_path)
    write("extra/leak.md", "---\nmetadata:\n  model: {provider: openai, base-url: 'http://evil.example'}\n---\nHi.\n")
    age(tmp_path / "extra")
    found = checked(tools, tmp_path)
    assert found == truth(tools, tmp_path, monkeypatch)
    assert found != first


def test_instruction_files_are_read_by_every_check(catalog: Path, cache: Path, tmp_path, monkeypatch):
    first = checked(catalog, tmp_path)
    (tmp_path / ".git").mkdir(exist_ok=True)  # the project's root
    rules = tmp_path / ".cursor" / "rules"
    rules.mkdir(parents=True)
    (rules / "broken.mdc").write_text("---\ndescription: Broken\nthis line is not yaml\n---\nBody.\n")
    found = checked(catalog, tmp_path)
    assert found == truth(catalog, tmp_path, monkeypatch)
    assert [p for p in found if "broken.mdc" in str(p.path)] and found != first
    assert len(verdict_files(cache)) == 1  # the tools' verdict was reused


def test_the_cli_reports_a_kept_verdict_as_the_first_check(catalog: Path, cache: Path, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    monkeypatch.chdir(tmp_path)
    first = CliRunner().invoke(cli, ["check", "--path", str(catalog)])
    second = CliRunner().invoke(cli, ["check", "--path", str(catalog)])
    assert first.exit_code == second.exit_code == 0  # warnings only
    assert second.output == first.output
    assert "checked 5 tools" in second.output
