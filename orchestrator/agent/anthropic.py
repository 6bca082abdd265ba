"""The ``anthropic`` provider: Claude models through the Messages API.

Through the official ``anthropic`` client (the optional
``anthropic`` extra, imported on first use). Base URL and key come from
the spec (``base-url``, ``api-key-env``) or ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY``; ``base-url`` is the server's root (the client adds
``/v1/messages``).

The mapping, both ways:

- ``system`` messages become the ``system`` parameter; a requested JSON
  answer (``response-format``) adds an instruction with its schema there, as
  the Messages API has no response format of its own.
- An assistant turn's tool calls become ``tool_use`` blocks (after its text);
  ``tool`` messages become ``tool_result`` blocks of one user message
  (``is_error`` when the result is an ``error: ...`` text). A turn that is
  one text block is sent as its text.
- ``tool-choice`` ``auto``, ``required``, ``none``, a tool's name become
  ``{type: auto}``, ``{type: any}``, ``{type: none}``, ``{type: tool, name}``.
- ``max_tokens``, which this API requires, is the spec's ``max-tokens``.
- The answer's text blocks join into ``content``; ``tool_use`` blocks become
  ``tool_calls``; ``stop_reason`` becomes ``finish_reason`` (``end_turn`` ->
  ``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` and
  ``model_context_window_exceeded`` -> ``length``, told apart by the usage);
  usage counts input tokens (cache reads and writes included) as prompt
  tokens and output tokens as completion tokens.

Requests stream (``options: {stream: false}`` sends one unstreamed request);
either way the answer's bytes are read and checked by ``answer.Answer``
(within ``Limits.model_answer``, every field's type checked, anything else
a ``ModelError`` naming the URL, the status and an excerpt). ``options`` go
into the request body as they are (``temperature``,
``top_k``, ``metadata`` ...). The client never retries (``max_retries=0``):
``retry`` on the model pipeline is the only retry. Extended thinking is not
supported: thinking blocks are not sent back on the next turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import anyio

from ..errors import ConfigurationError
from .answer import Answer, BadAnswer, decode, field, mapping, server_error
from .http import request_options, sdk_client, sdk_error, timed_out, transport_error
from .media import anthropic_tool_result
from .protocol import Delta, max_tokens, normal_usage, timeouts

DEFAULT_URL = "https://api.anthropic.com"
RESERVED = {
    "model": "set the model's name",
    "messages": "the agent sends the conversation",
    "system": "write it as the tool's system metadata",
    "tools": "list them in the tool's tools metadata",
    "tool_choice": "set tool-choice in the tool's metadata",
    "max_tokens": "set max-tokens in the model spec",
}
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}
ERRORS_TO_RETRY = ("overloaded_error", "api_error", "rate_limit_error")
"""Error types an Anthropic server reports for its own trouble, in a stream or a 200 answer: another try may work."""
CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
JSON_ANSWER = "Answer with only a JSON value matching this JSON schema, and no other text:\n"


class AnthropicProvider:
    """Sends requests with ``AsyncAnthropic``, kept as ``OpenAIProvider`` keeps its client."""

    def client(self, spec: Mapping[str, Any]) -> AbstractAsyncContextManager[tuple[Any, str, str]]:
        """``(AsyncAnthropic, base URL, the key's variable)`` for a spec, for one request (see ``http.sdk_client``).

        Raises:
            ConfigurationError: the SDK is not installed, or no key.
        """
        return sdk_client("anthropic", "AsyncAnthropic", spec, "ANTHROPIC", DEFAULT_URL)

    async def complete(self, request: Mapping[str, Any], *, run: str, on_delta: Delta | None = None) -> dict[str, Any]:
        """Send one request and assemble the answer, streaming its pieces to ``on_delta``.

        Raises:
            ConfigurationError: a bad setting (key, options).
            ModelError: the server failed, timed out or answered out of shape (see ``sdk_error``
                and ``answer``).
        """
        import anthropic

        spec = request["model"]
        options, stream = request_options(spec, RESERVED)
        body = request_body(request, spec)
        if options:
            body["extra_body"] = options
        total, _connect = timeouts(spec)
        # the client is released outside the timeout's scope, so a cancelled stream still frees its connection
        async with self.client(spec) as (client, url, key_env):
            with anyio.move_on_after(total):
                try:
                    if stream:
                        body["stream"] = True
                    async with client.messages.with_streaming_response.create(**body) as raw:
                        answer = Answer(spec, raw.http_response)
                        if not stream:
                            return await answer.json(partial(_message, spec))
                        events = _Events(spec, on_delta)
                        return await answer.events(events.feed, events.answer)
                except Exception as exc:
                    if isinstance(exc, anthropic.AnthropicError) or transport_error(exc):
                        raise sdk_error(exc, spec, url, key_env) from exc
                    raise
        raise timed_out(spec, url)


def request_body(request: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The Messages API parameters for one of our requests (without ``stream`` and options)."""
    system = [str(m.get("content") or "") for m in request["messages"] if m.get("role") == "system"]
    if request.get("response-format"):
        system.append(JSON_ANSWER + json.dumps(request["response-format"]))
    body: dict[str, Any] = {
        "model": spec["name"],
        "max_tokens": max_tokens(spec),
        "messages": messages(request["messages"]),
    }
    if system:
        body["system"] = "\n\n".join(part for part in system if part)
    tools = request.get("tools") or []
    if tools:
        body["tools"] = [
            {"name": t["name"], "description": t.get("description") or "", "input_schema": t["parameters"]}
            for t in tools
        ]
        choice = request.get("tool-choice") or "auto"
        body["tool_choice"] = CHOICES.get(choice) or {"type": "tool", "name": choice}
    return body


def messages(ours: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Our chat messages as Messages API turns: blocks, tool results in user turns, same roles merged."""
    turns: list[dict[str, Any]] = []
    for message in ours:
        role = message.get("role")
        if role == "system":
            continue
        if role == "tool":
            content = anthropic_tool_result(message.get("content"), _block)
            text = content if isinstance(content, str) else ""
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": content,
            }
            if text.startswith("error: "):
                block["is_error"] = True
            blocks = [block]
            role = "user"
        else:
            blocks = []
            content = message.get("content")
            if isinstance(content, list):
                blocks.extend(_block(part) for part in content)
            elif content:
                blocks.append({"type": "text", "text": str(content)})
            for call in message.get("tool_calls") or []:
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"], "input": _input(call)})
        if not blocks:
            continue  # the API refuses empty turns
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # a turn of one text block goes as its text: a smaller body, built and read faster
        content = turn["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            turn["content"] = content[0]["text"]
    return turns


def _block(part: Mapping[str, Any]) -> dict[str, Any]:
    """A content part as a Messages API block: text, an image, or a document (``media.py``'s parts).

    Raises:
        ConfigurationError: audio, which the Messages API does not take.
    """
    if part.get("type") != "media":
        return {"type": "text", "text": str(part.get("text") or "")}
    if part["kind"] == "audio":
        raise ConfigurationError(f"arg {part['name']!r}: anthropic models take no audio", key="params")
    if part.get("url"):
        source: dict[str, Any] = {"type": "url", "url": part["url"]}
    else:
        source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
    return {"type": "image" if part["kind"] == "image" else "document", "source": source}


def _input(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a ``tool_use`` input, which must be an object."""
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return {"raw": arguments}  # the model's own bad JSON, kept so it can see what it sent
    return dict(arguments) if isinstance(arguments, Mapping) else {"value": arguments}


class _Events:
    """Assembles a streamed message from its events, checking each field's type."""

    def __init__(self, spec: Mapping[str, Any], on_delta: Delta | None) -> None:
        self.spec = spec
        self.on_delta = on_delta
        self.blocks: dict[int, dict[str, Any]] = {}
        self.calls = 0
        self.stop: str | None = None
        self.prompt = 0
        self.completion: int | None = None
        self.model = spec["name"]
        self.started = False

    def feed(self, event: str | None, data: str) -> None:
        """Take one event: ``message_start``, ``content_block_*``, ``message_delta``, ``error`` ...

        Raises:
            BadAnswer: the event is not JSON, of the wrong shape, or an error the server sent.
        """
        try:
            self._event(event, decode(data))
        except BadAnswer as bad:
            raise bad.showing(data) from None

    def _event(self, event: str | None, value: Any) -> None:
        payload = mapping(value, "an event")
        kind = field(payload, "type", str) or event
        if kind == "error":
            error = payload.get("error")
            # overloaded_error and api_error are the server's trouble: another try may work
            retry = not isinstance(error, dict) or error.get("type") in ERRORS_TO_RETRY
            name = error.get("type", "error") if isinstance(error, dict) else "error"
            raise BadAnswer(f"failed while streaming: {name}: {server_error(error)}", retryable=retry)
        if kind == "message_start":
            self.started = True
            message = field(payload, "message", dict) or {}
            self.model = field(message, "model", str) or self.model
            usage = field(message, "usage", dict) or {}
            self.prompt = _prompt_tokens(usage.get)
            self.completion = usage.get("output_tokens")
        elif kind == "content_block_start":
            index = field(payload, "index", int)
            self._start(len(self.blocks) if index is None else index, field(payload, "content_block", dict) or {})
        elif kind == "content_block_delta":
            self._delta(field(payload, "index", int) or 0, field(payload, "delta", dict) or {})
        elif kind == "message_delta":
            self.stop = field(field(payload, "delta", dict) or {}, "stop_reason", str) or self.stop
            usage = field(payload, "usage", dict) or {}
            if isinstance(usage.get("output_tokens"), int):
                self.completion = usage["output_tokens"]  # cumulative: the last one counts

    def _start(self, index: int, block: dict[str, Any]) -> None:
        kind = field(block, "type", str)
        if kind == "tool_use":
            name = field(block, "name", str, required=True)
            self.blocks[index] = {"type": "tool_use", "id": field(block, "id", str), "name": name, "json": []}
            if self.on_delta is not None:
                self.on_delta({"call": name, "arguments": "", "index": self.calls})
            self.blocks[index]["call"] = self.calls
            self.calls += 1
        elif kind == "text":
            self.blocks[index] = {"type": "text", "text": [field(block, "text", str) or ""]}

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.get(index)
        if block is None:
            return  # a block this provider does not map (thinking)
        kind = field(delta, "type", str)
        if kind == "text_delta" and block["type"] == "text":
            text = field(delta, "text", str) or ""
            block["text"].append(text)
            if self.on_delta is not None and text:
                self.on_delta({"text": text})
        elif kind == "input_json_delta" and block["type"] == "tool_use":
            fragment = field(delta, "partial_json", str) or ""
            block["json"].append(fragment)
            if self.on_delta is not None and fragment:
                self.on_delta({"call": block["name"], "arguments": fragment, "index": block["call"]})

    def answer(self) -> dict[str, Any]:
        """The assembled response.

        Raises:
            BadAnswer: the stream held no message.
        """
        if not self.started:
            raise BadAnswer("the stream holds no message", retryable=True)
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        texts = ["".join(b["text"]) for b in ordered if b["type"] == "text"]
        calls = []
        for block in ordered:
            if block["type"] == "tool_use":
                raw = "".join(block["json"])
                try:
                    arguments: Any = json.loads(raw or "{}")
                except json.JSONDecodeError:
                    arguments = raw  # the loop reports bad JSON back to the model
                calls.append({"id": block["id"], "name": block["name"], "arguments": arguments})
        return {
            "content": "".join(texts) if texts else None,
            "tool_calls": calls,
            "finish_reason": FINISH.get(self.stop or "", self.stop),
            "usage": normal_usage(self.prompt, self.completion),
            "model": self.model,
        }


def _message(spec: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """An unstreamed message (its JSON value) as our response mapping.

    Raises:
        BadAnswer: an error object, or any field of the wrong type.
    """
    if isinstance(value, dict) and (value.get("type") == "error" or value.get("error")):
        error = value.get("error")
        retry = not isinstance(error, dict) or error.get("type") in ERRORS_TO_RETRY
        raise BadAnswer(f"the server answered with an error: {server_error(error)}", retryable=retry)
    body = mapping(value, "the answer")
    texts, calls = [], []
    for item in field(body, "content", list, required=True):
        block = mapping(item, "a content block")
        kind = field(block, "type", str, required=True)
        if kind == "text":
            texts.append(field(block, "text", str, required=True))
        elif kind == "tool_use":
            name = field(block, "name", str, required=True)
            calls.append({"id": field(block, "id", str), "name": name, "arguments": field(block, "input", dict) or {}})
    usage = field(body, "usage", dict) or {}
    stop = field(body, "stop_reason", str)
    return {
        "content": "".join(texts) if texts else None,
        "tool_calls": calls,
        "finish_reason": FINISH.get(stop or "", stop),
        "usage": normal_usage(_prompt_tokens(usage.get), usage.get("output_tokens")),
        "model": field(body, "model", str) or spec["name"],
    }


def _prompt_tokens(get: Any) -> int:
    """Input tokens, cache writes and reads included: all of them were the prompt."""
    counts = (get(key) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return sum(count for count in counts if isinstance(count, int))
