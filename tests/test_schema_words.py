"""Validation errors in our own words for the common failures, whatever jsonschema release is installed (issue 25)."""

from __future__ import annotations

import pytest

from orchestrator import ArgsValidationError
from orchestrator.schema import check

SCHEMA = {
    "type": "object",
    "required": ["title", "tone", "n"],
    "properties": {
        "title": {"type": "string"},
        "n": {"type": ["integer", "null"]},
        "tone": {"enum": ["warm", "dry"]},
        "tags": {"type": "array"},
        "count": {"minimum": 1},
    },
}


def failures(value: object) -> list[tuple[str, str]]:
    with pytest.raises(ArgsValidationError) as caught:
        check(SCHEMA, value, ArgsValidationError, tool="t")
    return caught.value.errors


def test_a_wrong_type_a_missing_property_and_a_value_not_allowed_read_in_our_words():
    assert failures({"title": 3, "tone": "loud", "n": "x", "tags": {}}) == [
        ("/n", '"x" is not an integer or null'),
        ("/tags", "{} is not a list"),
        ("/title", "3 is not a string"),
        ("/tone", '"loud" is not one of "warm", "dry"'),
    ]
    # Every missing property in one line, however many jsonschema reports.
    assert failures({"title": "x"}) == [("", "missing required properties 'tone', 'n'")]
    assert failures({"title": "x", "tone": "dry"}) == [("", "missing required property 'n'")]


def test_a_long_value_is_cut_and_other_failures_keep_a_message():
    [(where, said)] = failures({"title": ["x" * 500], "tone": "dry", "n": 1})
    assert where == "/title" and said.endswith("… is not a string") and len(said) < 100
    [(where, said)] = failures({"title": "x", "tone": "dry", "n": 1, "count": 0})
    assert where == "/count" and said  # jsonschema's own message: not asserted here
