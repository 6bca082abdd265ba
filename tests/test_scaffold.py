"""``toolcascade init [DIR]`` makes a folder that run, list, show, check and serve work on at once (issue 17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_docs import run_document

from orchestrator import __version__
from orchestrator.cli import cli
from orchestrator.scaffold import FILES, scaffold

STARTER = ["README.md", "tools/AUTHORITY.md", "tools/hello.md", "tools/polish.py"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_init_writes_the_starter_files_and_says_what_next(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = invoke("init", "my-tools")
    assert done.exit_code == 0, done.output
    assert sorted(FILES) == STARTER
    for rel in STARTER:
        assert (tmp_path / "my-tools" / rel).read_text(encoding="utf-8") == FILES[rel]
        assert f"created {Path('my-tools') / rel}" in done.output
    assert done.output.rstrip().endswith('next: cd my-tools && toolcascade run hello \'{"name": "Ada"}\'')


def test_init_folder_works_at_once_with_run_list_show_check(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("init").exit_code == 0  # DIR defaults to here
    assert invoke("run", "hello", '{"name": "Ada"}').output == "Hello, Ada! This is a friendly tool. :)\n"
    removed = invoke("run", "hello", '{"$middleware": {"polish": {"remove": true}}}')
    assert removed.output == "Hello, world! This is a friendly tool.\n"
    listed = json.loads(invoke("list", "--json").output)
    assert [row["name"] for row in listed] == ["hello"]  # polish is role: middleware, hidden from list
    chain = [entry["name"] for entry in json.loads(invoke("show", "hello", "--json").output)["chain"]]
    assert chain.index("validate-args") < chain.index("polish") < chain.index("execute")
    checked = CliRunner().invoke(cli, ["check"])
    assert checked.exit_code == 0 and checked.stderr == ""  # the report goes to stdout
    assert "checked 2 tools in tools: ok" in checked.stdout


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/hello.md").write_text("mine", encoding="utf-8")
    done = CliRunner().invoke(cli, ["init", "."])
    assert done.exit_code == 1
    assert "would overwrite tools/hello.md: pass --force" in done.stderr
    assert "nothing was written" in done.stderr
    assert (tmp_path / "tools/hello.md").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "README.md").exists() and not (tmp_path / "tools/polish.py").exists()


def test_init_force_replaces_starter_files_and_keeps_the_others(tmp_path):
    folder = tmp_path / "kit"
    (folder / "tools").mkdir(parents=True)
    (folder / "tools/hello.md").write_text("mine", encoding="utf-8")
    (folder / "tools/other.md").write_text("other", encoding="utf-8")
    done = invoke("init", str(folder), "--force")
    assert done.exit_code == 0
    assert (folder / "tools/hello.md").read_text(encoding="utf-8") == FILES["tools/hello.md"]
    assert (folder / "tools/other.md").read_text(encoding="utf-8") == "other"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d.write_text("x"), "is not a folder"),
        (lambda d: (d.mkdir(), (d / "tools").write_text("x")), "tools/AUTHORITY.md is in the way"),
        (lambda d: (d.mkdir(), (d / "README.md").mkdir()), "README.md is in the way"),
    ],
)
def test_init_reports_what_is_in_the_way(tmp_path, setup, message):
    folder = tmp_path / "kit"
    setup(folder)
    done = CliRunner().invoke(cli, ["init", str(folder), "--force"])
    assert done.exit_code == 1
    assert done.stderr.startswith(f"error: {folder}: ") and message in done.stderr
    assert "Traceback" not in done.output


def test_init_under_a_file_is_an_error_not_a_traceback(tmp_path):
    (tmp_path / "file").write_text("x")
    done = CliRunner().invoke(cli, ["init", str(tmp_path / "file" / "kit")])
    assert done.exit_code == 1 and "cannot write the starter files" in done.stderr


def test_scaffold_returns_the_paths_it_wrote(tmp_path):
    written = scaffold(tmp_path / "a" / "b")
    assert [p.relative_to(tmp_path / "a" / "b").as_posix() for p in written] == STARTER


def test_the_generated_readme_runs_as_written(tmp_path):
    scaffold(tmp_path)
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert run_document("init README.md", text, tmp_path) == []


@pytest.mark.slow
def test_init_then_run_in_a_subprocess(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    made = subprocess.run(
        [sys.executable, "-m", "orchestrator", "init", "starter"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    ran = subprocess.run(
        ["toolcascade", "run", "hello", '{"name": "Grace"}'],
        cwd=tmp_path / "starter",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "Hello, Grace! This is a friendly tool. :)\n", "")


def test_version_option_prints_the_package_version():
    done = invoke("--version")
    assert done.exit_code == 0 and done.output.startswith("toolcascade") and done.output.split()[-1] == __version__


def test_init_is_listed_in_help_and_has_its_own():
    assert "init" in invoke("--help").output
    assert "toolcascade init my-tools" in invoke("init", "--help").output


def test_init_keeps_a_checkouts_local_authority_out_of_git_once(tmp_path):
    (tmp_path / ".gitignore").write_text("build/", encoding="utf-8")
    scaffold(tmp_path)
    scaffold(tmp_path, force=True)
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines() == ["build/", "AUTHORITY.local.md"]
