"""What ``check`` plans for each tool, worked out once per folder: each tool still gets its own authorities.

The tools of a folder share their authorities (``Authorities.governing``: one
cached lookup per folder and named authority), a merge freezes strings without
asking what they are (``frozen.freeze``), and a level without annotations names
nothing (``inspection._check_names``). These pin what each tool gets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from freshness_helpers import eager, refresh

from orchestrator import ConfigurationError, Manager
from orchestrator.check import check
from orchestrator.frozen import FrozenDict, FrozenList, freeze


def plan_of(manager: Manager, ref: str) -> Any:
    tool = manager.registry.find(ref, manager.paths)
    return manager.planner.plan(tool, manager.paths)


def test_the_tools_of_a_folder_each_get_their_own_authorities(write: Any, tmp_path: Path) -> None:
    write("proj/authorities/team.md", "---\nmetadata: {owner: team}\n---\n")
    write("proj/tools/AUTHORITY.md", "---\nname: top\nmetadata: {owner: top}\n---\n")
    write("proj/tools/sub/AUTHORITY.md", "---\nname: sub\nmetadata: {owner: sub}\n---\n")
    for name in ("a", "b"):
        write(f"proj/tools/{name}.md", "x\n")
        write(f"proj/tools/sub/{name}.md", "x\n")
    write("proj/tools/named.md", "---\nauthority: team\n---\nx\n")
    manager = Manager([tmp_path / "proj/tools"])
    owners = {ref: plan_of(manager, ref).raw.values["owner"] for ref in ("a", "b", "sub/a", "sub/b", "named")}
    assert owners == {"a": "top", "b": "top", "sub/a": "sub", "sub/b": "sub", "named": "team"}
    assert plan_of(manager, "sub/b").authorities == ("default", "top", "sub")
    assert plan_of(manager, "named").authorities == ("default", "team")


def test_an_edited_authority_reaches_every_tool_of_its_folder(write: Any, tmp_path: Path) -> None:
    write("proj/tools/AUTHORITY.md", "---\nname: top\nmetadata: {owner: before}\n---\n")
    write("proj/tools/a.md", "x\n")
    write("proj/tools/b.md", "x\n")
    manager = eager(Manager([tmp_path / "proj/tools"]))
    assert [plan_of(manager, ref).raw.values["owner"] for ref in ("a", "b")] == ["before", "before"]
    write("proj/tools/AUTHORITY.md", "---\nname: top\nmetadata: {owner: after, extra: 1}\n---\n")
    refresh(manager)
    assert [plan_of(manager, ref).raw.values["owner"] for ref in ("a", "b")] == ["after", "after"]
    write("proj/tools/sub/AUTHORITY.md", "---\nname: sub\nmetadata: {owner: sub}\n---\n")
    write("proj/tools/sub/c.md", "x\n")
    refresh(manager)
    assert plan_of(manager, "sub/c").raw.values["owner"] == "sub"


def test_an_unknown_authority_is_each_tools_own_error(write: Any, tools: Path) -> None:
    write("tools/fine.md", "x\n")
    write("tools/one.md", "---\nauthority: nowhere\n---\nx\n")
    write("tools/two.md", "---\ndescription: d\nauthority: nowhere\n---\nx\n")
    manager = Manager([tools])
    assert plan_of(manager, "fine").authorities == ("default",)
    for ref, line in (("one", 2), ("two", 3)):
        with pytest.raises(ConfigurationError) as info:
            plan_of(manager, ref)
        assert info.value.tool == ref and info.value.line == line
    found = {(Path(p.path).name, p.line) for p in check(manager) if "unknown authority" in p.message}
    assert found == {("one.md", 2), ("two.md", 3)}


def test_freeze_takes_scalars_as_they_are_and_freezes_containers() -> None:
    class Text(str):
        pass

    text = Text("kept")
    for value in ("s", 1, 1.5, True, None, text):
        assert freeze(value) is value
    frozen = freeze({"a": ["x", {"b": "y"}, (1, ["z"])], "c": text})
    assert type(frozen) is FrozenDict and type(frozen["a"]) is FrozenList and type(frozen["a"][1]) is FrozenDict
    assert type(frozen["a"][2]) is tuple and type(frozen["a"][2][1]) is FrozenList
    assert frozen["c"] is text
    assert freeze(frozen) is frozen


def test_a_tools_own_annotation_that_names_nothing_is_still_reported(write: Any, tools: Path) -> None:
    write("tools/plain.md", "---\nmetadata: {tone: dry}\n---\nx\n")
    write("tools/typo.md", "---\nmetadata:\n  tone: dry\n  $static: [tnoe]\n---\nx\n")
    problems = [(Path(p.path).name, p.message) for p in check(Manager([tools])) if "$static names" in p.message]
    assert len(problems) == 1 and problems[0][0] == "typo.md" and "'tnoe'" in problems[0][1]
