"""The agent loop against a real OpenAI-compatible HTTP server on 127.0.0.1 (fakellm), via the openai client."""

from __future__ import annotations

import pytest
import yaml
from servers import fakellm_http as http
from servers import fakellm_server

from orchestrator import ConfigurationError, Manager, ModelError
from orchestrator.agent.openai import _wire

pytestmark = pytest.mark.anyio

RULES = {
    "rules": [
        {
            "name": "no-key",
            "when": {"header.authorization": "Bearer wrong"},
            "respond": {"status": 401, "error": "bad key"},
        },
        {
            "name": "answer-after-tool",
            "when": {"tool_result_contains": "celsius"},
            "respond": {"content": "It is 21 degrees in Paris."},
        },
        {
            "name": "call-weather",
            "when": {"tools_include": "weather", "messages_contain": "Paris", "header.authorization": "Bearer sk-test"},
            "respond": {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        },
        {"name": "json", "when": {"messages_contain": "as JSON"}, "respond": {"content": '{"temp": 21}'}},
        {
            "name": "claude-weather",
            "when": {"tools_include": "weather", "messages_contain": "Lyon"},
            "respond": {"tool_calls": [{"name": "weather", "arguments": {"city": "Lyon"}}]},
        },
        {"name": "overloaded", "when": {"messages_contain": "overload"}, "respond": {"status": 500, "error": "busy"}},
    ]
}


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory):
    with fakellm_server(tmp_path_factory.mktemp("fakellm"), RULES) as base:
        yield base


@pytest.fixture
def manager(fakellm, write, tools, monkeypatch):
    http(f"{fakellm}/_fakellm/reset", "POST")
    monkeypatch.setenv("TC_TEST_KEY", "sk-test")
    write(
        "tools/weather.py",
        "frontmatter = {'description': 'Weather.', 'metadata': {'params': {'type': 'object', 'properties': {'city': {'type': 'string'}}}}}\n"
        "def main(ctx):\n    return {'city': ctx.args['city'], 'celsius': 21}\n",
    )
    model = {"provider": "openai", "name": "gpt-4o-mini", "base-url": f"{fakellm}/v1", "api-key-env": "TC_TEST_KEY"}
    write(
        "tools/forecast.md",
        "---\n"
        + yaml.safe_dump({"metadata": {"model": model, "tools": ["weather"]}})
        + "---\nWeather in {{ args.city }}?\n",
    )
    returns = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}
    write(
        "tools/structured.md",
        "---\n" + yaml.safe_dump({"metadata": {"model": model, "returns": returns}}) + "---\nGive it as JSON.\n",
    )
    # fakellm answers a streamed request with 200 whatever the rule's status: errors need one unstreamed request.
    plain = {**model, "options": {"stream": False}}
    write("tools/plain.md", "---\n" + yaml.safe_dump({"metadata": {"model": plain}}) + "---\n{{ args.text }}\n")
    return Manager([tools])


def requests_for(fakellm: str, rule: str) -> int:
    """How many requests fakellm matched to ``rule`` since it started."""
    return int(http(f"{fakellm}/_fakellm/stats")["by_rule"].get(rule, 0))


async def test_r_agent_2_openai_tool_call_round_trip_over_http(manager, fakellm):
    calls = []
    manager.events.listeners.append(lambda e: calls.append(e.data["call"]) if e.kind == "tool.end" else None)
    assert await manager.invoke("forecast", {"city": "Paris"}) == "It is 21 degrees in Paris."
    assert calls == ["weather"]
    stats = http(f"{fakellm}/_fakellm/stats")
    assert "call-weather" in str(stats) and "answer-after-tool" in str(stats)


async def test_r_agent_2_openai_structured_output(manager):
    assert await manager.invoke("structured") == {"temp": 21}


async def test_r_agent_2_openai_errors_are_model_errors(manager, monkeypatch, fakellm):
    monkeypatch.setenv("TC_TEST_KEY", "wrong")
    with pytest.raises(ModelError, match="bad key") as info:
        await manager.invoke("plain", {"text": "Paris"})
    message = str(info.value)
    # The model, the URL and the setting that holds the key are named; a bad key is never retried.
    assert "openai:gpt-4o-mini" in message and f"{fakellm}/v1" in message and "TC_TEST_KEY" in message
    assert "HTTP 401" in message
    assert info.value.retryable is False and info.value.status == 401


async def test_r_agent_2_openai_streams_text_and_tool_call_arguments(manager, fakellm):
    deltas = []
    manager.events.listeners.append(lambda e: deltas.append((e.iteration, e.data)) if e.kind == "model.delta" else None)
    assert await manager.invoke("forecast", {"city": "Paris"}) == "It is 21 degrees in Paris."
    recent = http(f"{fakellm}/_fakellm/stats")["recent"][:2]  # newest first: this run's two turns
    assert [r["matched_rule"] for r in recent] == ["answer-after-tool", "call-weather"]
    assert all(r["stream"] for r in recent)
    first = [d for i, d in deltas if i == 1]
    assert all(d["call"] == "weather" and d["index"] == 0 for d in first)
    assert len(first) > 2  # fakellm splits the arguments into pieces
    assert "".join(d["arguments"] for d in first) == '{"city": "Paris"}'
    text = [d["text"] for i, d in deltas if i == 2]
    assert len(text) > 1 and "".join(text) == "It is 21 degrees in Paris."


async def test_r_agent_2_openai_client_never_retries_on_its_own(manager, fakellm):
    # The SDK's default would send this failing request three times; retry is the only retry.
    start = requests_for(fakellm, "overloaded")
    with pytest.raises(ModelError, match="HTTP 500: busy") as info:
        await manager.invoke("plain", {"text": "overload"})
    assert info.value.retryable is True
    assert requests_for(fakellm, "overloaded") == start + 1
    with pytest.raises(ModelError, match="HTTP 500"):
        await manager.invoke(
            "plain", {"text": "overload"}, overrides={"model-pipeline": {"retry": {"attempts": 3, "backoff": 0}}}
        )
    assert requests_for(fakellm, "overloaded") == start + 4


async def test_r_agent_2_openai_unset_key_variable_is_a_configuration_error(manager, monkeypatch):
    monkeypatch.delenv("TC_TEST_KEY")
    with pytest.raises(ConfigurationError, match="api-key-env names TC_TEST_KEY, which is unset"):
        await manager.invoke("forecast", {"city": "Paris"})


async def test_r_agent_2_anthropic_tool_use_round_trip_over_http(manager, fakellm, write):
    model = {"provider": "anthropic", "name": "claude-x", "base-url": fakellm, "api-key-env": "TC_TEST_KEY"}
    write(
        "tools/claude.md",
        "---\n" + yaml.safe_dump({"metadata": {"model": model, "tools": ["weather"]}}) + "---\nWeather in Lyon?\n",
    )
    deltas = []
    manager.events.listeners.append(lambda e: deltas.append(e.data) if e.kind == "model.delta" else None)
    assert await manager.invoke("claude") == "It is 21 degrees in Paris."
    recent = http(f"{fakellm}/_fakellm/stats")["recent"][:2]
    assert [(r["api"], r["matched_rule"], r["stream"]) for r in recent] == [
        ("anthropic", "answer-after-tool", True),
        ("anthropic", "claude-weather", True),
    ]
    assert "".join(d["arguments"] for d in deltas if "call" in d) == '{"city": "Lyon"}'


def test_r_agent_2_assistant_tool_calls_carry_empty_content_not_null():
    wire = _wire(
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "w", "arguments": {"a": 1}}]}
    )
    assert wire["content"] == ""
    assert wire["tool_calls"] == [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"a": 1}'}}]
