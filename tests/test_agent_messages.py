"""What agents and models say when they go wrong (issue 25, points 5 and 10): where, why, and what to do.

Each test reproduces one finding: the message names the tool, file, line and
key where they apply, and says what to fix ("did you mean" for a misspelt
name). Models are the offline scripted one, or a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
import pytest
import yaml
from freshness_helpers import eager
from mcp import Client
from servers import Reply, serve

from orchestrator import ConfigurationError, InvocationError, Manager, ModelError, SecurityError
from orchestrator.agent import parse_model
from orchestrator.callers import Caller, check_untrusted
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

WORDCOUNT = """
frontmatter = {"description": "Counts words.", "metadata": {"params": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
def main(ctx):
    return len(ctx.args["text"].split())
"""


def agent(write, name: str, model: Any, body: str = "Count the words.", **meta: Any) -> None:
    front = yaml.safe_dump({"description": f"{name} agent", "metadata": {"model": model, **meta}}, sort_keys=False)
    write(f"tools/{name}.md", f"---\n{front}---\n{body}\n")


def scripted(*turns: Any) -> dict:
    return {"provider": "scripted", "script": list(turns)}


@pytest.fixture
def manager(write, tools):
    write("tools/wordcount.py", WORDCOUNT)
    write("tools/ops/status.py", "def main(ctx):\n    return 'up'\n")
    return eager(Manager([tools]))  # the tests write agents between invocations


# -- point 5: a name in `tools` that is no tool ------------------------------------


async def test_a_misspelt_tool_in_tools_names_the_agent_its_file_line_and_key_and_suggests(write, tools, manager):
    write(
        "tools/counter.md",
        """
        ---
        description: Counts.
        metadata:
          model: {provider: scripted, script: [never asked]}
          tools: [wordcout]
        ---
        Count.
        """,
    )
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("counter")
    error = info.value
    assert (error.tool, error.key, error.path, error.line) == ("counter", "tools", str(tools / "counter.md"), 5)
    assert "'wordcout'" in error.detail and "did you mean 'wordcount'?" in error.detail


async def test_a_tool_in_tools_set_by_an_authority_is_reported_in_the_authority_and_a_bare_name_gets_its_ref(
    write, tools, manager
):
    write("tools/team/AUTHORITY.md", "---\nmetadata:\n  tools: [status]\n---\n")
    agent(write, "team/helper", scripted("never asked"))
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("team/helper")
    error = info.value
    assert (error.tool, error.key, error.path, error.line) == ("helper", "tools", str(tools / "team/AUTHORITY.md"), 3)
    assert "did you mean 'ops/status'?" in error.detail


async def test_a_name_in_tools_far_from_every_tool_gets_no_suggestion(write, manager):
    agent(write, "lonely", scripted("never asked"), tools=["zzzzqqq"])
    with pytest.raises(ConfigurationError, match="'zzzzqqq'") as info:
        await manager.invoke("lonely")
    assert "did you mean" not in info.value.detail


# -- point 10: model specs -------------------------------------------------------------


async def test_a_request_parameter_beside_the_model_fields_is_told_to_go_under_options(write, manager):
    agent(write, "warm", {"provider": "scripted", "script": ["hi"], "temperature": 0})
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("warm")
    assert info.value.tool == "warm" and info.value.key == "model"
    assert "options: {temperature: 0}" in info.value.detail
    agent(write, "warm", {"provider": "scripted", "script": ["hi"], "options": {"temperature": 0}})
    assert await manager.invoke("warm") == "hi"  # where the message said to put it


def test_a_misspelt_model_field_gets_did_you_mean():
    with pytest.raises(ConfigurationError, match="'max_tokens': did you mean 'max-tokens'?"):
        parse_model({"provider": "scripted", "max_tokens": 10})


async def test_a_model_alias_works_in_ones_own_tool_and_a_misspelt_one_says_how_aliases_are_defined(
    write, manager, monkeypatch
):
    monkeypatch.setenv("TOOLCASCADE_MODEL_ALIASES", json.dumps({"fast": scripted("from the alias")}))
    agent(write, "quick", "fast")
    assert await manager.invoke("quick") == "from the alias"
    agent(write, "quick", "fsat")
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("quick")
    error = info.value
    assert error.tool == "quick" and error.key == "model"
    assert "did you mean 'fast'?" in error.detail and "TOOLCASCADE_MODEL_ALIASES" in error.detail


def test_the_shared_aliases_name_models_and_inherit_is_none():
    assert parse_model("sonnet")["provider"] == "anthropic"  # the alias table of orchestrator.formats
    with pytest.raises(ConfigurationError, match="unknown model provider 'inherit'"):
        parse_model("inherit")  # Claude Code's "the caller's model": a toolcascade tool never inherits one
    with pytest.raises(ConfigurationError, match="did you mean 'openai'?") as info:
        parse_model("opnai:gpt-4o-mini")
    assert "alias" not in info.value.detail  # provider:name: an alias cannot be meant


# -- point 10: a session that already holds a scripted model's turns ----------------------------


async def test_a_scripted_model_out_of_turns_on_a_continued_session_says_the_session_held_them(write, tools, tmp_path):
    agent(write, "tutor", scripted("Ephemeral means short-lived.", "It was ephemeral."), body="{{ args.line }}")
    manager = Manager([tools], sessions=tmp_path / "lesson.db")
    lesson = {"session": "readme"}
    assert await manager.invoke("tutor", {"line": "ephemeral?"}, context=lesson) == "Ephemeral means short-lived."
    assert await manager.invoke("tutor", {"line": "a sentence?"}, context=lesson) == "It was ephemeral."
    with pytest.raises(ModelError) as info:  # the snippet run again: the session holds the first run's turns
        await manager.invoke("tutor", {"line": "ephemeral?"}, context=lesson)
    assert "session 'readme' already held 4 messages from earlier runs" in info.value.detail
    assert "use a new session id, or clear it" in info.value.detail
    assert await manager.invoke("tutor", {"line": "ephemeral?"}, context={"session": "new"}) == (
        "Ephemeral means short-lived."
    )


async def test_a_scripted_model_out_of_turns_without_a_session_names_no_session(write, manager):
    agent(
        write, "short", scripted({"calls": [{"name": "wordcount", "arguments": {"text": "a b"}}]}), tools=["wordcount"]
    )
    with pytest.raises(ModelError, match="has 1 turn") as info:
        await manager.invoke("short")
    assert "session" not in info.value.detail


# -- point 10: which limit cut an answer -------------------------------------------------------


async def test_a_length_finish_below_max_tokens_says_the_server_cut_it(write, manager):
    agent(write, "cut", scripted({"answer": "It was a", "finish": "length", "usage": {"completion_tokens": 3}}))
    with pytest.raises(ModelError) as info:
        await manager.invoke("cut")
    assert "server stopped the answer after 3 tokens, below max-tokens (4096)" in info.value.detail
    assert "context window" in info.value.detail and "cut off at max-tokens" not in info.value.detail
    assert info.value.retryable is False
    long = {"answer": "It was a", "finish": "length", "usage": {"completion_tokens": 64}}
    agent(write, "cut", {**scripted(long), "max-tokens": 64})
    with pytest.raises(ModelError, match=r"cut off at max-tokens \(64\); raise max-tokens"):
        await manager.invoke("cut")


def reply_json(body: Any) -> Reply:
    async def send(stream: anyio.abc.ByteStream) -> None:
        data = json.dumps(body).encode()
        head = f"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
        await stream.send(head.encode() + b"\r\n\r\n" + data)

    return send


def openai_answer(completion_tokens: int) -> dict:
    return {
        "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "It was"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4000, "completion_tokens": completion_tokens, "total_tokens": 4000},
    }


@pytest.mark.parametrize(("tokens", "needle"), [(96, "server stopped the answer after 96 tokens"), (512, "cut off at")])
async def test_a_length_finish_from_a_real_server_says_which_limit_cut_it(write, manager, monkeypatch, tokens, needle):
    monkeypatch.setenv("TC_KEY", "sk-test")
    async with serve(reply_json(openai_answer(tokens))) as server:
        model = {
            "provider": "openai",
            "name": "m",
            "base-url": f"{server.url}/v1",
            "api-key-env": "TC_KEY",
            "max-tokens": 512,
            "options": {"stream": False},
        }
        agent(write, "local", model)
        with pytest.raises(ModelError) as info:
            await manager.invoke("local")
    assert server.requests[0]["body"]["max_tokens"] == 512
    assert needle in info.value.detail and "max-tokens (512)" in info.value.detail


async def test_anthropic_context_window_exceeded_says_the_context_window_cut_it(write, manager, monkeypatch):
    monkeypatch.setenv("TC_ANTHROPIC_KEY", "sk-ant-test")
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x-1",
        "content": [{"type": "text", "text": "It was"}],
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": 199_000, "output_tokens": 2},
    }
    async with serve(reply_json(message)) as server:
        model = {
            "provider": "anthropic",
            "name": "claude-x",
            "base-url": server.url,
            "api-key-env": "TC_ANTHROPIC_KEY",
            "options": {"stream": False},
        }
        agent(write, "claude", model)
        with pytest.raises(ModelError, match="server stopped the answer after 2 tokens") as info:
            await manager.invoke("claude")
    assert "context window" in info.value.detail


# -- point 10: a model that loops ------------------------------------------------------------------


async def test_the_default_iteration_limit_stops_a_looping_model_and_says_how_to_raise_it(write, manager):
    call = {"calls": [{"name": "wordcount", "arguments": {"text": "a b"}}]}
    agent(write, "loops", scripted(*[call] * 41, "done"), tools=["wordcount"])
    with pytest.raises(InvocationError) as info:
        await manager.invoke("loops")
    error = info.value
    assert error.tool == "loops" and error.key == "max-iterations"
    assert "max-iterations (40) was reached" in error.detail and "max-iterations: 80" in error.detail
    assert "last 40 turns each made the same call, wordcount(" in error.detail and "circuit-breaker" in error.detail
    agent(write, "loops", scripted(*[call] * 41, "done"), tools=["wordcount"], **{"max-iterations": 42})
    assert await manager.invoke("loops") == "done"  # raised as the message says


async def test_an_iteration_limit_reached_by_varied_calls_does_not_say_the_model_loops(write, manager):
    turns = [{"calls": [{"name": "wordcount", "arguments": {"text": "a " * n}}]} for n in range(1, 4)]
    agent(write, "busy", scripted(*turns), tools=["wordcount"], **{"max-iterations": 3})
    with pytest.raises(InvocationError, match=r"max-iterations \(3\) was reached") as info:
        await manager.invoke("busy")
    assert "looping" not in info.value.detail


# -- point 10: $overrides over MCP -----------------------------------------------------------------


async def test_overrides_refused_over_mcp_say_how_the_server_accepts_them(write, tools, manager):
    with anyio.fail_after(20):
        async with Client(build_server(manager)) as client:
            result = await client.call_tool("wordcount", {"text": "a b", "$overrides": {"k": 1}})
    assert result.is_error
    assert "--allow-overrides" in result.content[0].text


async def test_the_python_keyword_a_refusal_names_is_build_servers_own(write, tools, manager):
    # "(allowoverrides=True from Python)" named a keyword build_server does not take
    import re

    for args, key in (({"$overrides": {"k": 1}}, "overrides"), ({"$context": {"session": "s"}}, "sessions")):
        with anyio.fail_after(20):
            async with Client(build_server(manager)) as client:
                refused = await client.call_tool("wordcount", {"text": "a b", **args})
        assert refused.is_error
        keyword = re.search(r"\((\w+)=True from Python\)", refused.content[0].text)
        assert keyword is not None and keyword.group(1) == f"allow_{key}"
        with anyio.fail_after(20):
            async with Client(build_server(manager, **{keyword.group(1): True})) as client:
                accepted = await client.call_tool("wordcount", {"text": "a b", **args})
        assert not accepted.is_error, accepted.content[0].text


def test_refusals_name_the_switch_only_for_a_caller_one_allows():
    asked = {"context": {"session": "s"}, "middleware": None, "overrides": None, "timeout": None}
    with pytest.raises(SecurityError, match="--allow-sessions"):
        check_untrusted("t", asked, Caller("MCP callers", ("t",), switch="--allow-"))
    with pytest.raises(SecurityError) as info:
        check_untrusted("t", {**asked, "context": None, "overrides": {"k": 1}}, Caller("a model", ("t",)))
    assert "--allow" not in info.value.detail  # nothing lets a model send them


async def test_a_model_mapping_with_the_provider_inside_its_name_is_told_to_name_it_apart(write, manager):
    # {name: openai:gpt-4o-mini} read as "unknown model provider None"
    agent(write, "mapped", {"name": "openai:gpt-4o-mini", "options": {"temperature": 0}})
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("mapped")
    assert info.value.tool == "mapped" and info.value.key == "model"
    assert "provider: openai, name: gpt-4o-mini" in info.value.detail
    assert "model: openai:gpt-4o-mini" in info.value.detail


async def test_a_missing_api_key_names_the_agent_and_its_model_key(write, manager, monkeypatch):
    # `model: sonnet` with no ANTHROPIC_API_KEY said which variable to set but not which tool asked
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    agent(write, "sonneteer", "sonnet")
    with pytest.raises(ConfigurationError) as info:
        await manager.invoke("sonneteer")
    assert (info.value.tool, info.value.key) == ("sonneteer", "model")
    assert "ANTHROPIC_API_KEY" in info.value.detail


async def test_check_reports_a_request_parameter_beside_the_model_fields_as_a_run_would(write, tools, manager):
    # issue 25, point 10: check said ok where every run failed with "put it under options"
    from orchestrator.check import check

    agent(write, "warm", {"provider": "openai", "name": "gpt-4o-mini", "temperature": 0})
    agent(write, "fine", {"provider": "openai", "name": "gpt-4o-mini", "options": {"temperature": 0}})
    with pytest.raises(ConfigurationError) as ran:
        await manager.invoke("warm")
    found = [str(p) for p in check(manager) if "warm.md" in str(p) or "fine.md" in str(p)]
    assert len(found) == 1 and "warm.md:4: " in found[0] and "options: {temperature: 0}" in found[0]
    assert "options: {temperature: 0}" in ran.value.detail
