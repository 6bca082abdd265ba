"""Structured output that always comes back valid: the native, tool and prompted strategies, and retries (issue 29).

Each strategy against a server that supports it: native with a JSON answer
from fakellm and the request body checked on a recording server; tool on a
server without JSON mode (the recording server, and fakellm's Anthropic
Messages API); prompted with the scripted model. A wrong answer goes back
with what is wrong, ``returns-retries`` times, then is raised with the last
answer attached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from servers import serve
from test_model_clients import fakellm, http  # noqa: F401 - the fakellm fixture, shared with the client tests
from test_providers import openai_stream, reply_sse

from orchestrator import ConfigurationError, Manager, ReturnsValidationError
from orchestrator.agent.returns import FINAL_ANSWER, default_strategy

pytestmark = pytest.mark.anyio

RETURNS = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}
WEATHER = (
    "frontmatter = {'description': 'Weather.', 'metadata': {'params': {'type': 'object', "
    "'properties': {'city': {'type': 'string'}}}}}\n"
    "def main(ctx):\n    return {'city': ctx.args.get('city'), 'celsius': 5}\n"
)


def agent(write: Any, name: str, model: Any, body: str = "How warm is it?", **meta: Any) -> None:
    text = "---\n" + yaml.safe_dump({"metadata": {"model": model, "returns": RETURNS, **meta}}) + f"---\n{body}\n"
    write(f"tools/{name}.md", text)


def scripted(*turns: Any) -> dict[str, Any]:
    return {"provider": "scripted", "script": list(turns)}


@pytest.fixture
def manager(tools: Path, write: Any, monkeypatch: pytest.MonkeyPatch) -> Manager:
    monkeypatch.setenv("TC_CLIENT_KEY", "sk-test")
    write("tools/weather.py", WEATHER)
    return Manager([tools])


def test_the_default_strategy_follows_the_provider() -> None:
    assert default_strategy({"provider": "openai"})[0] == "native"
    assert default_strategy({"provider": "anthropic"})[0] == "tool"
    assert default_strategy({"provider": "scripted"})[0] == "native"
    assert "no JSON response format" in default_strategy({"provider": "anthropic"})[1]


# -- native ---------------------------------------------------------------------------


async def test_native_asks_for_the_json_schema_format(write: Any, manager: Manager) -> None:
    async with serve(reply_sse(openai_stream('{"temp": 21}'))) as s:
        model = {"provider": "openai", "name": "m", "base-url": f"{s.url}/v1", "api-key-env": "TC_CLIENT_KEY"}
        agent(write, "native", model)
        assert await manager.invoke("native") == {"temp": 21}
    sent = s.requests[0]["body"]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "result", "schema": RETURNS}}
    assert "tools" not in sent


async def test_native_against_fakellm(write: Any, manager: Manager, fakellm: str) -> None:  # noqa: F811
    model = {"provider": "openai", "name": "m", "base-url": f"{fakellm}/v1", "api-key-env": "TC_CLIENT_KEY"}
    agent(write, "native", model, body="Answer as JSON")  # fakellm answers {"temp": 21} to "as JSON"
    assert await manager.invoke("native") == {"temp": 21}


# -- tool -----------------------------------------------------------------------------


async def test_tool_strategy_on_a_server_without_json_mode(write: Any, manager: Manager) -> None:
    replies = [
        reply_sse(openai_stream(calls=[{"name": "weather", "arguments": {"city": "Oslo"}}])),  # tools stay callable
        reply_sse(openai_stream(calls=[{"name": FINAL_ANSWER, "arguments": {"temp": 5}}])),
    ]
    async with serve(*replies) as s:
        model = {"provider": "openai", "name": "m", "base-url": f"{s.url}/v1", "api-key-env": "TC_CLIENT_KEY"}
        agent(write, "tooled", model, tools=["weather"], **{"returns-strategy": "tool"})
        assert await manager.invoke("tooled") == {"temp": 5}
    first, second = (r["body"] for r in s.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["weather", FINAL_ANSWER]
    assert first["tools"][1]["function"]["parameters"] == RETURNS
    assert "response_format" not in first and "response_format" not in second
    assert any(FINAL_ANSWER in str(m.get("content")) for m in first["messages"] if m["role"] == "system")
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c0", "content": '{"city": "Oslo", "celsius": 5}'}


async def test_anthropic_answers_through_the_final_answer_tool_by_default(
    write: Any,
    manager: Manager,
    fakellm: str,  # noqa: F811
) -> None:
    model = {"provider": "anthropic", "name": "claude-x", "base-url": fakellm, "api-key-env": "TC_CLIENT_KEY"}
    agent(write, "claude", model, body="Final please")  # fakellm calls final_answer when it is offered
    assert await manager.invoke("claude") == {"temp": 7}


async def test_a_wrong_final_answer_call_goes_back_as_its_tool_result(write: Any, manager: Manager) -> None:
    model = scripted(
        {"calls": [{"name": FINAL_ANSWER, "arguments": {"temp": "mild"}}], "expect": {"response-format": False}},
        {
            "calls": [{"name": FINAL_ANSWER, "arguments": {"temp": 12}}],
            "expect": {"last-role": "tool", "contains": "/temp"},
        },
    )
    agent(write, "fixed", model, **{"returns-strategy": "tool"})
    assert await manager.invoke("fixed") == {"temp": 12}


# -- prompted -------------------------------------------------------------------------


async def test_prompted_with_the_scripted_model(write: Any, manager: Manager) -> None:
    expect = {"contains": ["only a JSON value", '"temp"'], "response-format": False, "tools": []}
    agent(write, "prompted", scripted({"answer": '```json\n{"temp": 3}\n```', "expect": expect}),
          **{"returns-strategy": "prompted"})  # fmt: skip
    assert await manager.invoke("prompted") == {"temp": 3}


@pytest.mark.parametrize("strategy", ["native", "tool", "prompted"])
async def test_tools_stay_callable_with_every_strategy(write: Any, manager: Manager, strategy: str) -> None:
    answer = (
        {"calls": [{"name": FINAL_ANSWER, "arguments": {"temp": 5}}]}
        if strategy == "tool"
        else {"answer": '{"temp": 5}'}
    )
    call = {"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}], "expect": {"response-format": False}}
    agent(write, "any", scripted(call, {**answer, "expect": {"last-role": "tool"}}), tools=["weather"],
          **{"returns-strategy": strategy})  # fmt: skip
    assert await manager.invoke("any") == {"temp": 5}


# -- retries --------------------------------------------------------------------------


async def test_a_wrong_answer_is_sent_back_once_with_the_error(write: Any, manager: Manager) -> None:
    retry = {"answer": '{"temp": 4}', "expect": {"last-role": "user", "contains": ["/temp", "does not match"]}}
    agent(write, "again", scripted('{"temp": "warm"}', retry))
    assert await manager.invoke("again") == {"temp": 4}


async def test_after_the_retries_the_last_answer_is_raised(write: Any, manager: Manager) -> None:
    agent(write, "stubborn", scripted('{"temp": "warm"}', '{"temp": "hot"}', '{"temp": 1}'))
    seen: list[Any] = []
    manager.events.listeners.append(lambda e: seen.append(e) if e.kind == "model.request" else None)
    with pytest.raises(ReturnsValidationError, match="/temp") as info:
        await manager.invoke("stubborn")
    assert isinstance(info.value, ReturnsValidationError)
    assert info.value.answer == {"temp": "hot"} and len(seen) == 2  # one retry by default


async def test_returns_retries_sets_how_often(write: Any, manager: Manager) -> None:
    agent(write, "patient", scripted("warm", "hot", '{"temp": 1}'), **{"returns-retries": 2})
    assert await manager.invoke("patient") == {"temp": 1}
    agent(write, "strict", scripted("warm", '{"temp": 1}'), **{"returns-retries": 0})
    with pytest.raises(ReturnsValidationError, match="not JSON") as info:
        await manager.invoke("strict")
    assert info.value.answer == "warm"


@pytest.mark.parametrize(
    ("meta", "key"),
    [({"returns-strategy": "json"}, "returns-strategy"), ({"returns-retries": -1}, "returns-retries")],
)
async def test_bad_settings_are_configuration_errors(write: Any, manager: Manager, meta: dict, key: str) -> None:
    agent(write, "bad", scripted('{"temp": 1}'), **meta)
    with pytest.raises(ConfigurationError, match=key) as info:
        await manager.invoke("bad")
    assert info.value.tool == "bad" and info.value.key == key


async def test_a_tool_named_like_the_answer_tool_is_refused(write: Any, manager: Manager) -> None:
    write(f"tools/{FINAL_ANSWER}.py", "def main(ctx):\n    return 1\n")
    agent(write, "clash", scripted('{"temp": 1}'), tools=[FINAL_ANSWER], **{"returns-strategy": "tool"})
    with pytest.raises(ConfigurationError, match="clashes"):
        await manager.invoke("clash")


# -- returns in Picoschema shorthand (issue 30) ---------------------------------------------------------------

SHORTHAND = {"temp": "number", "city?": "string"}
EXPANDED = {
    "type": "object",
    "properties": {"temp": {"type": "number"}, "city": {"type": ["string", "null"]}},
    "required": ["temp"],
    "additionalProperties": False,
}


def shorthand_agent(write: Any, name: str, model: Any, **meta: Any) -> None:
    text = "---\n" + yaml.safe_dump({"metadata": {"model": model, "returns": SHORTHAND, **meta}}) + "---\nWarm?\n"
    write(f"tools/{name}.md", text)


async def test_shorthand_returns_ask_for_their_json_schema_natively(write: Any, manager: Manager) -> None:
    async with serve(reply_sse(openai_stream('{"temp": 21.5, "city": "Oslo"}'))) as s:
        model = {"provider": "openai", "name": "m", "base-url": f"{s.url}/v1", "api-key-env": "TC_CLIENT_KEY"}
        shorthand_agent(write, "native", model)
        assert await manager.invoke("native") == {"temp": 21.5, "city": "Oslo"}
    sent = s.requests[0]["body"]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "result", "schema": EXPANDED}}


async def test_shorthand_returns_offer_their_json_schema_as_the_final_answer_tool(write: Any, manager: Manager) -> None:
    async with serve(reply_sse(openai_stream(calls=[{"name": FINAL_ANSWER, "arguments": {"temp": 5}}]))) as s:
        model = {"provider": "openai", "name": "m", "base-url": f"{s.url}/v1", "api-key-env": "TC_CLIENT_KEY"}
        shorthand_agent(write, "tooled", model, **{"returns-strategy": "tool"})
        assert await manager.invoke("tooled") == {"temp": 5}
    assert s.requests[0]["body"]["tools"][0]["function"]["parameters"] == EXPANDED


async def test_a_wrong_answer_to_shorthand_returns_is_sent_back(write: Any, manager: Manager) -> None:
    retry = {"answer": '{"temp": 4}', "expect": {"last-role": "user", "contains": ["/temp", "does not match"]}}
    shorthand_agent(
        write,
        "again",
        scripted({"answer": '{"temp": "warm"}', "expect": {"response-format": True}}, retry),
    )
    assert await manager.invoke("again") == {"temp": 4}
