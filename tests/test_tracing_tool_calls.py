"""execute_tool spans name the model's id for the call (gen_ai.tool.call.id, issue 29), read from the in-memory exporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from orchestrator import Manager, tracing

pytestmark = pytest.mark.anyio

WEATHER = """
frontmatter = {"description": "Weather in a city.", "metadata": {"params": {"type": "object"}}}
def main(ctx):
    return {"temp": len(ctx.args["city"])}
"""


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("test"))
    return exporter


async def test_execute_tool_spans_carry_the_calls_ids(write: Any, tools: Path, spans: InMemorySpanExporter) -> None:
    write("tools/weather.py", WEATHER)
    calls = [{"name": "weather", "arguments": {"city": "Paris"}}, {"name": "weather", "arguments": {"city": "Oslo"}}]
    model = {"provider": "scripted", "script": [{"calls": calls}, "done"]}
    write(
        "tools/forecast.md",
        "---\n" + yaml.safe_dump({"metadata": {"model": model, "tools": ["weather"]}}) + "---\nGo.\n",
    )
    manager = Manager([tools])
    sent: list[Any] = []
    manager.events.listeners.append(lambda e: sent.append(e.data["messages"]) if e.kind == "model.request" else None)
    assert await manager.invoke("forecast") == "done"
    given = {c["id"] for m in sent[1] for c in m.get("tool_calls") or ()}  # the ids the model gave its calls
    assert len(given) == 2
    found = {
        s.attributes["gen_ai.tool.call.id"] for s in spans.get_finished_spans() if s.name == "execute_tool weather"
    }
    assert found == given
    # only the spans of calls a model made carry one
    assert all(
        "gen_ai.tool.call.id" not in s.attributes for s in spans.get_finished_spans() if "execute_tool" not in s.name
    )
