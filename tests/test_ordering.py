"""Entries, phases and the stable topological sort (R-CHAIN-1..3)."""

from __future__ import annotations

import pytest

from orchestrator import ConfigurationError, Entry, Manager, OrderCycleError
from orchestrator.authorities import DEFAULT_PHASES
from orchestrator.ordering import _sorted_indexes, entry_from_spec, extra_specs, sort_entries


def order(*entries: Entry, phases=DEFAULT_PHASES) -> list[str]:
    return [e.name for e in sort_entries(list(entries), phases)]


def test_r_chain_1_entries_from_toolkeys_with_order_or_default(write, tools):
    write("tools/m1.md", "x\n")
    write("tools/m2.md", "x\n")
    write(
        "tools/t.md",
        "---\nmetadata: {m1: {a: 1}, m2: 2, $order: {m2: {before: [m1]}}, $inherit: false}\n---\nx\n",
    )
    chain = Manager([tools]).explain("t").chain
    assert [(e.name, e.args, e.before, e.after) for e in chain] == [
        ("m2", 2, ("m1",), ()),
        ("m1", {"a": 1}, (), ()),
    ]


def test_r_chain_1_entry_defaults_and_json_round_trip():
    entry = Entry("log")
    assert (entry.args, entry.before, entry.after, entry.remove, entry.fn) == (None, (), (), False, None)
    spec = {"name": "x", "args": {"a": [1]}, "before": ["y"], "after": "$configure", "remove": False}
    made = entry_from_spec(None, spec, "test")
    assert made.to_dict() == {"name": "x", "args": {"a": [1]}, "before": ["y"], "after": ["$configure"]}


def test_r_chain_2_sentinels_order_and_never_appear():
    got = order(
        Entry("post", after=("$post-execute",)),
        Entry("pre", after=("$pre-execute",), before=("$execute",)),
        Entry("conf"),
        Entry("exec", after=("$execute",), before=("$post-execute",)),
    )
    assert got == ["conf", "pre", "exec", "post"]


def test_r_chain_2_custom_phases_and_unknown_sentinel_anchor():
    phases = ("$configure", "$audit", "$execute")
    got = order(
        Entry("run", after=("$execute",)),
        Entry("audit", after=("$audit",), before=("$execute",)),
        Entry("early", before=("$custom",)),
        Entry("late", after=("$custom",)),
        phases=phases,
    )
    assert got.index("audit") < got.index("run")
    assert got.index("early") < got.index("late")


def test_r_chain_3_after_m2_stays_in_the_configure_phase():
    got = order(
        Entry("m1"),
        Entry("m2"),
        Entry("x", after=("m2",)),
        Entry("m3"),
        Entry("exec", after=("$execute",)),
    )
    assert got == ["m1", "m2", "x", "m3", "exec"]


def test_r_chain_3_after_execute_goes_right_after_execute():
    got = order(
        Entry("exec", after=("$execute",), before=("$post-execute",)),
        Entry("post", after=("$post-execute",)),
        Entry("x", after=("exec",)),
        Entry("conf"),
    )
    assert got == ["conf", "exec", "x", "post"]


def test_r_chain_3_insertion_order_breaks_ties_and_is_stable():
    entries = [Entry(f"m{i}") for i in range(10)]
    assert order(*entries) == [f"m{i}" for i in range(10)]
    assert order(*entries) == order(*entries)


def test_r_chain_3_constraints_on_absent_entries_are_ignored():
    assert order(Entry("a", before=("ghost",)), Entry("b", after=("ghost", "a"))) == ["a", "b"]


def test_r_chain_3_cycle_lists_the_cycle():
    with pytest.raises(OrderCycleError) as info:
        order(Entry("a", before=("b",)), Entry("b", before=("c",)), Entry("c", before=("a",)))
    assert sorted(info.value.cycle) == ["a", "b", "c"]
    assert isinstance(info.value, ConfigurationError)
    assert " -> " in str(info.value)


def test_r_chain_3_cycle_through_a_phase(write, tools):
    write("tools/m.md", "x\n")
    write("tools/t.md", "---\nmetadata: {m: 1, $order: {m: {after: [execute], before: [$configure]}}}\n---\nx\n")
    with pytest.raises(OrderCycleError) as info:
        Manager([tools]).invoke_sync("t")
    assert info.value.tool == "t"
    assert "m" in info.value.cycle


def test_r_chain_3_sorted_chains_are_cached(write, tools):
    write("tools/t.py", "def main(ctx):\n    return 1\n")
    manager = Manager([tools])
    manager.invoke_sync("t")
    before = _sorted_indexes.cache_info()
    for _ in range(5):
        manager.invoke_sync("t")
    after = _sorted_indexes.cache_info()
    assert after.misses == before.misses and after.hits == before.hits  # served from the per-tool chain cache


@pytest.mark.parametrize(
    "spec",
    [{"name": "$configure"}, {"name": "x", "times": 3}, {"name": "x", "before": 3}, {"name": "x", "fn": "nope"}, "x"],
)
def test_r_chain_4_malformed_specs_are_refused(spec):
    with pytest.raises(ConfigurationError):
        entry_from_spec(None, spec, "test")


def test_r_chain_1_malformed_order_names_the_tool(write, tools):
    write("tools/m.md", "x\n")
    write("tools/t.md", "---\nmetadata: {m: 1, $order: {m: {before: 3}}}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="before of 'm' must be a name") as info:
        Manager([tools]).invoke_sync("t")
    assert (info.value.tool, info.value.key) == ("t", "$order")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (
            5,
            r"must be a mapping or a list: a middleware spec is \{args: ..., before: \[...\], after: \[...\], "
            r"remove: true\} or a list of such with name; got int",
        ),
        ("x", "must be a mapping or a list"),
        ({"m": 5}, r"middleware 'm' from test: a middleware spec is .*; got 5"),
        ({"m": [1]}, r"a middleware spec is .*; got \[1\]"),
        ({"m": {"before": 3}}, "before must be a name or a list of names, not 3"),
        ({"m": {"after": [1, "x"]}}, r"after must be a name or a list of names, not \[1, 'x'\]"),
        ({"m": {"remove": "yes"}}, "'remove' must be true or false, not 'yes'"),
        ({"m": {"remove": True, "times": 3}}, "unknown field"),
        ({"$configure": {}}, "not a '\\$' sentinel"),
        ({"": {}}, "needs a 'name'"),
        ({5: {}}, "names must be strings"),
        ([5], "each list item needs a 'name'"),
        ([{"args": 1}], "each list item needs a 'name'"),
        ([{"name": ["x"]}], "needs a 'name'"),
        ([{"name": "m", "fn": 1}], "'fn' must be callable"),
    ],
)
def test_r_chain_4_bad_extra_middleware_shows_the_accepted_forms(value, needle):
    with pytest.raises(ConfigurationError, match=needle) as info:
        extra_specs(value, "test")
    assert len(str(info.value)) < 400


def test_r_chain_4_good_extra_middleware_in_both_forms():
    fn = lambda ctx, args: None  # noqa: E731
    assert [name for name, _spec, _source in extra_specs({"a": {}, "b": {"remove": True}}, "x")] == ["a", "b"]
    specs = [{"name": "a", "args": [1], "before": "b"}, {"name": "b", "fn": fn, "after": ["$configure"]}]
    assert [name for name, _spec, _source in extra_specs(specs, "x")] == ["a", "b"]
    assert extra_specs(None, "x") == []
