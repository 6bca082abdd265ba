"""The agent's per-request work on the way to the first token (issue 29): what is remembered, and what never is.

``parse_model`` remembers the spec of a metadata value it parsed, but a value
changed in place, a different alias table or a bare alias word is parsed
again; every caller gets its own dict. ``bounded`` and ``keeping`` (the
one ``Setting`` class, entered around every model request) restore the
value set before, also when the block fails (``keeping``'s clients:
tests/test_model_clients.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator import ConfigurationError
from orchestrator.agent import parse_model
from orchestrator.agent.answer import Answer, bounded
from orchestrator.agent.clients import keeping
from orchestrator.agent.protocol import Setting


def test_a_spec_parsed_again_is_equal_and_a_dict_of_its_own():
    value = {"provider": "openai", "name": "gpt-4o-mini", "options": {"temperature": 0}}
    first = parse_model(value, tool="t")
    first["name"] = "changed by its caller"
    second = parse_model(value, tool="t")
    assert second["name"] == "gpt-4o-mini" and second is not first
    assert second == {**first, "name": "gpt-4o-mini"}


def test_a_value_changed_in_place_is_parsed_again():
    value: dict[str, Any] = {"provider": "openai", "name": "a"}
    assert parse_model(value)["name"] == "a"
    value["name"] = "b"
    assert parse_model(value)["name"] == "b"
    value["timeout"] = -1  # refused every time, never served from memory
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="timeout"):
            parse_model(value)
    value.pop("timeout")
    value["options"] = {"temperature": 1}
    assert parse_model(value)["options"] == {"temperature": 1}
    value["options"]["temperature"] = 2  # a nested change counts too
    assert parse_model(value)["options"] == {"temperature": 2}


def test_the_tool_and_folder_are_part_of_what_is_remembered(tmp_path):
    value = {"provider": "scripted", "file": "replies.yaml"}
    one, two = tmp_path / "one", tmp_path / "two"
    assert parse_model(value, folder=one)["file"] == str((one / "replies.yaml").resolve())
    assert parse_model(value, folder=two)["file"] == str((two / "replies.yaml").resolve())
    with pytest.raises(ConfigurationError) as raised:
        parse_model({"provider": "nope", "name": "x"}, tool="first")
    assert raised.value.tool == "first"


def test_a_bare_alias_follows_the_alias_table_of_the_moment(monkeypatch):
    word = "fast"
    monkeypatch.setenv("TOOLCASCADE_MODEL_ALIASES", json.dumps({word: "openai:one"}))
    assert parse_model(word)["name"] == "one"
    monkeypatch.setenv("TOOLCASCADE_MODEL_ALIASES", json.dumps({word: "openai:two"}))
    assert parse_model(word)["name"] == "two"
    table = {word: "anthropic:three"}
    assert parse_model(word, aliases=table)["provider"] == "anthropic"
    assert parse_model(word, aliases={word: "openai:four"})["name"] == "four"


def test_bounded_restores_the_limit_before_it_also_on_failure():
    with bounded(100):
        with pytest.raises(RuntimeError), bounded(5):
            assert Answer({}, None).limit == 5
            raise RuntimeError("the request failed")
        assert Answer({}, None).limit == 100


@pytest.mark.parametrize("setting", [bounded, keeping])
def test_a_setting_holds_its_value_in_its_block_and_restores_the_one_before_also_on_failure(setting: Any):
    outer, inner = setting(object()), setting(object())
    assert isinstance(outer, Setting) and outer.var is inner.var
    before = outer.var.get()
    with outer:
        assert outer.var.get() is outer.value
        with pytest.raises(RuntimeError), inner:
            assert outer.var.get() is inner.value
            raise RuntimeError("the request failed")
        assert outer.var.get() is outer.value
    assert outer.var.get() is before
