"""The built-in validate-args middleware."""

from __future__ import annotations

import pytest

from orchestrator import ArgsValidationError, ConfigurationError, Manager, SecurityError

pytestmark = pytest.mark.anyio

SCHEMA = """
---
metadata:
  params:
    type: object
    properties:
      name: {type: string}
      age: {type: integer, minimum: 0}
      tags: {type: array, items: {type: string}}
    required: [name]
    additionalProperties: false
---
ok
"""


async def test_validate_args_lists_every_failing_pointer(write, tools):
    write("tools/t.md", SCHEMA)
    manager = Manager([tools])
    assert await manager.invoke("t", {"name": "Ada"}) == "ok"
    with pytest.raises(ArgsValidationError) as info:
        await manager.invoke("t", {"age": -1, "tags": ["a", 2], "extra": 1})
    pointers = [pointer for pointer, _ in info.value.errors]
    assert pointers == ["", "", "/age", "/tags/1"]
    assert info.value.tool == "t"
    assert "/tags/1: " in str(info.value)


async def test_validate_args_bare_type_is_a_schema(write, tools):
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'params': {'type': 'string'}}}\ndef main(ctx):\n    return ctx.args.upper()\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("t", "hi") == "HI"
    with pytest.raises(ArgsValidationError):
        await manager.invoke("t", {"not": "a string"})


async def test_validate_args_invalid_schema_is_a_configuration_error(write, tools):
    write("tools/t.md", "---\nmetadata: {params: {type: nonsense}}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="invalid JSON schema"):
        await Manager([tools]).invoke("t")


async def test_validate_args_validators_are_compiled_once(write, tools):
    from orchestrator import schema

    write("tools/t.md", SCHEMA)
    manager = Manager([tools])
    await manager.invoke("t", {"name": "a"})
    compiled = dict(schema._VALIDATORS)
    await manager.invoke("t", {"name": "b"})
    assert {k: v[1] for k, v in schema._VALIDATORS.items()} == {k: v[1] for k, v in compiled.items()}


async def test_validate_args_is_locked(write, tools):
    write("tools/t.md", SCHEMA)
    with pytest.raises(SecurityError):
        await Manager([tools]).invoke("t", {"$middleware": {"validate-args": {"remove": True}}})


async def test_a_templated_tools_params_are_compiled_once(write, tools, monkeypatch):
    """A level with a template is merged anew on every call; its params schema is still compiled once."""
    import jsonschema

    compiled = []
    original = jsonschema.Draft202012Validator.check_schema.__func__

    def counting(cls, schema, *args, **kwargs):
        compiled.append(schema)
        return original(cls, schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(counting))
    write(
        "tools/tagged.md",
        "---\nmetadata:\n  params: {type: object, properties: {id: {type: integer}}, required: [id]}\n"
        "  tag: 't{{ args.id }}'\n---\n{{ meta.tag }}\n",
    )
    manager = Manager([tools])
    for i in range(5):
        assert await manager.invoke("tagged", {"id": i}) == f"t{i}"
    assert len([s for s in compiled if "id" in s.get("properties", {})]) <= 1
