"""Issue 24, the first listing's CPU: a listing keeps each tool it parsed as a lookup would, so describing its row
(and any later lookup, such as ``check``'s) finds it at once, and those kept lookups follow edits as any other does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cache_helpers import age

from orchestrator import Manager
from orchestrator.folders import Folders

TOOL = """\
---
description: {what}
metadata:
  params:
    type: object
    properties: {{topic: {{type: string}}}}
---
Write about {{{{ args.topic }}}}.
"""


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    """Two search paths: the first with an empty ``team`` folder, the second with tools in ``team`` and at its top."""
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "team").mkdir(parents=True)
    (second / "team").mkdir(parents=True)
    for n in range(3):
        (second / "team" / f"t{n}.md").write_text(TOOL.format(what=f"second {n}"))
    (second / "top.md").write_text(TOOL.format(what="second top"))
    (second / "named.md").write_text(TOOL.format(what="declared").replace("---\n", "---\nname: alias\n", 1))
    age(first, second)
    return first, second


def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files a registry loads from now on (``Folders.load_format``), each time it asks."""
    seen: list[str] = []
    real = Folders.load_format

    def counted(self: Folders, path: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(path.name)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Folders, "load_format", counted)
    return seen


def test_a_listing_loads_each_file_once_and_later_lookups_find_the_tool_it_listed(
    two: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = Manager(list(two))
    seen = loads(monkeypatch)
    infos = {info.ref: info for info in manager.list_tools() if info.path is not None and "second" in str(info.path)}
    assert sorted(infos) == ["alias", "team/t0", "team/t1", "team/t2", "top"]
    ours = [name for name in seen if name.endswith(".md") and name != "AUTHORITY.md"]
    assert sorted(ours) == sorted(["t0.md", "t1.md", "t2.md", "top.md", "named.md"]), "one load per file, not two"
    del seen[:]
    for ref, info in infos.items():
        tool = manager.registry.find(ref, manager.paths)
        assert tool.path == info.path and tool.description == info.description
    assert seen == [], "a listed tool is found without asking for its file again"


def test_a_tool_added_after_a_listing_to_an_earlier_search_path_takes_its_ref(two: tuple[Path, Path]) -> None:
    first, second = two
    manager = Manager([first, second])
    before = {info.ref: info for info in manager.list_tools()}
    assert before["team/t1"].path == second / "team" / "t1.md"
    assert before["top"].path == second / "top.md"
    (first / "team" / "t1.md").write_text(TOOL.format(what="first t1"))
    (first / "top.md").write_text(TOOL.format(what="first top"))
    manager.refresh()
    assert manager.registry.find("team/t1", manager.paths).description == "first t1"
    assert manager.registry.find("top", manager.paths).description == "first top"
    again = {info.ref: info for info in manager.list_tools()}
    assert again["team/t1"].path == first / "team" / "t1.md"
    assert again["top"].description == "first top"


def test_an_edit_after_a_listing_is_seen_by_the_next_lookup(two: tuple[Path, Path]) -> None:
    first, second = two
    manager = Manager([first, second])
    manager.list_tools()
    (second / "team" / "t2.md").write_text(TOOL.format(what="edited, and longer than before"))
    (second / "named.md").write_text(TOOL.format(what="renamed").replace("---\n", "---\nname: other\n", 1))
    manager.refresh()
    assert manager.registry.find("team/t2", manager.paths).description == "edited, and longer than before"
    assert manager.registry.find("other", manager.paths).description == "renamed"
    refs = {info.ref for info in manager.list_tools()}
    assert "other" in refs and "alias" not in refs


def test_after_a_listing_a_symlink_leaving_the_search_path_is_still_refused(tmp_path: Path) -> None:
    from orchestrator import ToolNotFoundError

    root, outside = tmp_path / "tools", tmp_path / "outside"
    (root / "team").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text(TOOL.format(what="outside"))
    (root / "team" / "inner.md").write_text(TOOL.format(what="inner"))
    (root / "team" / "leak.md").symlink_to(outside / "secret.md")
    (root / "team" / "alias.md").symlink_to(root / "team" / "inner.md")
    age(root, outside)
    manager = Manager([root])
    manager.list_tools()
    with pytest.raises(ToolNotFoundError):
        manager.registry.find("team/leak", manager.paths)
    assert manager.registry.find("team/alias", manager.paths).description == "inner"
    assert manager.registry.find("team/inner", manager.paths).description == "inner"
