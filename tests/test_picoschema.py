"""Picoschema, Dotprompt's schema shorthand, for ``params`` and ``returns`` (issue 30).

The forms and the JSON Schema each one means follow Dotprompt's published
examples; JSON Schema stays accepted and is never read as shorthand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import ArgsValidationError, ConfigurationError, InterpolationError, Manager, ReturnsValidationError
from orchestrator.cli import cli
from orchestrator.picoschema import Unreadable, expand, is_shorthand
from orchestrator.schema import check, json_schema, object_schema


def pico(text: str) -> Any:
    return expand(yaml.safe_load(text))


# -- the forms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("string", {"type": "string"}),
        ("integer", {"type": "integer"}),
        ("null", {"type": "null"}),
        ("number, the description", {"type": "number", "description": "the description"}),
        ("number,the description", {"type": "number", "description": "the description"}),
        ("number,    the description", {"type": "number", "description": "the description"}),
        ("number, a, b, and c", {"type": "number", "description": "a, b, and c"}),
        ("any", {}),
        ("any, anything goes", {"description": "anything goes"}),
    ],
)
def test_a_type_with_or_without_a_description(text: str, want: dict[str, Any]) -> None:
    assert expand(text) == want


def test_an_object_requires_its_properties_and_allows_no_others() -> None:
    assert pico("field1: boolean\nfield2: string") == {
        "type": "object",
        "properties": {"field1": {"type": "boolean"}, "field2": {"type": "string"}},
        "required": ["field1", "field2"],
        "additionalProperties": False,
    }


def test_a_question_mark_makes_a_property_optional_and_nullable() -> None:
    assert pico("req: string, required field\nnonreq?: boolean, optional field") == {
        "type": "object",
        "properties": {
            "req": {"type": "string", "description": "required field"},
            "nonreq": {"type": ["boolean", "null"], "description": "optional field"},
        },
        "required": ["req"],
        "additionalProperties": False,
    }


def test_nested_objects() -> None:
    assert pico("user:\n  name: string\n  contact:\n    email: string\n    phone?: string") == {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "contact": {
                        "type": "object",
                        "properties": {"email": {"type": "string"}, "phone": {"type": ["string", "null"]}},
                        "required": ["email"],
                        "additionalProperties": False,
                    },
                },
                "required": ["name", "contact"],
                "additionalProperties": False,
            }
        },
        "required": ["user"],
        "additionalProperties": False,
    }


def test_arrays_with_and_without_descriptions() -> None:
    assert pico("tags(array, list of tags): string, the tag\nvector(array): number") == {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "description": "list of tags",
                "items": {"type": "string", "description": "the tag"},
            },
            "vector": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["tags", "vector"],
        "additionalProperties": False,
    }


def test_objects_in_an_array_and_out() -> None:
    text = "obj?(object, a nested object):\n  nest1?: string\narr(array, array of objects):\n  nest2?: boolean"
    assert pico(text) == {
        "type": "object",
        "properties": {
            "obj": {
                "type": ["object", "null"],
                "description": "a nested object",
                "properties": {"nest1": {"type": ["string", "null"]}},
                "additionalProperties": False,
            },
            "arr": {
                "type": "array",
                "description": "array of objects",
                "items": {
                    "type": "object",
                    "properties": {"nest2": {"type": ["boolean", "null"]}},
                    "additionalProperties": False,
                },
            },
        },
        "required": ["arr"],
        "additionalProperties": False,
    }


def test_enums_and_an_optional_enum_allows_null() -> None:
    assert pico("status(enum): [ACTIVE, INACTIVE]") == {
        "type": "object",
        "properties": {"status": {"enum": ["ACTIVE", "INACTIVE"]}},
        "required": ["status"],
        "additionalProperties": False,
    }
    assert pico("color?(enum, the enum): [RED, BLUE, GREEN]") == {
        "type": "object",
        "properties": {"color": {"description": "the enum", "enum": ["RED", "BLUE", "GREEN", None]}},
        "additionalProperties": False,
    }


def test_any_properties() -> None:
    assert pico("first: any\nsecond?: any, could be anything") == {
        "type": "object",
        "properties": {"first": {}, "second": {"description": "could be anything"}},
        "required": ["first"],
        "additionalProperties": False,
    }


def test_a_wildcard_gives_the_schema_of_every_other_property() -> None:
    assert pico("otherField: string, another string\n(*): any, whatever you want") == {
        "type": "object",
        "properties": {"otherField": {"type": "string", "description": "another string"}},
        "required": ["otherField"],
        "additionalProperties": {"description": "whatever you want"},
    }
    assert pico("(*): number, lucky number") == {
        "type": "object",
        "properties": {},
        "additionalProperties": {"type": "number", "description": "lucky number"},
    }


# -- JSON Schema is never misread ---------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "string", "format": "email"},
        {"type": ["string", "null"]},
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        {"properties": {"foo": {"type": "string"}}},
        {"properties": {}},
        {"description": "'provider:name' or a mapping"},
        {"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}},
        {"enum": ["a", "b"]},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"items": {"type": "string"}},
        {"minimum": 0},
        {"const": 3},
        {"not": {}},
        {"additionalProperties": False},
        {"title": "A person", "description": "who is asked"},
    ],
)
def test_json_schema_is_returned_as_it_is(schema: dict[str, Any]) -> None:
    assert not is_shorthand(schema)
    assert expand(schema) is schema
    assert json_schema(schema) is schema


def test_true_false_and_none_are_not_shorthand() -> None:
    assert json_schema(True) is True and json_schema(False) is False and json_schema(None) is None


def test_a_property_named_like_a_keyword_is_shorthand_unless_its_value_has_the_keywords_form() -> None:
    assert pico("title: string\ndescription: string, what it is\nrequired: boolean")["required"] == [
        "title",
        "description",
        "required",
    ]
    assert pico("properties:\n  name: string")["properties"]["properties"]["type"] == "object"
    assert pico("type: string, the kind")["properties"]["type"] == {"type": "string", "description": "the kind"}


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "trail", "said"),
    [
        ("strin", (), "did you mean 'string'"),
        ("user:\n  age: integr", ("user", "age"), "did you mean 'integer'"),
        ("tags(aray): string", ("tags(aray)",), "did you mean 'array'"),
        ("tags(array: string", ("tags(array",), "without closing"),
        ("colors: [red, blue]", ("colors",), "(enum)"),
        ("color(enum): red", ("color(enum)",), "(enum) takes a list"),
        ("user:\n  count: 3", ("user", "count"), "no type"),
        ("?: string", ("?",), "no property name"),
    ],
)
def test_a_malformed_shorthand_says_where_and_what_to_write(text: str, trail: tuple[str, ...], said: str) -> None:
    with pytest.raises(Unreadable) as caught:
        expand(yaml.safe_load(text))
    assert caught.value.trail == trail
    assert said in caught.value.message


def test_json_schema_mixed_with_shorthand_keys_is_an_error() -> None:
    with pytest.raises(Unreadable, match="mixes JSON Schema keywords with shorthand"):
        expand({"type": "object", "name?": "string"})


# -- every reader goes through json_schema ------------------------------------------


def test_the_expansion_is_made_once_per_schema_object() -> None:
    schema = {"name": "string"}
    assert json_schema(schema) is json_schema(schema)


def test_checks_defaults_and_tool_definitions_read_the_shorthand() -> None:
    schema = {"name": "string", "age?": "integer"}
    check(schema, {"name": "Ada", "age": None}, ArgsValidationError)
    with pytest.raises(ArgsValidationError) as caught:
        check(schema, {"name": 3, "extra": 1}, ArgsValidationError)
    assert [pointer for pointer, _ in caught.value.errors] == ["", "/name"]
    wire, wrapped = object_schema(json_schema(schema))
    assert not wrapped and wire["properties"]["name"] == {"type": "string"} and wire["required"] == ["name"]
    assert object_schema(json_schema("string")) == (
        {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]},
        True,
    )


SHORTHAND_TOOL = """\
---
description: Greets a person.
metadata:
  params:
    name: string, who to greet
    times?: integer, how many times
    mood?(enum): [happy, grumpy]
---
Hello, {{ args.name }}{% if args.get('times') %} x{{ args.times }}{% endif %}!
"""


@pytest.fixture
def greet(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "greet.md").write_text(SHORTHAND_TOOL, encoding="utf-8")
    return folder


@pytest.mark.anyio
async def test_shorthand_params_are_checked_through_invoke(greet: Path) -> None:
    manager = Manager([greet])
    assert await manager.invoke("greet", {"name": "Ada", "times": 2, "mood": None}) == "Hello, Ada x2!"
    with pytest.raises(ArgsValidationError) as caught:
        await manager.invoke("greet", {"name": 5, "mood": "sad", "nmae": "x"})
    pointers = [pointer for pointer, _ in caught.value.errors]
    assert pointers == ["", "/mood", "/name"]  # the misspelt key is refused: additionalProperties is false
    with pytest.raises(ArgsValidationError):
        await manager.invoke("greet", {})


def test_shorthand_params_are_checked_through_the_cli(greet: Path) -> None:
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    good = runner.invoke(cli, ["run", "greet", '{"name": "Ada"}', "--path", str(greet)])
    assert good.exit_code == 0, good.output
    assert "Hello, Ada!" in good.output
    bad = runner.invoke(cli, ["run", "greet", '{"name": 1}', "--path", str(greet)])
    assert bad.exit_code == 1
    assert "/name" in bad.output and "ArgsValidationError" in bad.output


def test_list_mcp_and_agents_see_the_expanded_schema(greet: Path) -> None:
    manager = Manager([greet])
    params = manager.describe("greet").params
    assert params["type"] == "object" and params["required"] == ["name"]
    assert params["properties"]["mood"] == {"enum": ["happy", "grumpy", None]}
    [info] = [i for i in manager.list_tools() if i.name == "greet"]
    assert info.params == params


@pytest.mark.anyio
async def test_shorthand_returns_are_checked(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "answer.py").write_text(
        'frontmatter = {"metadata": {"returns": {"answer": "string", "score?": "number"}}}\n\n'
        "def main(ctx):\n    return ctx.args\n",
        encoding="utf-8",
    )
    manager = Manager([folder])
    assert await manager.invoke("answer", {"answer": "yes", "score": 0.5}) == {"answer": "yes", "score": 0.5}
    with pytest.raises(ReturnsValidationError) as caught:
        await manager.invoke("answer", {"answer": 1})
    assert [pointer for pointer, _ in caught.value.errors] == ["/answer"]


@pytest.mark.anyio
async def test_a_malformed_shorthand_names_the_tool_file_line_and_key(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "ask.md").write_text(
        "---\nmetadata:\n  params:\n    user:\n      name: string\n      age: integr\n---\nHi.\n", encoding="utf-8"
    )
    with pytest.raises(ConfigurationError) as caught:
        await Manager([folder]).invoke("ask", {"user": {"name": "Ada", "age": 3}})
    error = caught.value
    assert error.tool == "ask" and error.key == "params.user.age" and error.line == 6
    assert error.path == str(folder / "ask.md")
    assert "did you mean 'integer'" in str(error)
    assert json.dumps(error.detail)  # one line of text


@pytest.mark.anyio
async def test_a_misspelt_read_is_matched_against_the_shorthands_properties(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "post.md").write_text("---\nmetadata:\n  params:\n    title?: string\n---\n{{ args.titel }}\n")
    with pytest.raises(InterpolationError, match="did you mean 'args.title'"):
        await Manager([folder]).invoke("post", {})


def test_a_misspelt_type_under_a_property_named_like_an_annotation_is_still_shorthand() -> None:
    with pytest.raises(Unreadable, match="did you mean 'string'"):
        expand({"title": "strin, the title"})
    assert not is_shorthand({"title": "Person", "description": "who is asked, and why"})


def test_a_misspelt_json_schema_type_stays_json_schema() -> None:
    assert not is_shorthand({"type": "strng"})
    with pytest.raises(ConfigurationError, match="invalid JSON schema"):
        check({"type": "strng"}, "x", ArgsValidationError)


def test_the_mcp_listing_serves_the_expanded_schema(greet: Path) -> None:
    from orchestrator.listings import Listings

    [served] = [s for s in Listings(Manager([greet])).listing().values() if s.ref == "greet"]
    assert not served.wrapped and served.schema["required"] == ["name"]
    assert served.schema["properties"]["name"] == {"type": "string", "description": "who to greet"}
    assert served.schema["additionalProperties"] is False


@pytest.mark.anyio
async def test_an_agent_offers_the_expanded_schema_to_its_model(greet: Path) -> None:
    (greet / "probe.py").write_text(
        "from orchestrator.agent.toolset import offered_tools\n\n"
        'frontmatter = {"metadata": {"tools": ["greet"]}}\n\n'
        "def main(ctx):\n"
        '    return [t["parameters"] for t in offered_tools(ctx, ctx.owner, frozenset({"greet"})) if t["ref"] == "greet"]\n',
        encoding="utf-8",
    )
    [parameters] = await Manager([greet]).invoke("probe")
    assert parameters["properties"]["times"] == {"type": ["integer", "null"], "description": "how many times"}
    assert parameters["required"] == ["name"]


def test_schema_problems_reports_each_malformed_shorthand_for_check(tmp_path: Path) -> None:
    from orchestrator.schema import schema_problems

    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "two.md").write_text(
        "---\nmetadata:\n  params:\n    when(aray): string\n  returns:\n    ok: bolean\n---\nx\n", encoding="utf-8"
    )
    (folder / "fine.md").write_text("---\nmetadata:\n  params: {name: string}\n---\nx\n", encoding="utf-8")
    manager = Manager([folder])
    found = schema_problems(manager.find_tool("two"))
    assert [(p.key, p.line) for p in found] == [("params.when(aray)", 4), ("returns.ok", 6)]
    assert "did you mean 'array'" in found[0].detail and "did you mean 'boolean'" in found[1].detail
    assert schema_problems(manager.find_tool("fine")) == []
