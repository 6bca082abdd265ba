"""OpenTelemetry traces: one span per invocation, nested as the onion nests.

Tracing is on when the program has set a tracer provider
(``opentelemetry.trace.set_tracer_provider``; the ``otel`` extra installs the
API): nothing is imported, and no span is built, otherwise. The engine never
imports OpenTelemetry itself: a program that set a provider has imported it.

Spans:

- every invocation: named after its tool, with ``toolcascade.tool``,
  ``toolcascade.kind``, ``toolcascade.depth``, ``toolcascade.run`` and, when
  it fails, an error status with ``error.type`` (the exception's qualified
  type name, ``orchestrator.errors.ModelError``; a cancellation is not an
  error);
- a model request (the built-in ``model-call``), following the GenAI
  semantic conventions: a CLIENT span ``chat {model}`` with
  ``gen_ai.operation.name`` = ``chat``, ``gen_ai.provider.name`` (and
  ``gen_ai.system``, its name before semantic conventions 1.37, kept for the
  backends that read it), ``gen_ai.request.model``,
  ``gen_ai.request.max_tokens``, ``gen_ai.output.type`` (``json`` when the
  answer must be JSON), ``server.address`` and ``server.port`` (from the
  model's ``base-url``), and from the answer ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` and
  ``gen_ai.response.finish_reasons``, also when the answer was refused (cut
  off, or without the call ``tool-choice`` demands: the error carries it);
- a tool a model called: an INTERNAL span ``execute_tool {tool}`` with
  ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.type`` = ``function``, ``gen_ai.tool.description`` and
  ``gen_ai.tool.call.id``, the id the model gave the call (the agent loop
  puts it in the call's ``ctx.locals[CALL_ID]``).

Both carry ``gen_ai.conversation.id``, the stored conversation's id (the
agent's ``session``), and ``session.id``, the caller's session (an MCP
client's), when there is one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .version import __version__

if TYPE_CHECKING:
    from .context import Context

_cache: list[Any] = [None, None]  # [provider, tracer]
CALL_ID = "tool_call_id"
"""``ctx.locals`` key of a tool call's id, as the model gave it (set by the agent loop)."""


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


@contextmanager
def start(tracer: Any, ctx: Context, model_caller: bool) -> Iterator[Any]:
    """A span for ctx's invocation, made current; a failure sets ``error.type`` (and a refused answer's usage)."""
    tool = ctx.tool
    attributes: dict[str, Any] = {
        "toolcascade.tool": tool.name,
        "toolcascade.kind": tool.kind,
        "toolcascade.depth": ctx.depth,
        "toolcascade.run": ctx.run.id,
    }
    name = tool.name
    kinds = sys.modules["opentelemetry.trace"].SpanKind  # imported by the program that set a provider
    kind = kinds.INTERNAL
    chat = tool.name == "model-call" and isinstance(ctx.args, Mapping)
    if chat:
        name = f"chat {_chat(ctx.args, attributes)}"
        kind = kinds.CLIENT
    elif model_caller:
        name = f"execute_tool {tool.name}"
        attributes.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool.name,
                "gen_ai.tool.type": "function",
            }
        )
        if tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        ident = ctx.locals.get(CALL_ID)
        if isinstance(ident, str):
            attributes["gen_ai.tool.call.id"] = ident
    if chat or model_caller:
        attributes.update(_ids(ctx))
    with tracer.start_as_current_span(name, kind=kind, attributes=attributes) as span:
        try:
            yield span
        except Exception as exc:  # a cancellation (a BaseException) is no error of the call's
            span.set_attribute("error.type", error_type(exc))
            response = getattr(exc, "response", None)  # a refused answer still cost its tokens
            if chat and isinstance(response, Mapping):
                finish(span, ctx, response)
            raise


def _chat(request: Mapping[str, Any], attributes: dict[str, Any]) -> str:
    """Add a model request's GenAI attributes; the model's name."""
    spec = request.get("model")
    spec = spec if isinstance(spec, Mapping) else {}
    model = str(spec.get("name") or spec.get("provider") or "model")
    provider = str(spec.get("provider"))
    attributes.update(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.request.model": model,
            "gen_ai.output.type": "json" if request.get("response-format") else "text",
        }
    )
    tokens = spec.get("max-tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        attributes["gen_ai.request.max_tokens"] = tokens
    url = spec.get("base-url")
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
        except ValueError:
            return model
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if port:
            attributes["server.port"] = port
    return model


def _ids(ctx: Context) -> dict[str, str]:
    """``gen_ai.conversation.id`` (the nearest agent's ``session``) and ``session.id`` (the caller's session)."""
    found: dict[str, str] = {}
    envelope = ctx.envelope if isinstance(ctx.envelope, Mapping) else {}
    if envelope.get("session"):
        found["session.id"] = str(envelope["session"])
    here: Context | None = ctx
    while here is not None:
        session = here.locals.get("session")
        if session is not None:
            found["gen_ai.conversation.id"] = str(session)
            break
        here = here.parent
    return found


def error_type(exc: BaseException) -> str:
    """``error.type`` for an exception: its qualified type name (a built-in's bare name)."""
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


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
