"""Traces by the OpenTelemetry GenAI semantic conventions (issue 29), read from the SDK's in-memory exporter.

CLIENT ``chat`` spans, INTERNAL ``execute_tool`` spans, ``error.type`` on
every failed span, token usage on every answered request (a truncated or
refused one included), and the conversation and caller session ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from orchestrator import Manager, ModelError, tracing
from orchestrator.sessions import MemoryStore

pytestmark = pytest.mark.anyio

WEATHER = """
frontmatter = {"description": "Weather in a city.", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    if ctx.args.get("city") == "Atlantis":
        raise ValueError("no such city")
    return {"temp": 5}
"""


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("test"))
    return exporter


def agent(write: Any, name: str, script: list[Any], **meta: Any) -> None:
    model = {"provider": "scripted", "name": "tiny", "script": script, **meta.pop("model", {})}
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": {"model": model, **meta}}) + "---\nGo.\n")


def named(spans: InMemorySpanExporter, name: str) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.name == name]


async def test_chat_spans_are_client_spans_and_tool_spans_internal(
    write: Any, tools: Path, spans: InMemorySpanExporter
) -> None:
    write("tools/weather.py", WEATHER)
    script = [{"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]}, {"answer": "5 degrees"}]
    agent(write, "forecast", script, tools=["weather"], model={"max-tokens": 100})
    assert await Manager([tools]).invoke("forecast") == "5 degrees"
    chats = named(spans, "chat tiny")
    assert len(chats) == 2
    for chat in chats:
        assert chat.kind is SpanKind.CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == "tiny"
        assert chat.attributes["gen_ai.request.max_tokens"] == 100
        assert chat.attributes["gen_ai.output.type"] == "text"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert "error.type" not in chat.attributes
    [tool] = named(spans, "execute_tool weather")
    assert tool.kind is SpanKind.INTERNAL
    assert tool.attributes["gen_ai.tool.name"] == "weather"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.description"] == "Weather in a city."
    assert "error.type" not in tool.attributes


async def test_every_failed_span_has_an_error_type(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    write("tools/weather.py", WEATHER)
    with pytest.raises(ValueError):
        await Manager([tools]).invoke("weather", {"city": "Atlantis"})
    failed = [s for s in spans.get_finished_spans() if s.status.status_code is StatusCode.ERROR]
    assert failed and any(s.parent is None for s in failed)
    assert {s.attributes["error.type"] for s in failed} == {"ValueError"}
    passed = [s for s in spans.get_finished_spans() if s.status.status_code is not StatusCode.ERROR]
    assert all("error.type" not in s.attributes for s in passed)


async def test_a_failed_tool_call_and_a_failed_model_request_carry_their_error_type(
    write: Any, tools: Path, spans: InMemorySpanExporter
) -> None:
    write("tools/weather.py", WEATHER)
    script = [
        {"calls": [{"name": "weather", "arguments": {"city": "Atlantis"}}]},
        {"fail": 1, "error": "the server is down", "status": 400},
    ]
    agent(write, "forecast", script, tools=["weather"])
    with pytest.raises(ModelError):
        await Manager([tools]).invoke("forecast")
    [tool] = named(spans, "execute_tool weather")
    assert tool.status.status_code is StatusCode.ERROR and tool.attributes["error.type"] == "ValueError"
    failed_chat = [s for s in named(spans, "chat tiny") if s.status.status_code is StatusCode.ERROR]
    assert [s.attributes["error.type"] for s in failed_chat] == ["orchestrator.errors.ModelError"]
    assert failed_chat[0].kind is SpanKind.CLIENT


async def test_a_truncated_answer_reports_its_tokens(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    script = [{"answer": "It was a dark", "finish": "length", "usage": {"prompt_tokens": 9, "completion_tokens": 4}}]
    agent(write, "story", script, model={"max-tokens": 4})
    with pytest.raises(ModelError, match="cut off"):
        await Manager([tools]).invoke("story")
    [chat] = named(spans, "chat tiny")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["gen_ai.usage.input_tokens"] == 9
    assert chat.attributes["gen_ai.usage.output_tokens"] == 4
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("length",)
    assert chat.attributes["error.type"].endswith("RefusedAnswerError")


async def test_a_refused_answer_reports_its_tokens(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    write("tools/weather.py", WEATHER)
    script = [{"answer": "no tools today", "usage": {"prompt_tokens": 12, "completion_tokens": 3}}]
    agent(write, "forced", script, tools=["weather"], **{"tool-choice": "required"})
    with pytest.raises(ModelError, match="tool-choice"):
        await Manager([tools]).invoke("forced")
    [chat] = named(spans, "chat tiny")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 3


async def test_conversation_and_session_ids_are_attributes(
    write: Any, tools: Path, spans: InMemorySpanExporter
) -> None:
    write("tools/weather.py", WEATHER)
    script = [{"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]}, {"answer": "5 degrees"}]
    agent(write, "forecast", script, tools=["weather"])
    manager = Manager([tools], sessions=MemoryStore())
    context = {"session": "conv-7", "envelope": {"session": "mcp-42"}}
    assert await manager.invoke("forecast", {"$context": context}) == "5 degrees"
    for span in [*named(spans, "chat tiny"), *named(spans, "execute_tool weather")]:
        assert span.attributes["gen_ai.conversation.id"] == "conv-7"
        assert span.attributes["session.id"] == "mcp-42"


async def test_without_a_session_no_conversation_id(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    agent(write, "hello", [{"answer": "hi"}])
    assert await Manager([tools]).invoke("hello") == "hi"
    [chat] = named(spans, "chat tiny")
    assert "gen_ai.conversation.id" not in chat.attributes and "session.id" not in chat.attributes


async def test_an_http_model_names_its_server(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    from servers import serve

    async def reply(stream: Any) -> None:
        body = b'{"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}], "model": "m"}'
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        await stream.send(head.encode() + body)

    async with serve(reply) as server:
        model = {"provider": "openai", "name": "m", "base-url": f"{server.url}/v1", "options": {"stream": False}}
        write("tools/remote.md", "---\n" + yaml.safe_dump({"metadata": {"model": model}}) + "---\nHi.\n")
        assert await Manager([tools]).invoke("remote") == "hi"
    [chat] = named(spans, "chat m")
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["server.address"] == "127.0.0.1"
    assert chat.attributes["server.port"] == int(server.url.rsplit(":", 1)[1])
