"""The ``openai`` provider: any OpenAI-compatible chat completions API.

OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ... through the official
``openai`` client (the optional ``openai`` extra, imported on first
use). Base URL and key come from the spec (``base-url``, ``api-key-env``) or
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.

Two more providers speak the same API with their own defaults: ``ollama``
(``OLLAMA_URL``, a local Ollama server, no key; ``OLLAMA_BASE_URL`` and
``OLLAMA_API_KEY`` change them) and ``gemini`` (Google's OpenAI-compatible
endpoint, ``GEMINI_URL``, the key in ``GEMINI_API_KEY``).

Requests stream (``stream: true`` with ``stream_options: {include_usage:
true}``); the answer is assembled from the chunks while each piece goes to
the delta callback. ``options: {stream: false}`` sends one unstreamed request
instead, for servers that stream tool calls badly. Either way the SDK sends
the request and maps error statuses (``sdk_error``), and the answer's bytes
are read and checked by ``answer.Answer`` rather than by the SDK's stream
iterator and models: within ``Limits.model_answer`` bytes, every field's
type checked, anything else a ``ModelError`` naming the URL, the status and
an excerpt (the SDK's iterator also stops at ``[DONE]`` and leaves its
inner async generators unclosed, which trio warns about). The client never retries
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
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import anyio

from ..errors import ConfigurationError
from .answer import Answer, BadAnswer, decode, field, mapping, server_error
from .http import request_options, sdk_client, sdk_error, timed_out, transport_error
from .media import openai_turns
from .protocol import Delta, max_tokens, normal_usage, timeouts

DEFAULT_URL = "https://api.openai.com/v1"
OLLAMA_URL = "http://127.0.0.1:11434/v1"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"
RESERVED = {
    "model": "set the model's name",
    "messages": "the agent sends the conversation",
    "tools": "list them in the tool's tools metadata",
    "stream_options": "usage is always requested",
    "n": "an agent needs exactly one answer",
}


class OpenAIProvider:
    """Sends requests with ``AsyncOpenAI``.

    In the agent loop the client is the Manager's, one per configuration and
    event loop (``orchestrator.agent.clients``); elsewhere one per request.
    ``env`` prefixes the variables of its base URL and key (``OPENAI``:
    ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); ``url`` is where requests go
    when nothing else says (None: OpenAI's); ``local``: that is a server on
    this machine, asked without a key (``ollama``).
    """

    def __init__(self, env: str = "OPENAI", url: str | None = None, *, local: bool = False) -> None:
        self.env = env
        self.url = url  # None: the SDK's own default, OpenAI's
        self.local = local

    def client(self, spec: Mapping[str, Any]) -> AbstractAsyncContextManager[tuple[Any, str, str]]:
        """``(AsyncOpenAI, base URL, the key's variable)`` for a spec, for one request (see ``http.sdk_client``).

        Raises:
            ConfigurationError: the SDK is not installed, or no key.
        """
        return sdk_client("openai", "AsyncOpenAI", spec, self.env, DEFAULT_URL, endpoint=self.url, local=self.local)

    async def complete(self, request: Mapping[str, Any], *, run: str, on_delta: Delta | None = None) -> dict[str, Any]:
        """Send one request and assemble the answer, streaming its pieces to ``on_delta``.

        Raises:
            ConfigurationError: a bad setting (key, options).
            ModelError: the server failed, timed out or answered out of shape (see ``sdk_error``
                and ``answer``).
        """
        import openai

        spec = request["model"]
        options, stream = request_options(spec, RESERVED)
        total, _connect = timeouts(spec)
        # the client is released outside the timeout's scope, so a cancelled stream still frees its connection
        async with self.client(spec) as (client, url, key_env):
            body = _body(request, spec, url != DEFAULT_URL)
            if options:
                body["extra_body"] = options  # sent as they are: a server's own parameters too (top_k ...)
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            with anyio.move_on_after(total):
                try:
                    async with client.chat.completions.with_streaming_response.create(**body) as raw:
                        answer = Answer(spec, raw.http_response)
                        if not stream:
                            return await answer.json(partial(_completion, spec))
                        chunks = _Chunks(spec, on_delta)
                        return await answer.events(chunks.feed, chunks.answer)
                except Exception as exc:
                    if isinstance(exc, openai.OpenAIError) or transport_error(exc):
                        raise sdk_error(exc, spec, url, key_env) from exc
                    raise
        raise timed_out(spec, url)


def _body(request: Mapping[str, Any], spec: Mapping[str, Any], compatible: bool) -> dict[str, Any]:
    """The chat completions request body (options are added by the caller)."""
    body: dict[str, Any] = {"model": spec["name"], "messages": [_wire(m) for m in openai_turns(request["messages"])]}
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


class _Chunks:
    """Assembles a streamed chat completion from its ``data:`` events, checking each field's type."""

    def __init__(self, spec: Mapping[str, Any], on_delta: Delta | None) -> None:
        self.spec = spec
        self.on_delta = on_delta
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.model = spec["name"]
        self.received = False

    def feed(self, _event: str | None, data: str) -> None:
        """Take one event's data: a JSON chunk, an error, or ``[DONE]``.

        Raises:
            BadAnswer: the chunk is not JSON, of the wrong shape, or an error the server sent.
        """
        if data.strip() == "[DONE]":
            return
        try:
            self._chunk(decode(data))
        except BadAnswer as bad:
            raise bad.showing(data) from None

    def _chunk(self, value: Any) -> None:
        chunk = mapping(value, "a stream chunk")
        if chunk.get("error"):
            raise BadAnswer(f"failed while streaming: {server_error(chunk['error'])}", retryable=True)
        self.received = True
        self.model = field(chunk, "model", str) or self.model
        self.usage = field(chunk, "usage", dict) or self.usage
        for choice in field(chunk, "choices", list) or []:
            choice = mapping(choice, "a choice")
            if field(choice, "index", int) not in (None, 0):
                continue
            self.finish = field(choice, "finish_reason", str) or self.finish
            delta = field(choice, "delta", dict) or {}
            content = field(delta, "content", str)
            if content:
                self.text.append(content)
                if self.on_delta is not None:
                    self.on_delta({"text": content})
            for part in field(delta, "tool_calls", list) or []:
                self._call(mapping(part, "a tool call"))

    def _call(self, part: dict[str, Any]) -> None:
        """One tool-call fragment: the first names the call, the rest carry pieces of its arguments."""
        index = field(part, "index", int) or 0
        call = self.calls.get(index)
        fresh = call is None
        if call is None:
            call = self.calls[index] = {"id": None, "name": "", "arguments": []}
        function = field(part, "function", dict) or {}
        ident, name = field(part, "id", str), field(function, "name", str)
        if ident and not call["id"]:
            call["id"] = ident
        if name and not call["name"]:
            call["name"] = name  # some servers repeat the name on every fragment
        fragment = field(function, "arguments", str) or ""
        call["arguments"].append(fragment)
        if self.on_delta is not None and (fragment or fresh):
            self.on_delta({"call": call["name"], "arguments": fragment, "index": index})

    def answer(self) -> dict[str, Any]:
        """The assembled response.

        Raises:
            BadAnswer: the stream held no chunk.
        """
        if not self.received:
            raise BadAnswer("the stream holds no chunk", retryable=True)
        usage = self.usage
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


def _completion(spec: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """An unstreamed chat completion (its JSON value) as our response mapping.

    Raises:
        BadAnswer: an error object, no choices (retryable), or any field of the wrong type.
    """
    if isinstance(value, dict) and value.get("error"):
        raise BadAnswer(f"the server answered with an error: {server_error(value['error'])}", retryable=True)
    body = mapping(value, "the answer")
    choices = field(body, "choices", list, required=True)
    if not choices:
        raise BadAnswer("the answer holds no choices", retryable=True)
    choice = mapping(choices[0], "choices[0]")
    message = field(choice, "message", dict, required=True)
    calls = []
    for index, item in enumerate(field(message, "tool_calls", list) or []):
        call = mapping(item, "a tool call")
        function = field(call, "function", dict, required=True)
        arguments = field(function, "arguments", str, dict) or ""
        calls.append(
            {
                "id": field(call, "id", str) or f"call_{index}",
                "name": field(function, "name", str, required=True),
                "arguments": arguments if isinstance(arguments, dict) else _arguments(arguments),
            }
        )
    usage = field(body, "usage", dict)
    return {
        "content": field(message, "content", str),
        "tool_calls": calls,
        "finish_reason": field(choice, "finish_reason", str),
        "usage": normal_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")) if usage else {},
        "model": field(body, "model", str) or spec["name"],
    }


def _arguments(raw: str) -> Any:
    """Parsed tool-call arguments, or the raw text: the loop reports bad JSON back to the model."""
    try:
        return json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw


WIRE_FIELDS = {
    "system": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "content"),
    "tool": ("role", "tool_call_id", "content"),
}
"""The fields each role's message carries on the wire: strict servers refuse others (a tool result's ``name``)."""


AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/x-wav": "wav", "audio/wav": "wav"}


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A content part as chat completions want it: an image URL, input audio or a file (``media.py``'s parts).

    Raises:
        ConfigurationError: audio given as a URL (the API takes audio data only).
    """
    if part.get("type") != "media":
        return dict(part)
    url = part.get("url") or f"data:{part['media_type']};base64,{part['data']}"
    if part["kind"] == "image":
        return {"type": "image_url", "image_url": {"url": url}}
    if part["kind"] == "audio":
        if part.get("url"):
            raise ConfigurationError(
                f"arg {part['name']!r}: audio goes to an OpenAI-compatible model as data, not a URL"
            )
        subtype = str(part["media_type"]).partition("/")[2]
        return {
            "type": "input_audio",
            "input_audio": {"data": part["data"], "format": AUDIO_FORMATS.get(part["media_type"], subtype)},
        }
    return {"type": "file", "file": {"filename": part["name"], "file_data": url}}


def _wire(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message as the API wants it: only its role's fields; assistant tool calls carry "" content, never null.

    Our conversation keeps a tool result's ``name`` (sessions show which tool
    answered); the API has no such field and strict servers reject it.
    """
    fields = WIRE_FIELDS.get(str(message.get("role")))
    out = {k: v for k, v in message.items() if k in fields} if fields else dict(message)
    out.pop("tool_calls", None)
    if isinstance(out.get("content"), list):
        out["content"] = [_part(part) for part in out["content"]]
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
