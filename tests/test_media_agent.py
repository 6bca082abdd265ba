"""A tool's media result reaches the model (issue 29): OpenAI-compatible servers and Anthropic, request bodies read.

Needs the agent loop to put ``agent.media.result_content`` in tool messages and
the providers to shape them (``openai_turns``, ``anthropic_tool_result``).
"""

from __future__ import annotations

import base64
import json

import anyio.abc
import pytest
import yaml
from servers import fakellm_server, serve

from orchestrator import Manager

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 32
CHART = """
from orchestrator.agent.media import media_part

frontmatter = {"description": "Draws the chart.", "metadata": {"params": {"type": "object"}}}

def main(ctx):
    return media_part(ctx.cwd / "chart.png", ctx)
"""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def replying(*bodies: dict):
    def reply(body: dict):
        async def send(stream: anyio.abc.ByteStream) -> None:
            data = json.dumps(body)
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            await stream.send(head.encode() + data.encode())

        return send

    return [reply(b) for b in bodies]


def openai(message: dict) -> dict:
    return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", **message}}]}


def anthropic(content: list, stop: str) -> dict:
    usage = {"input_tokens": 1, "output_tokens": 1}
    return {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop,
        "usage": usage,
    }


@pytest.fixture
def project(tmp_path, write, monkeypatch):
    monkeypatch.setenv("TC_KEY", "sk-test")
    (tmp_path / "chart.png").write_bytes(PNG)
    write("tools/chart.py", CHART)
    return tmp_path


def agent(write, model: dict) -> None:
    meta = {"model": {**model, "options": {"stream": False}}, "tools": ["chart"]}
    write("tools/look.md", "---\n" + yaml.safe_dump({"metadata": meta}) + "---\nDraw the chart and describe it.\n")


async def test_an_openai_server_gets_the_image_a_tool_returned(project, write):
    call = {"id": "c1", "type": "function", "function": {"name": "chart", "arguments": "{}"}}
    replies = replying(openai({"content": None, "tool_calls": [call]}), openai({"content": "A rising line."}))
    async with serve(*replies) as s:
        agent(write, {"provider": "openai", "name": "m", "base-url": f"{s.url}/v1", "api-key-env": "TC_KEY"})
        assert await Manager([project / "tools"], cwd=project).invoke("look") == "A rising line."
    sent = s.requests[1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == "c1" and "image/png" in sent[2]["content"]
    assert sent[3]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}}


async def test_an_anthropic_server_gets_the_image_in_the_tool_result(project, write):
    use = {"type": "tool_use", "id": "t1", "name": "chart", "input": {}}
    replies = replying(
        anthropic([use], "tool_use"), anthropic([{"type": "text", "text": "A rising line."}], "end_turn")
    )
    async with serve(*replies) as s:
        agent(write, {"provider": "anthropic", "name": "m", "base-url": s.url, "api-key-env": "TC_KEY"})
        assert await Manager([project / "tools"], cwd=project).invoke("look") == "A rising line."
    [result] = s.requests[1]["body"]["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "t1"
    assert result["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
    }


async def test_fakellm_takes_the_media_tool_result(project, write, tmp_path_factory):
    rules = {
        "rules": [
            {"name": "described", "when": {"tool_result_contains": "image/png"}, "respond": {"content": "A chart."}},
            {
                "name": "draw",
                "when": {"tools_include": "chart"},
                "respond": {"tool_calls": [{"name": "chart", "arguments": {}}]},
            },
        ]
    }
    with fakellm_server(tmp_path_factory.mktemp("fakellm"), rules) as base:
        agent(write, {"provider": "openai", "name": "m", "base-url": f"{base}/v1", "api-key-env": "TC_KEY"})
        assert await Manager([project / "tools"], cwd=project).invoke("look") == "A chart."
