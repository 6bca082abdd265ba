"""The OTel spans go to a local viewer over OTLP/HTTP (issue 31, docs/observe.md): a receiver in the test gets them.

The receiver is a real HTTP server on 127.0.0.1 that decodes what the SDK's
OTLP/HTTP exporter posts to ``/v1/traces`` (protobuf), as Arize Phoenix or an
OpenTelemetry Collector would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from orchestrator import Manager, tracing

pytestmark = pytest.mark.anyio


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: every span posted to /v1/traces, with its service name."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.spans: list[tuple[str, Any]] = []
        self.paths: list[str] = []


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            service = next(a.value.string_value for a in resource.resource.attributes if a.key == "service.name")
            for scope in resource.scope_spans:
                self.server.spans.extend((service, span) for span in scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def attributes(span: Any) -> dict[str, Any]:
    found = {}
    for item in span.attributes:
        value = item.value
        found[item.key] = getattr(value, value.WhichOneof("value"))
    return found


async def test_spans_are_exported_over_otlp_http_to_a_local_receiver(receiver, write, tools: Path, monkeypatch):
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": "toolcascade-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=10)))
    # As a program that set its tracer provider: the engine asks tracing.tracer() for the provider's tracer.
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("toolcascade"))
    write(
        "tools/weather.py",
        "frontmatter = {'description': 'Weather.', 'metadata': {'params': {'type': 'object'}}}\n"
        "def main(ctx):\n    return {'temp': 5}\n",
    )
    script = [{"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]}, "It is 5."]
    model = {"provider": "scripted", "name": "tiny", "script": script}
    write(
        "tools/forecast.md",
        "---\n" + yaml.safe_dump({"metadata": {"model": model, "tools": ["weather"]}}) + "---\nGo.\n",
    )
    try:
        assert await Manager([tools]).invoke("forecast") == "It is 5."
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    names = [span.name for _service, span in receiver.spans]
    assert {service for service, _span in receiver.spans} == {"toolcascade-test"}
    assert names.count("chat tiny") == 2 and "execute_tool weather" in names and "forecast" in names
    chat = next(span for _service, span in receiver.spans if span.name == "chat tiny")
    found = attributes(chat)
    assert found["gen_ai.operation.name"] == "chat" and found["gen_ai.request.model"] == "tiny"
    assert found["gen_ai.usage.input_tokens"] > 0
    forecast = next(span for _service, span in receiver.spans if span.name == "forecast")
    assert chat.trace_id == forecast.trace_id  # one trace per run, as a viewer shows it
