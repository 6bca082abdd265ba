"""A markdown tool run again does only the work of the call (issue 11, point 4).

What a prompt's directives make of it, a schema's validator and whether it
declares defaults are worked out once; each call renders, validates and
runs its directive tools. These tests count that work rather than time it.
"""

from __future__ import annotations

import json

import pytest
from freshness_helpers import refresh

from orchestrator import ArgsValidationError, Manager, prompt, schema
from orchestrator.schema import fill_defaults

pytestmark = pytest.mark.anyio

PAGE = "---\nmetadata:\n  greeting: 'Hi {{ args.name }}'\n---\n{{ meta.greeting }}: :stamp[a] :stamp[b]\n"
STAMP = "async def main(ctx):\n    return '<' + ctx.args['label'] + '>'\n"


async def test_a_prompts_directives_are_laid_out_once_per_text(write, tools):
    write("tools/page.md", PAGE)
    write("tools/stamp.py", STAMP)
    manager = Manager([tools])
    assert await manager.invoke("page", {"name": "Ada"}) == "Hi Ada: <a> <b>"
    laid_out, runners = prompt._layout.cache_info().misses, prompt._runner.cache_info().misses
    for name in ("Bob", "Cy", "Di"):
        assert await manager.invoke("page", {"name": name}) == f"Hi {name}: <a> <b>"
    assert prompt._layout.cache_info().misses == laid_out
    assert prompt._runner.cache_info().misses == runners  # each directive's entry function is made once, not per call


async def test_a_directive_whose_tool_appears_later_runs_from_then_on(write, tools):
    write("tools/page.md", "---\n---\nA :stamp[x] B\n")
    manager = Manager([tools])
    assert await manager.invoke("page") == "A :stamp[x] B"  # names no tool: text, as written
    write("tools/stamp.py", STAMP)
    refresh(manager)
    assert await manager.invoke("page") == "A <x> B"
    (tools / "stamp.py").unlink()
    refresh(manager)
    assert await manager.invoke("page") == "A :stamp[x] B"


async def test_a_schema_two_tools_share_is_compiled_once_and_then_found_by_identity(write, tools, monkeypatch):
    params = "  params: {type: object, properties: {n: {type: integer}}, required: [n]}\n"
    write("tools/one.md", "---\nmetadata:\n" + params + "---\none {{ args.n }}\n")
    write("tools/two.md", "---\nmetadata:\n" + params + "  label: '{{ args.n }}'\n---\ntwo {{ meta.label }}\n")
    manager = Manager([tools])
    assert await manager.invoke("one", {"n": 1}) == "one 1"
    assert await manager.invoke("two", {"n": 2}) == "two 2"
    dumped: list[object] = []
    real = json.dumps
    monkeypatch.setattr(schema.json, "dumps", lambda value, **kw: dumped.append(value) or real(value, **kw))
    for n in range(3):
        assert await manager.invoke("one", {"n": n}) == f"one {n}"
        assert await manager.invoke("two", {"n": n}) == f"two {n}"
    assert dumped == []  # no schema is turned into text again to find its validator
    with pytest.raises(ArgsValidationError, match="/n"):
        await manager.invoke("two", {"n": "x"})


def test_fill_defaults_returns_the_value_itself_when_the_schema_declares_no_default():
    plain = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    args = {"a": {"b": "x"}}
    assert fill_defaults(plain, args) is args


def test_fill_defaults_fills_nested_defaults_into_a_new_object():
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"default": 1}}}}}
    args: dict[str, object] = {"a": {}}
    filled = fill_defaults(nested, args)
    assert filled == {"a": {"b": 1}}
    assert args == {"a": {}}  # the caller's args are untouched
    assert fill_defaults({"default": 5}, None) == 5


async def test_params_defaults_reach_the_tool_and_templates_on_every_call(write, tools):
    write(
        "tools/hello.md",
        "---\nmetadata:\n  params: {type: object, properties: {who: {type: string, default: you}}}\n"
        "  line: 'Hello {{ args.who }}'\n---\n{{ meta.line }} / {{ args.who }}\n",
    )
    manager = Manager([tools])
    for _ in range(2):
        assert await manager.invoke("hello", {}) == "Hello you / you"
        assert await manager.invoke("hello", {"who": "Ada"}) == "Hello Ada / Ada"
