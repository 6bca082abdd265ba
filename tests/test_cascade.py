"""The metadata cascade (R-CAS-1..9), on real AUTHORITY.md trees and tool files."""

from __future__ import annotations

import json
import os

import pytest
from freshness_helpers import refresh

from orchestrator import ConfigurationError, InterpolationError, Manager, SecurityError

PROBE = "def main(ctx):\n    return dict(ctx.meta)\n"


@pytest.fixture
def tree(write, tmp_path):
    """Three nested authorities below default, each with a private and a public key."""
    write(
        "proj/tools/AUTHORITY.md",
        """
        ---
        name: top
        metadata:
          a-top: top
          p-top: top-private
          shared: top
          $private: [p-top]
        ---
        """,
    )
    write(
        "proj/tools/mid/AUTHORITY.md",
        """
        ---
        name: mid
        metadata:
          a-mid: mid
          p-mid: mid-private
          shared: mid
          $private: [p-mid]
        ---
        """,
    )
    write(
        "proj/tools/mid/low/AUTHORITY.md",
        """
        ---
        name: low
        metadata:
          a-low: low
          p-low: low-private
          shared: low
          $private: [p-low]
        ---
        """,
    )
    write("proj/tools/probe.py", PROBE)
    write("proj/tools/mid/probe.py", PROBE)
    write("proj/tools/mid/low/probe.py", PROBE)
    return Manager([tmp_path / "proj/tools"])


def test_r_cas_1_levels_in_precedence_order(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {k: authority, a: authority}\n---\n")
    write("tools/base.md", "---\nmetadata: {k: inherited, i: inherited}\n---\nx\n")
    write("tools/t.py", "frontmatter = {'metadata': {'$inherit': 'base', 'k': 'own'}}\n" + PROBE)
    manager = Manager([tools])
    meta = manager.invoke_sync("t")
    assert (meta["a"], meta["i"], meta["k"]) == ("authority", "inherited", "own")
    assert manager.invoke_sync("t", overrides={"k": "override"})["k"] == "override"
    explanation = manager.explain("t", overrides={"k": "override"})
    assert explanation.levels == (
        ("default", "authority"),
        ("top", "authority"),
        ("base", "inherit"),
        ("t", "tool"),
    )
    assert explanation.key("k").levels == ("top", "base", "t", "overrides")
    assert explanation.key("k").level_kind == "override"


def test_r_cas_1_inherit_chain_two_deep_root_most_first(write, tools):
    write("tools/grand.md", "---\nmetadata: {g: grand, k: grand}\n---\nx\n")
    write("tools/parent.md", "---\nmetadata: {$inherit: grand, p: parent, k: parent}\n---\nx\n")
    write("tools/t.py", "frontmatter = {'metadata': {'$inherit': ['parent']}}\n" + PROBE)
    manager = Manager([tools])
    meta = manager.invoke_sync("t")
    assert (meta["g"], meta["p"], meta["k"]) == ("grand", "parent", "parent")
    assert [name for name, kind in manager.explain("t").levels if kind == "inherit"] == ["grand", "parent"]


def test_r_cas_1_inherit_false_drops_authorities_and_inherits(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {a: authority}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'$inherit': False, 'own': 1}}\n" + PROBE)
    manager = Manager([tools])
    assert manager.invoke_sync("t") == {"own": 1}
    assert manager.explain("t").chain == ()
    assert manager.explain("t").authorities == ()


def test_r_cas_1_inherit_cycle_and_unknown(write, tools):
    write("tools/a.md", "---\nmetadata: {$inherit: b}\n---\nx\n")
    write("tools/b.md", "---\nmetadata: {$inherit: a}\n---\nx\n")
    write("tools/c.md", "---\nmetadata: {$inherit: ghost}\n---\nx\n")
    manager = Manager([tools])
    with pytest.raises(ConfigurationError, match=r"\$inherit forms a cycle: a -> b -> a"):
        manager.invoke_sync("a")
    with pytest.raises(ConfigurationError, match="'ghost', which is not a tool") as info:
        manager.invoke_sync("c")
    assert info.value.line == 2


def test_r_cas_2_authority_private_keys_reach_only_directly_governed_tools(tree):
    top = tree.invoke_sync("probe")
    mid = tree.invoke_sync("mid/probe")
    low = tree.invoke_sync("mid/low/probe")
    assert top["p-top"] == "top-private"
    assert "p-top" not in mid and "p-top" not in low
    assert mid["p-mid"] == "mid-private" and "p-mid" not in low
    assert low["p-low"] == "low-private"
    assert (top["shared"], mid["shared"], low["shared"]) == ("top", "mid", "low")
    assert (low["a-top"], low["a-mid"], low["a-low"]) == ("top", "mid", "low")


def test_r_cas_2_tool_private_keys_do_not_reach_inheritors(write, tools):
    write("tools/base.md", "---\nmetadata: {public: shown, secret: hidden, $private: [secret]}\n---\nx\n")
    write("tools/base-probe.py", "frontmatter = {'metadata': {'$inherit': 'base'}}\n" + PROBE)
    write("tools/self.py", "frontmatter = {'metadata': {'secret': 's', '$private': ['secret']}}\n" + PROBE)
    manager = Manager([tools])
    meta = manager.invoke_sync("base-probe")
    assert meta["public"] == "shown" and "secret" not in meta
    assert manager.invoke_sync("self")["secret"] == "s"


def test_r_cas_3_interpolation_sees_args_meta_tool_cwd(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {region: eu}\n---\n")
    write(
        "tools/t.py",
        """
frontmatter = {"description": "probe", "metadata": {
    "url": "https://{{ meta.region }}.example/{{ args.city | lower }}",
    "nested": {"list": ["{{ tool.name }}", 1, "{{ tool.description }}"]},
    "where": "{{ cwd }}",
    "plain": "no template {here}",
}}
def main(ctx):
    return dict(ctx.meta)
""",
    )
    meta = Manager([tools], cwd=tools).invoke_sync("t", {"city": "Paris"})
    assert meta["url"] == "https://eu.example/paris"
    assert meta["nested"] == {"list": ["t", 1, "probe"]}
    assert meta["where"] == str(tools.resolve())
    assert meta["plain"] == "no template {here}"


def test_r_cas_3_meta_is_what_lower_levels_merged(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {n: one}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'n': 'two', 'seen': '{{ meta.n }}'}}\n" + PROBE)
    assert Manager([tools]).invoke_sync("t")["seen"] == "one"


def test_r_cas_3_env_only_when_trusted(write, tools, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    write(
        "tools/closed.py",
        "frontmatter = {'metadata': {'v': '{{ env.TOOLCASCADE_SECRET | default(\"none\") }}'}}\n" + PROBE,
    )
    write(
        "tools/open.py",
        "frontmatter = {'metadata': {'trust': {'env': True}, 'v': '{{ env.TOOLCASCADE_SECRET }}'}}\n" + PROBE,
    )
    manager = Manager([tools])
    assert manager.invoke_sync("closed")["v"] == "none"
    assert manager.invoke_sync("open")["v"] == "s3cret"


def test_r_cas_3_env_never_for_tools_from_untrusted_paths(write, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    write(
        "extra/open.md", "---\nmetadata: {trust: {env: true}}\n---\n[{{ env.TOOLCASCADE_SECRET | default('none') }}]\n"
    )
    write(
        "tools/caller.py",
        "frontmatter = {'metadata': {'paths': '../extra'}}\nasync def main(ctx):\n    return await ctx.manager.invoke('open')\n",
    )
    assert Manager([tmp_path / "tools"]).invoke_sync("caller") == "[none]"


def test_r_cas_3_errors_name_tool_level_and_key(write, tools):
    path = write("tools/t.md", "---\nmetadata:\n  ok: 1\n  broken: '{{ args.missing.deeper }}'\n---\nx\n")
    write("tools/syntax.md", "---\nmetadata:\n  bad: '{{ 1 + }}'\n---\nx\n")
    manager = Manager([tools])
    with pytest.raises(InterpolationError) as info:
        manager.invoke_sync("t")
    error = info.value
    assert (error.tool, error.level, error.key, error.path, error.line) == ("t", "t", "broken", str(path), 4)
    assert "undefined" in str(error)
    with pytest.raises(InterpolationError, match="syntax error"):
        manager.invoke_sync("syntax")


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ lipsum.__globals__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ args.__class__ }}",
        "{% set x = meta.update({'pwned': 1}) %}",
    ],
)
def test_r_cas_3_sandbox_refuses_escapes(write, tools, template):
    write("tools/t.py", f"frontmatter = {{'metadata': {{'v': {template!r}}}}}\n" + PROBE)
    with pytest.raises((InterpolationError, SecurityError)) as info:
        Manager([tools]).invoke_sync("t")
    assert info.value.key == "v"


def test_r_cas_3_compiled_templates_are_cached(write, tools):
    from orchestrator.interpolate import compile_template

    write("tools/t.py", "frontmatter = {'metadata': {'v': 'x{{ args.n }}y'}}\n" + PROBE)
    manager = Manager([tools])
    manager.invoke_sync("t", {"n": 1})
    before = compile_template.cache_info()
    assert manager.invoke_sync("t", {"n": 2})["v"] == "x2y"
    after = compile_template.cache_info()
    assert after.misses == before.misses and after.hits > before.hits


def test_r_cas_4_args_are_data_never_templates(write, tools):
    write("tools/t.py", "frontmatter = {'metadata': {'echo': '<{{ args.x }}>'}}\n" + PROBE)
    write("tools/page.md", "---\n---\nYou said: {{ args.x }}\n")
    manager = Manager([tools])
    assert manager.invoke_sync("t", {"x": "{{ 7*7 }}"})["echo"] == "<{{ 7*7 }}>"
    assert manager.invoke_sync("page", {"x": "{{ 7*7 }} {% if true %}yes{% endif %}"}) == (
        "You said: {{ 7*7 }} {% if true %}yes{% endif %}"
    )
    overrides = manager.invoke_sync("t", {"x": 1}, overrides={"o": "{{ 6*7 }}"})
    assert overrides["o"] == "{{ 6*7 }}"


def test_r_cas_4_context_data_is_never_rendered(write, tools):
    write("tools/page.md", "---\n---\nlocal: {{ locals.note }}\n")
    result = Manager([tools]).invoke_sync(
        "page", {"$context": {"locals": {"note": "{{ 7*7 }}", "prompt": "{{ 6*7 }}"}}}
    )
    assert result == "local: {{ 7*7 }}"


@pytest.mark.parametrize(
    ("policy", "low", "high", "expected"),
    [
        ("replace", {"a": 1, "b": 2}, {"a": 9}, {"a": 9}),
        ("deep", {"a": {"x": 1}, "b": 2}, {"a": {"y": 2}}, {"a": {"x": 1, "y": 2}, "b": 2}),
        ("append", [1, 2], [2, 3], [1, 2, 2, 3]),
        ("prepend", [1, 2], [3], [3, 1, 2]),
        ("union", [1, 2], [2, 3], [1, 2, 3]),
    ],
)
def test_r_cas_5_merge_policies(write, tools, policy, low, high, expected):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata:\n  k: " + json.dumps(low) + "\n---\n")
    write("tools/t.py", f"frontmatter = {{'metadata': {{'$merge': {{'k': {policy!r}}}, 'k': {high!r}}}}}\n" + PROBE)
    manager = Manager([tools])
    assert manager.invoke_sync("t")["k"] == expected
    assert manager.explain("t").key("k").policy == policy


def test_r_cas_5_default_merges_mappings_deeply_and_replaces_the_rest(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {m: {a: 1, n: {x: 1}}, l: [1], s: low, z: 1}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'m': {'n': {'y': 2}}, 'l': [2], 's': None}}\n" + PROBE)
    meta = Manager([tools]).invoke_sync("t")
    assert meta["m"] == {"a": 1, "n": {"x": 1, "y": 2}}
    assert meta["l"] == [2]
    assert meta["s"] is None  # an explicit null replaces
    assert meta["z"] == 1


def test_r_cas_5_policy_persists_to_later_levels(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {tags: [a], $merge: {tags: append}}\n---\n")
    write("tools/base.md", "---\nmetadata: {tags: [b]}\n---\nx\n")
    write("tools/t.py", "frontmatter = {'metadata': {'$inherit': 'base', 'tags': ['c']}}\n" + PROBE)
    write(
        "tools/r.py",
        "frontmatter = {'metadata': {'$inherit': 'base', '$merge': {'tags': 'replace'}, 'tags': ['c']}}\n" + PROBE,
    )
    manager = Manager([tools])
    assert manager.invoke_sync("t")["tags"] == ["a", "b", "c"]
    assert manager.invoke_sync("r")["tags"] == ["c"]


@pytest.mark.parametrize(
    ("policy", "value"), [("append", "'x'"), ("union", "{'a': 1}"), ("deep", "[1]"), ("prepend", "3")]
)
def test_r_cas_5_mismatched_policy_is_a_configuration_error(write, tools, policy, value):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {k: [1]}\n---\n")
    write("tools/t.py", f"frontmatter = {{'metadata': {{'$merge': {{'k': {policy!r}}}, 'k': {value}}}}}\n" + PROBE)
    with pytest.raises(ConfigurationError) as info:
        Manager([tools]).invoke_sync("t")
    assert (info.value.level, info.value.key) == ("t", "k")
    assert policy in str(info.value)


def test_r_cas_5_unknown_policy(write, tools):
    write("tools/t.md", "---\nmetadata: {$merge: {k: sideways}, k: 1}\n---\nx\n")
    with pytest.raises(ConfigurationError, match=r"\$merge must map keys"):
        Manager([tools]).invoke_sync("t")


def test_r_cas_6_remove_before_the_level_merges(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {gone: 1, back: {a: 1}}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'$remove': ['gone', 'back'], 'back': {'b': 2}}}\n" + PROBE)
    manager = Manager([tools])
    meta = manager.invoke_sync("t")
    assert "gone" not in meta
    assert meta["back"] == {"b": 2}
    assert manager.explain("t").removed == {"gone": "t"}


def test_r_cas_6_remove_a_default_middleware(write, tools):
    write("tools/t.md", "---\nmetadata: {$remove: [validate-returns]}\n---\nx\n")
    chain = [e.name for e in Manager([tools]).explain("t").chain]
    assert "validate-returns" not in chain and "execute" in chain


def test_r_cas_7_classification(write, tools):
    write("tools/helper.md", "---\n---\nhelp\n")
    write(
        "tools/t.py",
        """
frontmatter = {"metadata": {
    "helper": {"as": "middleware"},
    "execute": "forced data",
    "t": "self",
    "color": "blue",
    "$static": ["execute"],
    "$inherit": False,
}}
def main(ctx):
    return dict(ctx.meta)
""",
    )
    manager = Manager([tools])
    explanation = manager.explain("t")
    verdicts = {k.key: (k.verdict, k.reason) for k in explanation.keys}
    assert verdicts == {
        "helper": ("middleware", "names a tool (tools/helper.md)"),
        "execute": ("data", "listed in $static"),
        "t": ("data", "self-reference"),
        "color": ("data", "names no tool"),
    }
    assert [e.name for e in explanation.chain] == ["helper"]


def test_r_cas_7_meta_holds_data_and_middleware_keys(write, tools):
    write("tools/t.py", "frontmatter = {'metadata': {'params': {'type': 'object'}, 'color': 'blue'}}\n" + PROBE)
    meta = Manager([tools]).invoke_sync("t")
    assert meta["params"] == {"type": "object"} and meta["color"] == "blue"
    assert meta["validate-args"] == {} and not any(k.startswith("$") for k in meta)


def test_r_cas_7_dynamic_must_resolve(write, tools):
    write("tools/t.md", "---\nmetadata: {ghost: 1, $dynamic: [ghost]}\n---\nx\n")
    with pytest.raises(ConfigurationError, match=r"\$dynamic but names no tool") as info:
        Manager([tools]).invoke_sync("t")
    assert info.value.key == "ghost"


@pytest.fixture
def cycle(write, tools):
    for name, nxt in (("a", "b"), ("b", "c"), ("c", "a")):
        write(
            f"tools/{name}.py",
            f"frontmatter = {{'metadata': {{'{nxt}': {{}}}}}}\nasync def main(ctx):\n    return await ctx.target.manager.next() if ctx.target is not ctx else '{name}'\n",
        )
    return Manager([tools])


def test_r_cas_8_three_cycle_is_demoted_to_data(cycle):
    explanation = cycle.explain("a")
    assert explanation.key("b").verdict == "data"
    assert "auto-static" in explanation.key("b").reason
    assert cycle.invoke_sync("a") == "a"


def test_r_cas_8_dynamic_beats_auto_static(write, cycle, tools):
    write(
        "tools/a.py", "frontmatter = {'metadata': {'b': {}, '$dynamic': ['b']}}\nasync def main(ctx):\n    return 'a'\n"
    )
    cycle.clear_cache()
    explanation = cycle.explain("a")
    assert explanation.key("b").verdict == "middleware"
    assert explanation.key("b").reason == "listed in $dynamic"


def test_r_cas_8_edit_that_breaks_the_cycle_is_noticed(write, cycle, tools):
    assert cycle.explain("a").key("b").verdict == "data"
    path = tools / "c.py"
    stat = path.stat()
    path.write_text("frontmatter = {'metadata': {}}\ndef main(ctx):\n    return 'c'\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    refresh(cycle)
    assert cycle.explain("a").key("b").verdict == "middleware"


def test_r_cas_8_only_the_reachable_subgraph_is_parsed(write, tools):
    write("tools/broken.md", "---\nmetadata: [\n---\n")
    write("tools/t.md", "---\nmetadata: {color: blue}\n---\nx\n")
    manager = Manager([tools])
    assert manager.invoke_sync("t") == "x"
    parsed = {path for path, _kind in manager.registry._files}
    assert str(tools / "broken.md") not in parsed


def test_r_cas_8_builtins_never_run_each_other(write, tools):
    manager = Manager([tools])
    explanation = manager.explain("execute")
    assert explanation.chain == ()
    assert all(k.verdict == "data" for k in explanation.keys)


def test_r_cas_9_explain_is_structured_and_json_ready(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {tags: [a], $merge: {tags: union}}\n---\n")
    write("tools/t.md", "---\nmetadata: {tags: [b], log: true, $order: {log: {before: [trust]}}}\n---\nx\n")
    explanation = Manager([tools]).explain("t")
    tags = explanation.key("tags")
    assert (tags.value, tags.level, tags.policy, tags.levels, tags.verdict) == (
        ["a", "b"],
        "t",
        "union",
        ("top", "t"),
        "data",
    )
    assert explanation.key("log").verdict == "middleware"
    assert explanation.authorities == ("default", "top")
    assert [e.name for e in explanation.chain][:2] == ["log", "trust"]
    data = explanation.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["keys"][0]["key"] == "trust"
    assert {"name", "args", "before", "after", "phase", "origin", "locked"} <= set(data["chain"][0])


def test_r_cas_5_policies_persist_into_overrides(write, tools):
    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {tags: [a], $merge: {tags: append}}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'tags': ['b'], 'n': '{{ args.n }}'}}\n" + PROBE)
    manager = Manager([tools])
    assert manager.invoke_sync("t", {"n": 1}, overrides={"tags": ["c"]})["tags"] == ["a", "b", "c"]
    assert manager.explain("t", {"n": 1}, overrides={"tags": ["c"]}).key("tags").policy == "append"


def test_r_cas_3_template_free_levels_are_merged_once(write, tools, monkeypatch):
    from orchestrator import cascade

    write("tools/AUTHORITY.md", "---\nname: top\nmetadata: {a: 1}\n---\n")
    write("tools/t.py", "frontmatter = {'metadata': {'n': '{{ args.n }}'}}\n" + PROBE)
    manager = Manager([tools])
    manager.invoke_sync("t", {"n": 0})
    merged_levels = []
    original = cascade.Merger.add
    monkeypatch.setattr(
        cascade.Merger,
        "add",
        lambda self, level, data=None: merged_levels.append(level.name) or original(self, level, data),
    )
    assert manager.invoke_sync("t", {"n": 5})["n"] == "5"
    assert merged_levels == []  # default, top and t were merged once, with the plan: only t's template renders now


def test_rendering_only_the_templated_keys_merges_as_the_whole_level_would(write, tools):
    """``cascade.rerender`` against ``merge_levels`` on the same plan: values, policies and provenance agree."""
    from functools import partial

    from orchestrator.cascade import merge_levels, rerender
    from orchestrator.interpolate import scope

    write(
        "tools/AUTHORITY.md",
        "---\nname: top\nmetadata:\n  tags: [a]\n  box: {x: 1, y: {z: 1}}\n  $merge: {tags: append}\n---\n",
    )
    write(
        "tools/t.md",
        "---\nmetadata:\n  tags: ['{{ args.n }}']\n  box: {y: {w: '{{ args.n }}'}}\n  plain: {k: 1}\n"
        "  title: 'n={{ args.n }}'\n---\nx\n",
    )
    manager = Manager([tools])
    tool = manager.find_tool("t")
    plan = manager.planner.plan(tool, manager.paths)
    assert len(plan.rest) == 1
    ctx = manager.prepare("t", {"n": 7})
    variables = partial(scope, ctx)
    fast = rerender(plan.raw, plan.base, plan.rest[0], variables, "t")
    full = merge_levels(plan.rest, variables, "t", plan.base)
    assert fast.values == full.values == {**full.values, "tags": ["a", "7"], "title": "n=7"}
    assert fast.values["box"] == {"x": 1, "y": {"z": 1, "w": "7"}}
    assert fast.sources == full.sources and fast.policies == full.policies and fast.locked == full.locked
    assert fast.values["plain"] is plan.raw.values["plain"]  # an untemplated value is not merged again


def test_r_cas_9_errors_never_leave_a_half_updated_cache(write, tools):
    write("tools/t.md", "---\nauthority: house\nmetadata: {k: 1}\n---\nx\n")
    manager = Manager([tools])
    with pytest.raises(ConfigurationError, match="unknown authority 'house'"):
        manager.invoke_sync("t")
    write("authorities/house.md", "---\nmetadata: {h: 2}\n---\n")
    refresh(manager)
    assert manager.explain("t").key("h").value == 2
    write("tools/u.md", "---\nmetadata: {$merge: {tags: append}, tags: oops}\n---\nx\n")
    refresh(manager)
    with pytest.raises(ConfigurationError):
        manager.invoke_sync("u")
    with pytest.raises(ConfigurationError):  # the failure is reported again, not replaced by a stale value
        manager.invoke_sync("u")


def test_r_cas_1_inherit_hint_for_a_sibling_ref(write, tools):
    write("tools/team/base.md", "---\nmetadata: {k: 1}\n---\nx\n")
    write("tools/team/t.md", "---\nmetadata: {$inherit: base}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="did you mean 'team/base'"):
        Manager([tools]).invoke_sync("team/t")


def test_r_cas_9_explain_can_show_templates_as_written(write, tools):
    write("tools/t.md", "---\nmetadata: {greeting: 'Dear {{ args.name }}'}\n---\nx\n")
    manager = Manager([tools])
    with pytest.raises(InterpolationError):
        manager.explain("t")
    assert manager.explain("t", render=False).key("greeting").value == "Dear {{ args.name }}"
    assert manager.explain("t", {"name": "Ada"}).key("greeting").value == "Dear Ada"


@pytest.mark.anyio
async def test_r_tool_6_visibility_is_never_inherited(write, tmp_path):
    write("tools/base.md", "---\nmetadata: {visibility: hidden, color: red}\n---\nbase")
    write(
        "tools/child.md",
        "---\nmetadata: {$inherit: base}\n---\n{{ meta.visibility | default('visible') }} {{ meta.color }}",
    )
    manager = Manager([tmp_path / "tools"])
    assert await manager.invoke("child") == "visible red"
    assert "visibility" not in {k.key for k in manager.explain("child").keys}


def test_rendering_keeps_untemplated_values_as_they_are():
    """Only templated values are rendered: a schema beside a templated key stays the same object (its validator too)."""
    from orchestrator.cascade import make_level, merge_levels

    schema = {"type": "object", "properties": {"who": {"type": "string", "description": "who to greet"}}}
    level = make_level(
        "tool", "tool", {"params": schema, "greeting": "Hi {{ args.who }}", "tags": ["a"]}, hide_private=False
    )
    assert level.templates == frozenset({"greeting"})
    first = merge_levels([level], lambda meta: {"args": {"who": "Ada"}}, "t")
    second = merge_levels([level], lambda meta: {"args": {"who": "Bob"}}, "t")
    assert (first.values["greeting"], second.values["greeting"]) == ("Hi Ada", "Hi Bob")
    assert first.values["params"] is second.values["params"]
    assert first.values["tags"] is second.values["tags"]


@pytest.mark.anyio
async def test_a_templated_middleware_value_is_rendered_for_each_call(write, tools):
    """The sorted chain of a templated plan is reused; each call's entries carry that call's rendered args."""
    write(
        "tools/stamp.py",
        "async def main(ctx):\n    return f\"{ctx.args['label']}:{await ctx.target.manager.next()}\"\n",
    )
    write("tools/page.md", "---\nmetadata:\n  stamp: {label: '{{ args.who }}'}\n---\nbody of {{ args.who }}\n")
    manager = Manager([tools])
    assert await manager.invoke("page", {"who": "Ada"}) == "Ada:body of Ada"
    assert await manager.invoke("page", {"who": "Bob"}) == "Bob:body of Bob"
    assert await manager.invoke("page", {"who": "Ada"}, overrides={"stamp": {"label": "over"}}) == "over:body of Ada"


def test_an_authority_level_is_made_once_per_parsed_file(write, tools, monkeypatch):
    """Every tool under one AUTHORITY.md shares its Level; an edited file gives a new one."""
    from orchestrator import cascade

    made: list[str] = []
    real = cascade.make_level
    monkeypatch.setattr(
        cascade, "make_level", lambda name, kind, *a, **k: made.append(kind) or real(name, kind, *a, **k)
    )
    authority = write("tools/AUTHORITY.md", "---\nmetadata:\n  team: blue\n---\n")
    for i in range(5):
        write(f"tools/t{i}.md", f"---\ndescription: t{i}\n---\nhi\n")
    manager = Manager([tools])
    assert [{k.key: k.value for k in manager.explain(f"t{i}").keys}["team"] for i in range(5)] == ["blue"] * 5
    assert made.count("authority") <= 3  # once per (file, private keys hidden or not), not once per tool
    stat = authority.stat()
    authority.write_text("---\nmetadata:\n  team: green\n---\n", encoding="utf-8")
    os.utime(authority, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    refresh(manager)
    assert {k.key: k.value for k in manager.explain("t0").keys}["team"] == "green"


@pytest.mark.anyio
async def test_a_cycle_is_found_through_the_named_tools_scc_walked_once(write, tools, monkeypatch):
    """Whether a key's tool is in a cycle with the tool is asked of the named tool's SCC: one walk per named tool."""
    from orchestrator import planner

    walks: list[str] = []
    real = planner.reachable_components
    monkeypatch.setattr(planner, "reachable_components", lambda start, *a: walks.append(start.uri) or real(start, *a))
    write("tools/ping.md", "---\nmetadata:\n  pong: {}\n---\nping\n")
    write("tools/pong.md", "---\nmetadata:\n  ping: {}\n---\npong\n")
    for i in range(30):
        write(f"tools/t{i}.md", f"---\ndescription: t{i}\n---\nt{i}\n")
    manager = Manager([tools])
    for i in range(30):
        assert await manager.invoke(f"t{i}") == f"t{i}"
    assert len(walks) < 15  # the built-ins' SCCs, once each; not one walk per tool
    verdicts = {k.key: k.verdict for k in manager.explain("ping").keys}
    assert verdicts["pong"] == "data"  # auto-static: ping and pong name each other
    assert "dependency cycle" in {k.key: k.reason for k in manager.explain("ping").keys}["pong"]
