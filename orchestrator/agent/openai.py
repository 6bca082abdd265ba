"""The ``openai`` provider: any OpenAI-compatible chat completions API.

OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ... through the official
``openai`` client (optional extra ``toolcascade[openai]``, imported on first
use). Base URL and key come from the spec (``base-url``, ``api-key-env``) or
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError, ModelError


class OpenAIProvider:
    """Sends requests with ``AsyncOpenAI``.

    A client is opened and closed per request: its connection pool belongs
    to one event loop, and a tool run may be the only thing a loop does, so
    nothing can be left open behind it.
    """

    def client(self, spec: Mapping[str, Any]) -> Any:
        try:
            import openai
        except ImportError as exc:
            raise ConfigurationError(
                "the openai provider needs the openai extra: pip install 'toolcascade[openai]'", key="model"
            ) from exc
        base_url = spec.get("base-url") or os.environ.get("OPENAI_BASE_URL")
        key_env = spec.get("api-key-env") or "OPENAI_API_KEY"
        api_key = os.environ.get(key_env) or ("not-needed" if base_url else None)
        if api_key is None:
            raise ConfigurationError(f"no API key: set {key_env} (or base-url for a local server)", key="model")
        return openai.AsyncOpenAI(base_url=base_url, api_key=api_key)

    async def complete(self, request: Mapping[str, Any], *, run: str) -> dict[str, Any]:
        import openai

        spec = request["model"]
        body: dict[str, Any] = {"model": spec["name"], "messages": [_wire(m) for m in request["messages"]]}
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
        body.update(spec.get("options") or {})
        try:
            async with self.client(spec) as client:
                response = await client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise ModelError(f"{spec['provider']}:{spec['name']} failed: {type(exc).__name__}: {exc}") from exc
        if not response.choices:
            raise ModelError(f"{spec['name']} answered with no choices")
        message = response.choices[0].message
        calls = []
        for call in message.tool_calls or []:
            raw = call.function.arguments or "{}"
            try:
                arguments: Any = json.loads(raw)
            except json.JSONDecodeError:
                arguments = raw  # the loop reports bad JSON back to the model
            calls.append({"id": call.id, "name": call.function.name, "arguments": arguments})
        usage = response.usage.model_dump() if response.usage is not None else {}
        return {"content": message.content, "tool_calls": calls, "usage": usage, "model": response.model}


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
