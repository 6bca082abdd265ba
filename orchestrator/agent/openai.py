"""The ``openai`` provider: any OpenAI-compatible chat completions API.

OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ... through the official
``openai`` client (the optional ``openai`` extra, imported on first
use). Base URL and key come from the spec (``base-url``, ``api-key-env``) or
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.

Requests stream (``stream: true`` with ``stream_options: {include_usage:
true}``); the answer is assembled from the chunks while each piece goes to
the delta callback. The chunks are read from the HTTP response to its end
(``read_events``) rather than through the SDK's stream iterator, which stops
at ``[DONE]`` and leaves its inner async generators unclosed (trio warns
about every one). ``options: {stream: false}`` sends one unstreamed request
instead, for servers that stream tool calls badly. The client never retries
(``max_retries=0``): ``retry`` on the model pipeline is the only retry, so a
failing request is sent exactly as often as it says.

``max-tokens`` is sent as ``max_completion_tokens`` to OpenAI itself (its
reasoning models refuse ``max_tokens``) and as ``max_tokens`` to a server
named by a base URL (what compatible servers understand); either one in
``options`` replaces it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio

from ..errors import ModelError
from .http import read_events, request_options, sdk_client, sdk_error, timed_out, transport_error
from .model import Delta, label, max_tokens, normal_usage, timeouts

DEFAULT_URL = "https://api.openai.com/v1"
RESERVED = {
    "model": "set the model's name",
    "messages": "the agent sends the conversation",
    "tools": "list them in the tool's tools metadata",
    "stream_options": "usage is always requested",
    "n": "an agent needs exactly one answer",
}


class OpenAIProvider:
    """Sends requests with ``AsyncOpenAI``.

    A client is opened and closed per request: its connection pool belongs
    to one event loop, and a tool run may be the only thing a loop does, so
    nothing can be left open behind it.
    """

    def client(self, spec: Mapping[str, Any]) -> tuple[Any, str, str]:
        """``(AsyncOpenAI, base URL, the key's variable)`` for a spec (see ``http.sdk_client``).

        Raises:
            ConfigurationError: the SDK is not installed, or no key.
        """
        return sdk_client("openai", "AsyncOpenAI", spec, "OPENAI", DEFAULT_URL)

    async def complete(self, request: Mapping[str, Any], *, run: str, on_delta: Delta | None = None) -> dict[str, Any]:
        """Send one request and assemble the answer, streaming its pieces to ``on_delta``.

        Raises:
            ConfigurationError: a bad setting (key, options).
            ModelError: the server failed, timed out or answered out of shape (see ``sdk_error``).
        """
        import openai

        spec = request["model"]
        options, stream = request_options(spec, RESERVED)
        client, url, key_env = self.client(spec)
        body = _body(request, spec, url != DEFAULT_URL)
        if options:
            body["extra_body"] = options  # sent as they are: a server's own parameters too (top_k ...)
        total, _connect = timeouts(spec)
        async with client:  # closed outside the timeout's scope, so a cancelled stream still frees its connection
            with anyio.move_on_after(total):
                try:
                    if not stream:
                        return _answer(await client.chat.completions.create(**body), spec)
                    body["stream"] = True
                    body["stream_options"] = {"include_usage": True}
                    return await _streamed(client, body, spec, on_delta)
                except Exception as exc:
                    if isinstance(exc, openai.OpenAIError) or transport_error(exc):
                        raise sdk_error(exc, spec, url, key_env) from exc
                    raise
        raise timed_out(spec, url)


def _body(request: Mapping[str, Any], spec: Mapping[str, Any], compatible: bool) -> dict[str, Any]:
    """The chat completions request body (options are added by the caller)."""
    body: dict[str, Any] = {"model": spec["name"], "messages": [_wire(m) for m in request["messages"]]}
    options = spec.get("options") or {}
    if "max_tokens" not in options and "max_completion_tokens" not in options:
        body["max_tokens" if compatible else "max_completion_tokens"] = max_tokens(spec)
    tools = request.get("tools") or []
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description") or "",
                    "parameters": t["parameters"],
                },
            }
            for t in tools
        ]
        choice = request.get("tool-choice") or "auto"
        body["tool_choice"] = (
            choice if choice in ("auto", "none", "required") else {"type": "function", "function": {"name": choice}}
        )
    if request.get("response-format"):
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "result", "schema": request["response-format"]},
        }
    return body


async def _streamed(
    client: Any, body: dict[str, Any], spec: Mapping[str, Any], on_delta: Delta | None
) -> dict[str, Any]:
    """Send a streamed request and assemble its answer from the chunks, handing each piece to ``on_delta``.

    Raises:
        ModelError: the stream carried an error, bad JSON, or nothing at all.
    """
    chunks = _Chunks(spec, on_delta)
    async with client.chat.completions.with_streaming_response.create(**body) as raw:
        await read_events(raw.http_response, chunks.feed)
    return chunks.answer()


class _Chunks:
    """Assembles a streamed chat completion from its ``data:`` events (never raising while the stream is read)."""

    def __init__(self, spec: Mapping[str, Any], on_delta: Delta | None) -> None:
        self.spec = spec
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.model = spec["name"]
        self.received = False
        self.error: str | None = None

    def feed(self, _event: str | None, data: str) -> None:
        """Take one event's data: a JSON chunk, an error, or ``[DONE]``."""
        if data.strip() == "[DONE]" or self.error is not None:
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            self.error = f"sent a stream chunk that is not JSON: {data[:200]!r}"
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("error"):
            error = chunk["error"]
            self.error = str(error.get("message") if isinstance(error, dict) else error)
            return
        self.received = True
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.finish = choice.get("finish_reason") or self.finish
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
                if self.on_delta is not None:
                    self.on_delta({"text": delta["content"]})
            for part in delta.get("tool_calls") or []:
                self._call(part)

    def _call(self, part: dict[str, Any]) -> None:
        """One tool-call fragment: the first names the call, the rest carry pieces of its arguments."""
        index = part.get("index", 0)
        call = self.calls.get(index)
        fresh = call is None
        if call is None:
            call = self.calls[index] = {"id": None, "name": "", "arguments": []}
        function = part.get("function") or {}
        if part.get("id") and not call["id"]:
            call["id"] = part["id"]
        if function.get("name") and not call["name"]:
            call["name"] = function["name"]  # some servers repeat the name on every fragment
        fragment = function.get("arguments") or ""
        call["arguments"].append(fragment)
        if self.on_delta is not None and (fragment or fresh):
            self.on_delta({"call": call["name"], "arguments": fragment, "index": index})

    def answer(self) -> dict[str, Any]:
        """The assembled response.

        Raises:
            ModelError: the stream carried an error, bad JSON, or no chunk.
        """
        where = f"model {label(self.spec)}"
        if self.error is not None:
            raise ModelError(f"{where} failed while streaming: {self.error}", retryable=True)
        if not self.received:
            raise ModelError(f"{where} answered with an empty stream", retryable=True)
        usage = self.usage or {}
        return {
            "content": "".join(self.text) if self.text else None,
            "tool_calls": [
                {
                    "id": call["id"] or f"call_{index}",
                    "name": call["name"],
                    "arguments": _arguments("".join(call["arguments"])),
                }
                for index, call in sorted(self.calls.items())
            ],
            "finish_reason": self.finish,
            "usage": normal_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")) if usage else {},
            "model": self.model,
        }


def _answer(response: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """An unstreamed chat completion as our response mapping.

    Raises:
        ModelError: the answer holds no choices.
    """
    if not response.choices:
        raise ModelError(f"model {label(spec)} answered with no choices")
    choice = response.choices[0]
    message = choice.message
    calls = [
        {"id": call.id, "name": call.function.name, "arguments": _arguments(call.function.arguments or "")}
        for call in message.tool_calls or []
    ]
    return {
        "content": message.content,
        "tool_calls": calls,
        "finish_reason": choice.finish_reason,
        "usage": _usage(response.usage),
        "model": response.model or spec["name"],
    }


def _arguments(raw: str) -> Any:
    """Parsed tool-call arguments, or the raw text: the loop reports bad JSON back to the model."""
    try:
        return json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw


def _usage(usage: Any) -> dict[str, int]:
    """Token counts from the API's usage object (zeros when the server sent none)."""
    if usage is None:
        return {}  # unknown, not zero: the server sent no counts
    return normal_usage(getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message as the API wants it: assistant tool calls carry "" content, never null."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if message.get("tool_calls"):
        out["content"] = message.get("content") or ""
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]),
                },
            }
            for c in message["tool_calls"]
        ]
    return out
