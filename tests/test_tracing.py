"""OpenTelemetry traces (issue 13): a span per invocation, nested as the onion nests; GenAI conventions.

Spans go to the SDK's in-memory exporter. The global tracer provider can be
set once per process, so the tests hand ``orchestrator.tracing`` a provider
of their own; how the engine finds the program's provider is tested apart.
"""

from __future__ import annotations

import sys

import pytest
import yaml
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from orchestrator import Manager, tracing

pytestmark = pytest.mark.anyio

WEATHER = """
frontmatter = {
    "description": "Weather.",
    "metadata": {"params": {"type": "object", "properties": {"units": {"type": "string", "default": "C"}}}},
}
async def main(ctx):
    if ctx.args.get("city") == "Atlantis":
        raise ValueError("no such city")
    return {"temp": 5}
"""


@pytest.fixture
def spans(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("test"))
    return exporter


async def test_spans_nest_as_the_onion_and_follow_the_genai_conventions(write, tools, spans):
    write("tools/weather.py", WEATHER)
    script = [
        {"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        {"answer": "5 degrees"},
    ]
    metadata = {"model": {"provider": "scripted", "name": "tiny", "script": script}, "tools": ["weather"]}
    write("tools/forecast.md", "---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nWeather in Paris?\n")
    assert await Manager([tools]).invoke("forecast") == "5 degrees"
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    root = next(s for s in finished if s.parent is None)
    assert root.name == "forecast" and root.attributes["toolcascade.kind"] == "markdown"
    assert root.attributes["toolcascade.depth"] == 0 and root.attributes["toolcascade.run"]
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}

    def ancestors(span):
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            yield span.name

    chats = [s for s in finished if s.name == "chat tiny"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.system"] == chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == "tiny"
        assert "forecast" in list(ancestors(chat))
    tool = next(s for s in finished if s.name == "execute_tool weather")
    assert (
        tool.attributes["gen_ai.tool.name"] == "weather" and tool.attributes["gen_ai.operation.name"] == "execute_tool"
    )
    assert "forecast" in list(ancestors(tool))
    # the tool's own pipeline nests under its span as the onion nests: params, then validate-args inside it
    inner = [s for s in finished if s.name == "validate-args" and "execute_tool weather" in list(ancestors(s))]
    assert len(inner) == 1 and list(ancestors(inner[0]))[:3] == ["params", "execute_tool weather", "agent-execute"]
    assert inner[0].attributes["toolcascade.depth"] == tool.attributes["toolcascade.depth"] + 1


async def test_a_failing_invocation_has_an_error_status(write, tools, spans):
    write("tools/weather.py", WEATHER)
    with pytest.raises(ValueError):
        await Manager([tools]).invoke("weather", {"city": "Atlantis"})
    root = next(s for s in spans.get_finished_spans() if s.parent is None)
    assert root.status.status_code is StatusCode.ERROR
    assert any(event.name == "exception" for event in root.events)


def test_no_tracer_without_a_provider(monkeypatch):
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    assert tracing.tracer() is None
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    assert tracing.tracer() is None  # a program that never imported OpenTelemetry set no provider


def test_the_programs_provider_is_used(monkeypatch):
    provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    found = tracing.tracer()
    assert found is not None and found is tracing.tracer()  # made once per provider


async def test_the_tracer_is_decided_once_per_run_for_every_entry(write, tools, monkeypatch):
    """Every entry of a run asks the run's tracer, not OpenTelemetry again (it reads os.environ per call)."""
    write("tools/pass.py", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/top.py", "frontmatter = {'metadata': {'pass': {}}}\nasync def main(ctx):\n    return 1\n")
    asked: list[int] = []
    real = tracing.tracer
    monkeypatch.setattr(tracing, "tracer", lambda: asked.append(1) or real())
    manager = Manager([tools])
    assert await manager.invoke("top") == 1
    assert await manager.invoke("top") == 1
    assert len(asked) == 2
