"""No invocation changes what the next one sees, and no override defeats a ``$locked`` entry (R-INV-4, R-CHAIN-5)."""

from __future__ import annotations

import copy
import json
import pickle

import anyio
import pytest
from mcp import Client

from orchestrator import ArgsValidationError, Manager, SecurityError
from orchestrator.frozen import FrozenDict, FrozenList, freeze, thaw
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

MUTATOR = """
frontmatter = {"metadata": {"params": {"type": "object"}}}

def attempts(ctx):
    target = ctx.target
    yield "entry args list", lambda: ctx.args["seen"].append(target.args.get("name"))
    yield "entry args key", lambda: ctx.args.__setitem__("extra", 1)
    yield "meta nested", lambda: target.meta["params"]["properties"].__setitem__("evil", {})
    yield "meta list", lambda: target.meta["tags"].append("evil")
    yield "tool metadata", lambda: target.tool.metadata.__setitem__("tags", [])
    yield "frontmatter", lambda: target.run.origin["frontmatter"]["metadata"].pop("tags")
    yield "setdefault", lambda: target.meta["params"].setdefault("required", []).append("name")
    yield "del", lambda: target.meta["params"].__delitem__("properties")
    yield "sort", lambda: target.meta["tags"].sort()
    yield "iadd", lambda: target.meta["tags"].__iadd__(["x"])

async def main(ctx):
    refused = []
    for what, attempt in attempts(ctx):
        try:
            attempt()
        except TypeError as exc:
            assert "read-only" in str(exc)
            refused.append(what)
    ctx.target.meta["top-level"] = "mine"  # the top level of ctx.meta is this invocation's own
    ctx.target.nonlocals.setdefault("refused", []).append(refused)
    return await ctx.target.manager.next()
"""

TOOL = """
---
metadata:
  params: {type: object, properties: {name: {type: string}}, required: [name]}
  tags: [a, b]
  mutate: {seen: []}
---
{{ args.name }} {{ meta.tags | join(',') }} {{ meta.mutate.seen | length }} {{ meta.get('top-level', 'clean') }}
"""


async def test_a_middleware_that_mutates_everything_leaks_nothing(write, tools):
    write("tools/mutate.py", MUTATOR)
    write("tools/page.md", TOOL)
    manager = Manager([tools])
    box: dict = {}
    first = await manager.invoke("page", {"name": "alice"}, context={"nonlocals": box})
    second = await manager.invoke("page", {"name": "bob"}, context={"nonlocals": box})
    assert first == "alice a,b 0 mine" and second == "bob a,b 0 mine"
    assert box["refused"][0] == box["refused"][1] and len(box["refused"][0]) == 10
    explained = manager.explain("page", {"name": "carol"})
    values = {k.key: k.value for k in explained.keys}
    assert values["mutate"] == {"seen": []} and values["tags"] == ["a", "b"] and "top-level" not in values
    with pytest.raises(ArgsValidationError):
        await manager.invoke("page", {})  # the params schema was not changed either


async def test_concurrent_invocations_see_their_own_values(write, tools):
    write("tools/mutate.py", MUTATOR)
    write("tools/page.md", TOOL)
    manager = Manager([tools])
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        results[i] = await manager.invoke("page", {"name": f"u{i}"})

    async with anyio.create_task_group() as group:
        for i in range(200):
            group.start_soon(one, i)
    assert all(results[i] == f"u{i} a,b 0 mine" for i in range(200))


def test_frozen_containers_behave_as_json_values():
    value = freeze({"a": [1, {"b": 2}], "c": (3, [4])})
    assert isinstance(value, dict) and isinstance(value["a"], list)
    assert type(value) is FrozenDict and type(value["a"]) is FrozenList
    assert json.loads(json.dumps(value)) == {"a": [1, {"b": 2}], "c": [3, [4]]}
    assert freeze(value) is value
    mutable = copy.deepcopy(value)
    mutable["a"].append(5)
    assert type(mutable) is dict and value["a"] == [1, {"b": 2}]
    assert type(copy.copy(value)) is dict and type(pickle.loads(pickle.dumps(value))) is dict
    assert thaw(value) == {"a": [1, {"b": 2}], "c": (3, [4])} and type(thaw(value)["a"]) is list
    assert dict(value) == value and {**value, "d": 1}["d"] == 1


# -- overrides against $locked entries ---------------------------------------------


GREET = """
---
metadata:
  params: {type: object, properties: {name: {type: string}}, required: [name]}
  shout: {}
---
Hello, {{ args.name }}!
"""


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"$remove": ["validate-args"]}, "may not use \\$remove on locked entry 'validate-args'"),
        ({"$static": ["validate-args"]}, "may not use \\$static on locked entry 'validate-args'"),
        ({"$merge": {"validate-returns": "replace"}}, "may not use \\$merge on locked entry 'validate-returns'"),
        ({"$private": ["trust"]}, "may not use \\$private on locked entry 'trust'"),
        ({"$order": {"validate-args": {"after": ["execute"]}}}, "may not use \\$order to move 'validate-args'"),
        ({"$order": {"execute": {"before": ["validate-args"]}}}, "against locked entry 'validate-args'"),
        ({"$order": {"directives": {"before": ["$configure"]}}}, "moves .directives. across locked entry"),
        ({"$order": {"shout": {"after": ["$post-execute"]}}}, "moves 'shout' across locked entry"),
    ],
)
async def test_overrides_cannot_defeat_locked_entries(write, tools, overrides, needle):
    write("tools/shout.py", "async def main(ctx):\n    return str(await ctx.target.manager.next()).upper()\n")
    write("tools/greet.md", GREET)
    manager = Manager([tools])
    with pytest.raises(SecurityError, match=needle):
        await manager.invoke("greet", {}, overrides=overrides)
    with pytest.raises(SecurityError, match=needle):
        manager.explain("greet", {}, overrides=overrides)


async def test_overrides_may_still_steer_unlocked_entries(write, tools):
    write("tools/shout.py", "async def main(ctx):\n    return str(await ctx.target.manager.next()).upper()\n")
    write("tools/tag.py", "async def main(ctx):\n    return str(await ctx.target.manager.next()) + ' (tagged)'\n")
    write("tools/greet.md", GREET.replace("  shout: {}\n", "  shout: {}\n  tag: {}\n"))
    manager = Manager([tools])
    assert await manager.invoke("greet", {"name": "Ada"}) == "HELLO, ADA! (TAGGED)"
    assert await manager.invoke("greet", {"name": "Ada"}, overrides={"$remove": ["shout"]}) == "Hello, Ada! (tagged)"
    assert await manager.invoke("greet", {"name": "Ada"}, overrides={"$static": ["tag"]}) == "HELLO, ADA!"
    swapped = {"$order": {"shout": {"after": ["tag"]}}}  # moves among unlocked entries only
    assert await manager.invoke("greet", {"name": "Ada"}, overrides=swapped) == "HELLO, ADA! (tagged)"


async def test_mcp_callers_with_overrides_allowed_still_cannot_touch_locks(write, tools):
    write("tools/greet.md", GREET.replace("  shout: {}\n", ""))
    async with Client(build_server(Manager([tools]), allow_overrides=True)) as client:
        plain = await client.call_tool("greet", {"name": "Ada", "$overrides": {"greeting": "hi"}})
        results = [
            await client.call_tool("greet", {"$overrides": {"$remove": ["validate-args"]}}),
            await client.call_tool("greet", {"$overrides": {"$order": {"execute": {"before": ["$configure"]}}}}),
            await client.call_tool("greet", {"name": "Ada", "$overrides": {"model": "scripted"}}),
            await client.call_tool("greet", {"name": "Ada", "$overrides": {"paths": ["/"]}}),
        ]
    assert not plain.is_error
    assert all(r.is_error for r in results)
    texts = [r.content[0].text for r in results]
    assert "may not carry $remove" in texts[0] and "may not carry $order" in texts[1]
    assert "'model': it is an engine setting" in texts[2]
    assert "may not add middleware 'paths'" in texts[3]
