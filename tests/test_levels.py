"""Levels beside the folders (issue 30): the user's, a checkout's local one, and a managed one nobody can loosen.

managed (with ``$locked``) < user < the project's folder authorities < a folder's local file < the tool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import ConfigurationError, Manager, SecurityError
from orchestrator.cli import cli

pytestmark = pytest.mark.anyio

TONE = "async def main(ctx):\n    return ctx.meta.get('tone')\n"


@pytest.fixture
def placed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The user's config folder and the managed file, both empty to start with."""
    user = tmp_path / "config"
    managed = tmp_path / "etc" / "AUTHORITY.md"
    monkeypatch.setenv("TOOLCASCADE_CONFIG", str(user))
    monkeypatch.setenv("TOOLCASCADE_MANAGED", str(managed))
    return user, managed


def authority(path: Path, metadata: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("---\n" + json.dumps({"metadata": metadata}) + "\n---\n", encoding="utf-8")


async def test_the_user_level_sits_below_every_folder_of_the_project(write, tools, placed):
    user, _managed = placed
    authority(user / "AUTHORITY.md", {"tone": "warm", "model": "scripted"})
    write("tools/team/say.py", TONE)
    manager = Manager([tools])
    assert await manager.invoke("team/say") == "warm"
    authority(tools / "team" / "AUTHORITY.md", {"tone": "plain"})
    manager.refresh()
    assert await manager.invoke("team/say") == "plain"
    levels = {k.key: k for k in manager.explain("team/say").keys}
    assert levels["model"].level == "user" and levels["tone"].level == "team/AUTHORITY.md"


async def test_a_local_file_is_merged_right_above_its_folders_authority(write, tools, placed):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  tone: plain\n---\n")
    write("tools/AUTHORITY.local.md", "---\nmetadata:\n  tone: mine\n---\n")
    write("tools/say.py", TONE)
    write("tools/loud.py", "frontmatter = {'metadata': {'tone': 'LOUD'}}\n" + TONE)
    manager = Manager([tools])
    assert await manager.invoke("say") == "mine"
    assert await manager.invoke("loud") == "LOUD"  # the tool itself stays above every authority
    explained = manager.explain("say")
    assert {k.key: k.level for k in explained.keys}["tone"] == "AUTHORITY.md (local)"


async def test_a_managed_lock_holds_against_every_level_and_every_caller(write, tools, placed):
    _user, managed = placed
    authority(managed, {"tone": "corporate", "$locked": ["tone"]})
    write("tools/say.py", TONE)
    write("tools/alone.py", "frontmatter = {'metadata': {'$inherit': False}}\n" + TONE)
    manager = Manager([tools])
    assert await manager.invoke("say") == "corporate"
    assert await manager.invoke("alone") == "corporate"  # $inherit: false leaves authorities, not the managed level
    with pytest.raises((ConfigurationError, SecurityError)):
        await manager.invoke("say", overrides={"tone": "casual"})
    write("tools/AUTHORITY.md", "---\nmetadata:\n  tone: casual\n---\n")
    manager.refresh()
    with pytest.raises(ConfigurationError, match="tone"):
        await manager.invoke("say")


def test_show_names_each_level_with_its_file(write, tools, placed, monkeypatch):
    user, _managed = placed
    authority(user / "AUTHORITY.md", {"tone": "warm"})
    write("tools/say.py", TONE)
    monkeypatch.chdir(tools.parent)
    out = CliRunner().invoke(cli, ["show", "say", "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert ["user", "authority"] in shown["levels"] and shown["files"]["user"] == str(user / "AUTHORITY.md")
    plain = CliRunner().invoke(cli, ["show", "say"], env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and str(user / "AUTHORITY.md") in plain.output.replace("\n", "")


def test_a_local_authority_is_never_a_tool(write, tools, placed):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  tone: plain\n---\n")
    write("tools/AUTHORITY.local.md", "---\ndescription: this checkout's settings\nmetadata:\n  tone: mine\n---\n")
    write("tools/say.py", TONE)
    assert [info.ref for info in Manager([tools]).list_tools()] == ["say"]
