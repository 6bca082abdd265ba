"""Issue 24, a first listing's CPU: each folder's nearest authority is looked up once per listing, not per tool.

Every tool of a folder without an ``authority:`` of its own has the same
nearest ``AUTHORITY.md``; a listing asks ``Authorities.find`` for the first
and gives the rest its answer, with the files it depended on joining each
tool's row (so an edit to the authority is seen in every row).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cache_helpers import tools_asked

import orchestrator.authorities as authorities_module
from orchestrator import Manager
from orchestrator.descriptions import planned

Write = Callable[[str, str], Path]


def front(data: dict[str, object], body: str = "Say hi.") -> str:
    return f"---\n{yaml.safe_dump(data, sort_keys=False)}---\n{body}\n"


def authority(properties: dict[str, object]) -> str:
    return front({"metadata": {"params": {"type": "object", "properties": properties}, "$merge": {"params": "deep"}}})


@pytest.fixture
def finds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools whose nearest authority was looked up from now on, by name."""
    return tools_asked(monkeypatch, authorities_module.Authorities, "find")


@pytest.fixture
def tools(write: Write, tmp_path: Path) -> Path:
    write("tools/team/AUTHORITY.md", authority({"team": {"type": "string"}}))
    for n in range(4):
        write(f"tools/team/t{n}.md", front({"description": f"Tool {n}."}))
    write("tools/team/named.md", front({"authority": "strict", "description": "Names its authority."}))
    write("authorities/strict.md", authority({"strict": {"type": "string"}}))
    write("tools/top.md", front({"description": "At the top."}))
    write("tools/other/AUTHORITY.md", authority({"other": {"type": "integer"}}))
    write("tools/other/o.md", front({"description": "Other."}))
    write("tools/top2.md", front({"description": "At the top too."}))
    return tmp_path / "tools"


def params_of(manager: Manager) -> dict[str, object]:
    return {info.ref: info.params for info in manager.list_tools(hidden=True) if info.path is not None}


def test_a_listing_looks_up_each_folders_authority_once(tools: Path, finds: list[str]) -> None:
    manager = Manager([tools], watch_builtins=True)
    listed = params_of(manager)
    assert [name for name in finds if name in ("t0", "t1", "t2", "t3")] == ["t0"], finds  # one lookup for the folder
    assert [name for name in finds if name in ("top", "top2")] == ["top"], finds  # the top folder's too
    assert finds.count("named") == 1  # a tool naming its authority is looked up itself
    for n in range(4):
        assert listed[f"team/t{n}"] == {"type": "object", "properties": {"team": {"type": "string"}}}
    assert listed["team/named"] == {"type": "object", "properties": {"strict": {"type": "string"}}}
    assert listed["other/o"] == {"type": "object", "properties": {"other": {"type": "integer"}}}
    for ref in listed:  # each row is what the tool's full plan gives
        assert manager.describe(ref) == planned(manager, ref, manager.paths)


def test_an_edited_authority_changes_every_row_of_its_folder(tools: Path, write: Write) -> None:
    manager = Manager([tools], watch_builtins=True)
    params_of(manager)
    write("tools/team/AUTHORITY.md", authority({"renamed": {"type": "boolean"}}))
    manager.clear_cache()  # the edit may share the first write's second: dropped caches read every file again
    listed = params_of(manager)
    for n in range(4):
        assert listed[f"team/t{n}"] == {"type": "object", "properties": {"renamed": {"type": "boolean"}}}, n
