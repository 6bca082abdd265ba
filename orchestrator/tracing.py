"""OpenTelemetry traces: one span per invocation, nested as the onion nests.

Tracing is on when the program has set a tracer provider
(``opentelemetry.trace.set_tracer_provider``; the ``otel`` extra installs the
API): nothing is imported, and no span is built, otherwise. The engine never
imports OpenTelemetry itself: a program that set a provider has imported it.

Spans:

- every invocation: named after its tool, with ``toolcascade.tool``,
  ``toolcascade.kind``, ``toolcascade.depth``, ``toolcascade.run`` and, when
  it fails, an error status with ``error.type``;
- a model request (the built-in ``model-call``), following the GenAI
  semantic conventions: ``chat {model}``, ``gen_ai.operation.name`` = ``chat``,
  ``gen_ai.system`` and ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, ``gen_ai.response.finish_reasons``;
- a tool a model called: ``execute_tool {tool}``, ``gen_ai.operation.name`` =
  ``execute_tool``, ``gen_ai.tool.name``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .context import Context

_cache: list[Any] = [None, None]  # [provider, tracer]


def tracer() -> Any | None:
    """The tracer of the program's tracer provider, or None when no provider is set (the usual case)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None  # nothing set: spans would go nowhere
    if _cache[0] is not provider:
        _cache[:] = [provider, provider.get_tracer("toolcascade", __version__)]
    return _cache[1]


def start(tracer: Any, ctx: Context, model_caller: bool) -> Any:
    """A span for ctx's invocation, made current (use as a context manager)."""
    tool = ctx.tool
    attributes: dict[str, Any] = {
        "toolcascade.tool": tool.name,
        "toolcascade.kind": tool.kind,
        "toolcascade.depth": ctx.depth,
        "toolcascade.run": ctx.run.id,
    }
    name = tool.name
    if tool.name == "model-call" and isinstance(ctx.args, Mapping):
        spec = ctx.args.get("model")
        spec = spec if isinstance(spec, Mapping) else {}
        model = str(spec.get("name") or spec.get("provider") or "model")
        name = f"chat {model}"
        attributes.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": str(spec.get("provider")),
                "gen_ai.provider.name": str(spec.get("provider")),
                "gen_ai.request.model": model,
            }
        )
    elif model_caller:
        name = f"execute_tool {tool.name}"
        attributes.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.name})
    return tracer.start_as_current_span(name, attributes=attributes)


def finish(span: Any, ctx: Context, result: Any) -> None:
    """Add what the result tells: a model response's model, usage and finish reason."""
    if ctx.tool.name != "model-call" or not isinstance(result, Mapping):
        return
    if result.get("model"):
        span.set_attribute("gen_ai.response.model", str(result["model"]))
    usage = result.get("usage")
    if isinstance(usage, Mapping):
        for ours, theirs in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
            value = usage.get(ours, usage.get(theirs))
            if isinstance(value, int):
                span.set_attribute(f"gen_ai.usage.{ours}", value)
    reason = result.get("finish_reason")
    if isinstance(reason, str):
        span.set_attribute("gen_ai.response.finish_reasons", [reason])
