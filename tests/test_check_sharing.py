"""What plans and checks of many tools share (issue 24): shared work gives each tool exactly its own answer.

A catalog's tools sit under a few authorities and share their keys, so the
planner merges an authority chain once, finds an authority's chain once and
looks up a key set's tools once, and ``check`` builds a chain shape once.
Each test sets tools up whose answers differ although they share that work.
"""

from __future__ import annotations

import pytest
from freshness_helpers import refresh

from orchestrator import Manager
from orchestrator.cascade import merge_levels, merge_plain
from orchestrator.check import check
from orchestrator.errors import ConfigurationError
from orchestrator.interpolate import has_templates
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
