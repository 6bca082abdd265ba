"""What plans and checks of many tools share (issue 24): shared work gives each tool exactly its own answer.

A catalog's tools sit under a few authorities and share their keys, so the
planner merges an authority chain once, finds an authority's chain once and
looks up a key set's tools once, and ``check`` builds a chain shape once.
Each test sets tools up whose answers differ although they share that work.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from freshness_helpers import refresh

from orchestrator import Manager
from orchestrator.cascade import Level, Source, make_level, merge_levels
from orchestrator.check import check
from orchestrator.errors import ConfigurationError
from orchestrator.interpolate import has_templates
from orchestrator.names import names
from orchestrator.prefixes import merge_plain
from orchestrator.typos import NearNames

FOLDER_AUTHORITY = """
---
metadata:
  team: core
  tags: [core]
  $merge: {tags: union}
  $private: [team]
---
"""


def merged(manager: Manager, ref: str) -> dict[str, object]:
    """The tool's merged metadata, templates as written (its plan's)."""
    return dict(manager.planner.plan(manager.registry.find(ref, manager.paths), manager.paths).raw.values)


def test_a_plan_merged_onto_the_shared_authority_merge_equals_one_merge(write, tools):
    write("tools/g/AUTHORITY.md", FOLDER_AUTHORITY)
    write("tools/g/a.md", "---\nmetadata: {tags: [a, core], owner: ann, $remove: [team]}\n---\nA\n")
    write("tools/g/b.md", "---\nmetadata: {tags: [b], params: {type: object}}\n---\nB\n")
    manager = Manager([tools])
    for ref in ("g/a", "g/b"):
        plan = manager.planner.plan(manager.registry.find(ref, manager.paths), manager.paths)
        assert [level.kind for level in plan.levels] == ["authority", "authority", "tool"]
        whole = merge_levels(plan.levels, None, ref)
        assert plan.raw == whole  # values, provenance, order, policies, removals: as one merge gives them
    a = manager.planner.plan(manager.registry.find("g/a", manager.paths), manager.paths).raw
    b = manager.planner.plan(manager.registry.find("g/b", manager.paths), manager.paths).raw
    assert a.values["tags"] == ["core", "a"] and b.values["tags"] == ["core", "b"]
    assert "team" not in a.values and a.removed["team"] == "a"
    assert b.values["team"] == "core" and b.sources["tags"].levels == ("g/AUTHORITY.md", "b")


def test_the_shared_authority_merge_follows_an_edited_authority(write, tools):
    write("tools/g/AUTHORITY.md", FOLDER_AUTHORITY)
    write("tools/g/a.md", "---\nmetadata: {tags: [a]}\n---\nA\n")
    manager = Manager([tools])
    assert merged(manager, "g/a")["tags"] == ["core", "a"]
    write("tools/g/AUTHORITY.md", FOLDER_AUTHORITY.replace("[core]", "[edited, core2]"))
    refresh(manager)
    assert merged(manager, "g/a")["tags"] == ["edited", "core2", "a"]


def test_merge_plain_raises_a_policy_misfit_for_every_tool_that_meets_it(write, tools):
    write("tools/g/AUTHORITY.md", "---\nmetadata: {tags: core, $merge: {tags: union}}\n---\n")
    manager = Manager([tools])
    plans = []
    for name in ("a", "b"):
        write(f"tools/g/{name}.md", "---\nmetadata: {tags: [x]}\n---\nx\n")
        tool = manager.registry.find(f"g/{name}", manager.paths)
        with pytest.raises(ConfigurationError) as info:
            manager.planner.plan(tool, manager.paths)
        plans.append(info.value)
    assert all(error.key == "tags" for error in plans)
    levels = manager.authorities.chain(manager.find_authority("g/a"), manager.paths)
    assert [a.name for a in levels] == ["default", "g/AUTHORITY.md"]
    assert merge_plain((), "x") == merge_levels((), None, "x")


def test_an_authority_chain_is_shared_by_a_folder_and_follows_a_new_parent(write, tools):
    write("tools/team/g/AUTHORITY.md", "---\nmetadata: {owner: g}\n---\n")
    write("tools/team/g/a.md", "A\n")
    write("tools/team/g/b.md", "B\n")
    manager = Manager([tools])
    a, b = (manager.explain(ref).authorities for ref in ("team/g/a", "team/g/b"))
    assert a == b == ("default", "team/g/AUTHORITY.md")
    nearest = manager.find_authority("team/g/a")
    assert manager.authorities.chain(nearest, manager.paths) is manager.authorities.chain(nearest, manager.paths)
    write("tools/team/AUTHORITY.md", "---\nmetadata: {unit: team}\n---\n")
    refresh(manager)
    assert manager.explain("team/g/a").authorities == ("default", "team/AUTHORITY.md", "team/g/AUTHORITY.md")
    assert merged(manager, "team/g/b")["unit"] == "team"


def test_tools_with_the_same_keys_get_their_own_verdicts(write, tools):
    # a and b name each other (a cycle), and each names itself; c names both from outside the cycle.
    for name in ("a", "b", "c"):
        write(f"tools/{name}.md", "---\nmetadata: {a: {}, b: {}, owner: x}\n---\nx\n")
    manager = Manager([tools])

    def verdicts(mgr: Manager, ref: str) -> dict[str, tuple[bool, str]]:
        tool = mgr.registry.find(ref, mgr.paths)
        plan = mgr.planner.plan(tool, mgr.paths)
        found = mgr.planner.toolkeys(tool, plan.raw, mgr.paths)
        return {v.key: (v.middleware, v.why) for v in found if v.key in ("a", "b", "owner")}

    shared = {ref: verdicts(manager, ref) for ref in ("c", "a", "b")}
    assert shared["a"]["a"] == (False, "self-reference")
    assert shared["a"]["b"] == (False, "auto-static: b is in a dependency cycle with a")
    assert shared["b"]["a"] == (False, "auto-static: a is in a dependency cycle with b")
    assert shared["b"]["b"] == (False, "self-reference")
    assert shared["c"]["a"][0] and shared["c"]["b"][0]
    assert shared["c"]["owner"] == (False, "names no tool")
    for ref in ("a", "b", "c"):  # each as a Manager of its own (nothing shared) finds it
        assert verdicts(Manager([tools]), ref) == shared[ref]


def test_dynamic_key_naming_no_tool_raises_for_each_tool_sharing_the_keys(write, tools):
    for name in ("a", "b"):
        write(f"tools/{name}.md", "---\nmetadata: {ghost: 1, $dynamic: [ghost]}\n---\nx\n")
    manager = Manager([tools])
    for ref in ("a", "b"):
        tool = manager.registry.find(ref, manager.paths)
        plan = manager.planner.plan(tool, manager.paths)
        with pytest.raises(ConfigurationError) as info:
            manager.planner.toolkeys(tool, plan.raw, manager.paths)
        assert info.value.tool == ref and info.value.key == "ghost"


def test_check_reports_an_order_cycle_for_every_tool_whose_chain_shape_has_it(write, tools, tmp_path):
    cycle = "$order: {trust: {after: [execute]}, execute: {after: [trust]}}"
    write("tools/g/AUTHORITY.md", f"---\nmetadata: {{{cycle}}}\n---\n")
    for name in ("a", "b", "c"):
        write(f"tools/g/{name}.md", "---\nmetadata: {owner: x}\n---\nx\n")
    for name in ("d", "e"):
        write(f"tools/{name}.md", "---\nmetadata: {owner: x}\n---\nx\n")  # the default chain: sorts
    problems = check(Manager([tools], cwd=tmp_path))
    cycles = [p for p in problems if "cycle" in p.message]
    assert sorted(p.path.rpartition("/")[2] for p in cycles) == ["a.md", "b.md", "c.md"]
    assert all(f"(tool '{p.path.rpartition('/')[2][0]}')" in p.message for p in cycles)  # each names its own tool


def test_check_reports_bad_middleware_args_for_each_tool_and_passes_templated_ones(write, tools, tmp_path):
    write("tools/mw.py", MIDDLEWARE)
    write("tools/g/AUTHORITY.md", "---\nmetadata: {mw: {times: many}}\n---\n")
    write("tools/g/a.md", "A\n")
    write("tools/g/b.md", "B\n")
    write("tools/t.md", "---\nmetadata: {mw: {times: '{{ args.n }}'}}\n---\nx\n")
    write("tools/u.md", "---\nmetadata: {mw: {times: 'three'}}\n---\nx\n")
    found = [str(p) for p in check(Manager([tools], cwd=tmp_path)) if "fail its params" in p.message]
    assert len(found) == 2  # the authority's shared args once per governed tool's report line, u's own once
    assert sum("AUTHORITY.md" in line for line in found) == 1 and sum("u.md" in line for line in found) == 1


MIDDLEWARE = """
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object", "properties": {"times": {"type": "integer"}}}}}

async def main(ctx):
    return await ctx.target.manager.next()
"""


def test_near_names_answer_a_key_once_and_the_same_each_time():
    near = NearNames(["params", "shout", "paths"])
    first = near.near("parms")
    compared = near.compared
    assert first == ["params"] and near.near("parms") == ["params"]
    assert near.compared == compared  # the second answer compared nothing
    assert near.near("xyzzy") == []


@pytest.mark.parametrize(
    ("value", "templated"),
    [
        ("{{ x }}", True),
        ("{% if x %}y{% endif %}", True),
        ("plain", False),
        ({"a": [1, 2.5, True, None, {"b": "{{ y }}"}]}, True),
        ({"a": [1, 2.5, True, None, {"b": "y"}]}, False),
        (("{{ x }}",), False),  # tuples are not walked: metadata holds lists
        (3, False),
        (None, False),
    ],
)
def test_has_templates_finds_a_template_at_any_depth(value, templated):
    from types import MappingProxyType

    from orchestrator.frozen import freeze

    assert has_templates(value) is templated
    assert has_templates(freeze(value)) is templated
    if isinstance(value, dict):
        assert has_templates(MappingProxyType(value)) is templated  # a Mapping that is no dict


AUTHORITY_WITH_POLICIES = """
---
metadata:
  team: core
  tags: [core]
  limits: {a: 1, deep: {x: 1}}
  list: [one]
  $merge: {tags: union, list: append}
  $remove: [directives]
  $static: [owner]
---
"""


@pytest.mark.parametrize(
    "own",
    [
        "{owner: ann, version: '1.0'}",  # keys the authorities lack
        "{tags: [a, core], list: [two]}",  # merged by the authority's policies
        "{limits: {deep: {y: 2}, b: 2}}",  # a mapping onto the authorities': merged deeply
        "{directives: {mode: 1}, team: own}",  # a key the authority removed, set again; one it set, replaced
        "{}",  # nothing of its own
        "{owner: bob, $remove: [team]}",  # annotations: merged as levels always are
    ],
)
def test_a_tool_level_merged_onto_the_shared_authorities_equals_one_merge(write, tools, own):
    write("tools/g/AUTHORITY.md", AUTHORITY_WITH_POLICIES)
    write("tools/g/a.md", f"---\nmetadata: {own}\n---\nA\n")
    write("tools/g/b.md", "---\nmetadata: {owner: bea, tags: [b]}\n---\nB\n")
    manager = Manager([tools])
    for ref in ("g/b", "g/a"):  # b first: a's merge reuses what b's left shared
        plan = manager.planner.plan(manager.registry.find(ref, manager.paths), manager.paths)
        whole = merge_levels(plan.levels, None, ref)
        assert plan.raw == whole  # values, provenance, order, policies, removals: as one merge gives them
        assert list(plan.raw.values) == list(whole.values) and list(plan.raw.removed) == list(whole.removed)
        assert plan.keys == unshared_static_keys(plan.levels)
    b = manager.planner.plan(manager.registry.find("g/b", manager.paths), manager.paths).raw
    assert b.values["tags"] == ["core", "b"] and b.sources["owner"].levels == ("b",)


def unshared_static_keys(levels: tuple[Level, ...]) -> tuple[str, ...]:
    """R-CAS-8's key set, level by level with nothing shared: the keys left after ``$remove``, minus ``$static``."""
    keys: dict[str, None] = {}
    static: set[str] = set()
    for level in levels:
        for key in names(level.annotations.get("$remove"), "$remove"):
            keys.pop(key, None)
        static = (static | set(names(level.annotations.get("$static"), "$static"))) - set(
            names(level.annotations.get("$dynamic"), "$dynamic")
        )
        keys.update(dict.fromkeys(level.data))
    return tuple(key for key in keys if key not in static)


def test_each_tool_gets_its_own_merged_values_and_provenance(write, tools):
    write("tools/g/AUTHORITY.md", AUTHORITY_WITH_POLICIES)
    write("tools/g/a.md", "---\nmetadata: {owner: ann, limits: {b: 2}, directives: {mode: 1}}\n---\nA\n")
    write("tools/g/b.md", "---\nmetadata: {version: 2, list: [b]}\n---\nB\n")
    manager = Manager([tools])
    a, b = (manager.planner.plan(manager.registry.find(r, manager.paths), manager.paths).raw for r in ("g/a", "g/b"))
    assert a.values["owner"] == "ann" and "owner" not in b.values
    assert a.values["limits"] == {"a": 1, "deep": {"x": 1}, "b": 2} and b.values["limits"] == {"a": 1, "deep": {"x": 1}}
    assert a.values["list"] == ["one"] and b.values["list"] == ["one", "b"]
    assert a.sources["limits"].levels == ("g/AUTHORITY.md", "a") and a.sources["owner"].level == "a"
    assert b.sources["list"] == Source("b", "tool", "append", ("g/AUTHORITY.md", "b"))
    assert a.removed == {} and b.removed == {"directives": "g/AUTHORITY.md"}
    with pytest.raises(TypeError):
        a.values["limits"]["c"] = 3  # merged values are as read-only as one merge leaves them


def test_a_policy_misfit_in_a_tool_level_names_its_own_file_and_line(write, tools):
    write("tools/g/AUTHORITY.md", AUTHORITY_WITH_POLICIES)
    for name in ("a", "b"):
        write(f"tools/g/{name}.md", "---\nmetadata:\n  owner: x\n  list: not-a-list\n---\nx\n")
    manager = Manager([tools])
    for name in ("a", "b"):
        tool = manager.registry.find(f"g/{name}", manager.paths)
        with pytest.raises(ConfigurationError) as info:
            manager.planner.plan(tool, manager.paths)
        assert (info.value.key, info.value.line, info.value.path) == ("list", 4, str(tool.path))


def test_a_level_without_annotations_is_split_as_one_with_them():
    metadata = {"owner": "ann", "params": {"type": "object"}, "note": "{{ args.x }}"}
    level = make_level("t", "tool", metadata, hide_private=True, lines={"owner": 2})
    assert dict(level.data) == metadata and list(level.data) == list(metadata) and level.annotations == {}
    assert level.templates == frozenset({"note"}) and level.templated and level.lines == {"owner": 2}
    hidden = make_level("t", "tool", {**metadata, "$private": ["owner"]}, hide_private=True)
    assert list(hidden.data) == ["params", "note"] and hidden.annotations == {"$private": ["owner"]}
    with pytest.raises(ConfigurationError) as info:
        make_level("t", "tool", {"$privat": ["owner"]}, hide_private=False, lines={"$privat": 3})
    assert info.value.line == 3 and "$private" in str(info.value)


def test_a_near_miss_key_shared_by_tools_is_warned_of_in_each_file_at_its_line(write, tools, tmp_path):
    write("tools/shout.md", "Shout.\n")
    write("tools/g/AUTHORITY.md", "---\nmetadata:\n  shuot: {}\n---\n")
    write("tools/a.md", "---\nmetadata:\n  owner: x\n  shuot: {}\n---\nA\n")
    write("tools/b.md", "---\nmetadata:\n  shuot: {}\n  shout: {}\n---\nB\n")
    write("tools/g/c.md", "---\nmetadata: {shuot: 1}\n---\nC\n")
    problems = check(Manager([tools], cwd=tmp_path))
    near = sorted((p.path, p.line) for p in problems if "'shuot' is not a tool; did you mean 'shout'" in p.message)
    assert near == [("tools/a.md", 4), ("tools/b.md", 3), ("tools/g/AUTHORITY.md", 3), ("tools/g/c.md", 2)]
    assert not [p for p in problems if "'shout' is not a tool" in p.message]  # a tool's name: no warning


AGENT_IMPORTED = """
import sys
from pathlib import Path

from orchestrator import Manager
from orchestrator.check import check

found = check(Manager([Path(sys.argv[1])], cwd=Path(sys.argv[1])))
print(sorted({p.message.partition(",")[0] for p in found}))
print("orchestrator.agent" in sys.modules)
"""


def test_check_imports_the_agent_package_only_for_a_tool_that_names_a_model(write, tools, tmp_path):
    write("tools/a.md", "---\nmetadata: {owner: x}\n---\nHi {{ args.who | default('you') }}.\n")
    env = {**os.environ, "TOOLCASCADE_INDEX": "off"}

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", AGENT_IMPORTED, str(tools)], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert run() == ["[]", "False"]  # nothing in it needs a model's rules: hundreds of ms of imports left out
    write("tools/b.md", "---\nmetadata: {model: sonet}\n---\nHi.\n")
    assert run() == ["[\"model 'sonet' names no model\"]", "True"]
