"""The agent loop against a real OpenAI-compatible HTTP server on 127.0.0.1 (fakellm), via the openai client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from servers import free_port, stop

from orchestrator import Manager, ModelError
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
    ]
}


def http(url: str, method: str = "GET") -> dict:
    """A tiny stdlib client for fakellm's control endpoints."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"{}")


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory):
    folder: Path = tmp_path_factory.mktemp("fakellm")
    config = folder / "rules.yaml"
    config.write_text(yaml.safe_dump(RULES))
    port = free_port()
    exe = Path(sys.executable).parent / "fakellm"
    process = subprocess.Popen(
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--config", str(config)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            http(f"{base}/_fakellm/stats")
            break
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("fakellm did not start") from None
            time.sleep(0.1)
    try:
        yield base
    finally:
        stop(process)


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
    return Manager([tools])


async def test_r_agent_2_openai_tool_call_round_trip_over_http(manager, fakellm):
    calls = []
    manager.events.listeners.append(lambda e: calls.append(e.data["call"]) if e.kind == "tool.end" else None)
    assert await manager.invoke("forecast", {"city": "Paris"}) == "It is 21 degrees in Paris."
    assert calls == ["weather"]
    stats = http(f"{fakellm}/_fakellm/stats")
    assert "call-weather" in str(stats) and "answer-after-tool" in str(stats)


async def test_r_agent_2_openai_structured_output(manager):
    assert await manager.invoke("structured") == {"temp": 21}


async def test_r_agent_2_openai_errors_are_model_errors(manager, monkeypatch):
    monkeypatch.setenv("TC_TEST_KEY", "wrong")
    with pytest.raises(ModelError, match="bad key"):
        await manager.invoke("forecast", {"city": "Paris"})


def test_r_agent_2_assistant_tool_calls_carry_empty_content_not_null():
    wire = _wire(
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "w", "arguments": {"a": 1}}]}
    )
    assert wire["content"] == ""
    assert wire["tool_calls"] == [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"a": 1}'}}]
