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
    tags = ["a", "b", 1, None]
    kept = freeze(tags)
    tags.append("c")  # the caller's own list: what was frozen is a copy
    assert type(kept) is FrozenList and kept == ["a", "b", 1, None]


def test_a_tools_own_annotation_that_names_nothing_is_still_reported(write: Any, tools: Path) -> None:
    write("tools/plain.md", "---\nmetadata: {tone: dry}\n---\nx\n")
    write("tools/typo.md", "---\nmetadata:\n  tone: dry\n  $static: [tnoe]\n---\nx\n")
    problems = [(Path(p.path).name, p.message) for p in check(Manager([tools])) if "$static names" in p.message]
    assert len(problems) == 1 and problems[0][0] == "typo.md" and "'tnoe'" in problems[0][1]


def verdicts_of(manager: Manager, ref: str) -> dict[str, tuple[bool, str]]:
    tool = manager.registry.find(ref, manager.paths)
    found = manager.planner.toolkeys(tool, plan_of(manager, ref).raw, manager.paths)
    return {v.key: (v.middleware, v.why) for v in found}


def test_tools_with_the_same_keys_still_get_their_own_verdicts(write: Any, tools: Path) -> None:
    """The tools share one key shape; the usual verdicts serve those that neither name themselves nor are in a
    cycle with a key's tool, and each of the others gets its own."""
    write("tools/b.md", "---\nmetadata: {a: {}}\n---\nx\n")  # a -> b -> a: a cycle
    write("tools/a.md", "---\nmetadata: {b: {}}\n---\nx\n")
    write("tools/c.md", "---\nmetadata: {b: {}}\n---\nx\n")
    write("tools/d.md", "---\nmetadata: {b: {}}\n---\nx\n")
    manager = Manager([tools])
    assert verdicts_of(manager, "c")["b"] == verdicts_of(manager, "d")["b"] == (True, "names a tool (tools/b.md)")
    assert verdicts_of(manager, "a")["b"] == (False, "auto-static: b is in a dependency cycle with a")
    assert verdicts_of(manager, "c")["b"] == (True, "names a tool (tools/b.md)")
    write("tools/e.md", "---\nmetadata: {e: 1, b: {}}\n---\nx\n")
    write("tools/f.md", "---\nmetadata: {e: 1, b: {}}\n---\nx\n")
    manager = Manager([tools])
    assert verdicts_of(manager, "f")["e"] == (True, "names a tool (tools/e.md)")
    assert verdicts_of(manager, "e")["e"] == (False, "self-reference")
    assert verdicts_of(manager, "f")["e"] == (True, "names a tool (tools/e.md)")


def test_a_dynamic_key_naming_no_tool_is_each_tools_error(write: Any, tools: Path) -> None:
    write("tools/AUTHORITY.md", "---\nmetadata: {ghost: 1, $dynamic: [ghost]}\n---\n")
    write("tools/one.md", "x\n")
    write("tools/two.md", "x\n")
    manager = Manager([tools])
    for ref in ("one", "two"):
        with pytest.raises(ConfigurationError) as info:
            verdicts_of(manager, ref)
        assert info.value.tool == ref and info.value.key == "ghost"


def test_a_tools_static_keys_follow_its_authorities_and_its_own(write: Any, tools: Path) -> None:
    """R-CAS-8's key set: the levels' keys in order of first appearance, less ``$static`` and ``$remove``."""
    write("tools/AUTHORITY.md", "---\nmetadata: {tone: dry, tools: [x], model: m}\n---\n")
    write("tools/plain.md", "---\nmetadata: {tone: wet, extra: 1, tools: [y], zeta: 2}\n---\nx\n")
    write("tools/noted.md", "---\nmetadata: {extra: 1, $remove: [tone], $static: [extra]}\n---\nx\n")
    manager = Manager([tools])
    plan = plan_of(manager, "plain")
    static = {name for level in plan.levels for name in level.annotations.get("$static", ())}
    assert "tools" in static  # the default authority lists it
    every = dict.fromkeys(key for level in plan.levels for key in level.data)
    assert plan.keys == tuple(key for key in every if key not in static)
    assert plan.keys[-2:] == ("extra", "zeta") and plan.keys.index("tone") < plan.keys.index("model")
    noted = plan_of(manager, "noted").keys
    assert "tone" not in noted and "extra" not in noted and "model" in noted


def test_plan_once_is_the_plan_and_names_its_files(write: Any, tmp_path: Path) -> None:
    """A check's plan of a tool is what ``plan`` makes, its files join the run's (the kept verdict stats them),
    and a plan cached already is the one served."""
    write("proj/tools/AUTHORITY.md", "---\nname: top\nmetadata: {owner: top}\n---\n")
    path = write("proj/tools/a.md", "---\nmetadata: {tone: dry}\n---\nx\n")
    manager = Manager([tmp_path / "proj/tools"])
    tool = manager.registry.find("a", manager.paths)
    checked: set[str] = set()
    once = manager.planner.plan_once(tool, manager.paths, checked)
    assert {str(path), str(tmp_path / "proj/tools/AUTHORITY.md")} <= checked
    kept = manager.planner.plan(tool, manager.paths)
    assert once is not kept and once.raw.values == kept.raw.values and once.levels == kept.levels
    assert once.keys == kept.keys and once.authorities == kept.authorities == ("default", "top")
    assert manager.planner.plan_once(tool, manager.paths, set()) is kept


def test_each_folders_tools_get_their_authorities_phases_and_names(write: Any, tmp_path: Path) -> None:
    write("proj/tools/AUTHORITY.md", "---\nname: top\nphases: [$first, $execute, $last]\n---\n")
    write("proj/tools/sub/AUTHORITY.md", "---\nname: sub\nmetadata: {tone: dry}\n---\n")
    write("proj/tools/other/AUTHORITY.md", "---\nname: other\nphases: [$only, $execute]\n---\n")
    for ref in ("a", "sub/b", "sub/c", "other/d"):
        write(f"proj/tools/{ref}.md", "x\n")
    write("proj/tools/sub/alone.md", "---\nmetadata: {$inherit: false, tone: wet}\n---\nx\n")
    manager = Manager([tmp_path / "proj/tools"])
    plans = {ref: plan_of(manager, ref) for ref in ("a", "sub/b", "sub/c", "other/d", "sub/alone")}
    assert plans["a"].phases == plans["sub/b"].phases == plans["sub/c"].phases == ("$first", "$execute", "$last")
    assert plans["other/d"].phases == ("$only", "$execute")
    assert plans["sub/b"].authorities == plans["sub/c"].authorities == ("default", "top", "sub")
    assert plans["sub/alone"].authorities == () and [lv.kind for lv in plans["sub/alone"].levels] == ["tool"]
    assert plans["sub/c"].raw.values["tone"] == "dry" and plans["sub/alone"].raw.values == {"tone": "wet"}
