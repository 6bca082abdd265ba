"""The ``scripted`` provider: an offline, deterministic model that replays a script.

A script is a list of assistant turns, inline (``model: {provider: scripted,
script: [...]}``) or in a YAML file (``file: replies.yaml``, relative to the
tool). Turn N answers the request that already holds N assistant messages,
so replays are stateless and concurrent runs never interfere. A turn is a
string (the answer) or a mapping:

    answer: text               # or content:
    calls:                     # tool calls (tool_calls: works too)
      - {name: weather, arguments: {city: Paris}}
    fail: 2                    # the first 2 attempts at this turn fail ...
    error: rate limited        # ... with this message (a ModelError)
    status: 429                # ... as this HTTP status (429, 5xx or none: retryable; 400: not)
    retry-after: 0.1           # ... asking to wait this many seconds
    partial: It is             # ... after streaming this text
    finish: length             # the finish reason (default: stop, or tool_calls)
    usage: {prompt_tokens: 9, completion_tokens: 3}
    expect:                    # checks on what the model was sent
      contains: Paris          # some message contains each of these strings
      tools: [weather]         # exactly these tools were offered
      tool-choice: required    # the tool choice sent
      last-role: tool          # role of the last message
      response-format: true    # a JSON answer was asked for

Answers stream like a real model's: the text word by word, each call's
arguments as JSON text in pieces of ``PIECE`` characters. Without ``usage``,
a turn reports the words of the request as prompt tokens and its pieces as
completion tokens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from ..documents import parse_yaml
from ..errors import ConfigurationError, ModelError, ToolDefinitionError
from ..loader import read_text
from .protocol import Delta, normal_usage

_FILES: dict[str, tuple[tuple[int, int], list[Any]]] = {}
_ATTEMPTS: dict[tuple[str, str, int], int] = {}
_ATTEMPTS_LIMIT = 10_000
_FILES_LIMIT = 1024
PIECE = 8


def load_script(spec: Mapping[str, Any]) -> list[Any]:
    """The script of a spec: inline, or its YAML file (cached by mtime and size).

    Raises:
        ConfigurationError: no script, an unreadable file, or a file that is not a YAML list.
    """
    if spec.get("script") is not None:
        script = spec["script"]
    elif spec.get("file"):
        script = _load_file(str(spec["file"]))
    else:
        raise ConfigurationError("a scripted model needs 'script' (a list of turns) or 'file'", key="model")
    if not isinstance(script, list):
        raise ConfigurationError("a model script must be a list of turns", key="model")
    return script


def _load_file(path: str) -> list[Any]:
    """A script file's turns, read within the default limits like any YAML someone else wrote.

    Raises:
        ConfigurationError: unreadable, over the limits, not YAML, or not a list.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigurationError(f"cannot read model script: {exc}", path=path, key="model") from exc
    sig = (st.st_mtime_ns, st.st_size)
    hit = _FILES.get(path)
    if hit is not None and hit[0] == sig:
        return hit[1]
    try:
        data, _node = parse_yaml(read_text(Path(path)), Path(path), what="model script")
    except ToolDefinitionError as exc:
        raise ConfigurationError(
            f"cannot read model script: {exc.detail}", path=path, line=exc.line, key="model"
        ) from exc
    if not isinstance(data, list):
        raise ConfigurationError("a model script file must hold a YAML list of turns", path=path, key="model")
    if len(_FILES) >= _FILES_LIMIT:
        _FILES.clear()
    _FILES[path] = (sig, data)
    return data


class ScriptedProvider:
    """Replays scripted assistant turns; never touches the network."""

    async def complete(self, request: Mapping[str, Any], *, run: str, on_delta: Delta | None = None) -> dict[str, Any]:
        """Answer with the script's next turn, streaming it to ``on_delta``.

        Raises:
            ConfigurationError: a malformed script.
            ModelError: the script is exhausted, an ``expect`` is not met (not retryable),
                or the turn's scripted failure (retryable unless its status says otherwise).
        """
        spec = request["model"]
        script = load_script(spec)
        messages = request.get("messages") or []
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(script):
            raise ModelError(
                f"the model script has {len(script)} turn(s); the agent asked for turn {turn + 1} (turn N answers a "
                "request that already holds N-1 assistant messages): add turns to the script",
                retryable=False,
            )
        step = script[turn]
        if isinstance(step, str):
            step = {"answer": step}
        if not isinstance(step, Mapping):
            raise ConfigurationError(f"model script turn {turn + 1} must be a string or a mapping", key="model")
        _check(step.get("expect"), request, turn)
        failures = int(step.get("fail", 0))
        if failures:
            key = (run, json.dumps(spec, sort_keys=True, default=str), turn)
            if len(_ATTEMPTS) > _ATTEMPTS_LIMIT:
                _ATTEMPTS.clear()
            seen = _ATTEMPTS[key] = _ATTEMPTS.get(key, 0) + 1
            if seen <= failures:
                await _stream(_words(str(step.get("partial") or "")), on_delta)
                raise _failure(step, turn, seen)
        calls = step.get("calls", step.get("tool_calls")) or []
        content = step.get("answer", step.get("content"))
        text = None if content is None else json.dumps(content) if isinstance(content, (dict, list)) else str(content)
        pieces = await _stream(_words(text or ""), on_delta)
        made = []
        for index, call in enumerate(calls):
            arguments = call.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            if on_delta is not None:
                on_delta({"call": call["name"], "arguments": "", "index": index})
            chunks = [raw[i : i + PIECE] for i in range(0, len(raw), PIECE)]
            pieces += await _stream(chunks, on_delta, call=call["name"], index=index)
            made.append({"id": f"call_{turn + 1}_{index + 1}", "name": call["name"], "arguments": arguments})
        usage = step.get("usage")
        if not isinstance(usage, Mapping):
            words = sum(len(str(m.get("content") or "").split()) for m in messages)
            usage = {"prompt_tokens": words, "completion_tokens": pieces}
        return {
            "content": text,
            "tool_calls": made,
            "finish_reason": step.get("finish") or ("tool_calls" if made else "stop"),
            "usage": normal_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")),
            "model": spec.get("name") or "scripted",
        }


def _words(text: str) -> list[str]:
    """``text`` in word pieces that join back to it: ``["It", " is", " warm."]``."""
    words = text.split(" ")
    return [word if i == 0 else " " + word for i, word in enumerate(words)] if text else []


async def _stream(pieces: list[str], on_delta: Delta | None, *, call: str | None = None, index: int = 0) -> int:
    """Send each piece as a text delta (or a call's arguments delta); return how many."""
    for piece in pieces:
        if on_delta is not None:
            on_delta({"text": piece} if call is None else {"call": call, "arguments": piece, "index": index})
        await anyio.sleep(0)  # a checkpoint per piece, as a network stream has
    return len(pieces)


def _failure(step: Mapping[str, Any], turn: int, attempt: int) -> ModelError:
    """The scripted failure of a turn, carrying its status like a provider's error."""
    status = step.get("status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    wait = step.get("retry-after")
    message = f"{step.get('error', 'scripted failure')} (turn {turn + 1}, attempt {attempt})"
    return ModelError(
        message if status is None else f"HTTP {status}: {message}",
        retryable=status is None or status in (408, 409, 429) or status >= 500,
        status=status,
        retry_after=float(wait) if isinstance(wait, (int, float)) and not isinstance(wait, bool) else None,
    )


def _check(expect: Any, request: Mapping[str, Any], turn: int) -> None:
    """Raise ModelError when the request does not meet a turn's ``expect``."""
    if not expect:
        return
    messages = request.get("messages") or []
    text = "\n".join(str(m.get("content") or "") for m in messages)
    wanted = expect.get("contains", [])
    for needle in [wanted] if isinstance(wanted, str) else wanted:
        if needle not in text:
            raise _unmet(f"turn {turn + 1} expected the messages to contain {needle!r}")
    if "tools" in expect:
        offered = sorted(t["name"] for t in request.get("tools") or [])
        if offered != sorted(expect["tools"]):
            raise _unmet(f"turn {turn + 1} expected tools {sorted(expect['tools'])}, was offered {offered}")
    if "last-role" in expect and (not messages or messages[-1].get("role") != expect["last-role"]):
        got = messages[-1].get("role") if messages else None
        raise _unmet(f"turn {turn + 1} expected the last message from {expect['last-role']!r}, got {got!r}")
    if "response-format" in expect and bool(request.get("response-format")) != bool(expect["response-format"]):
        raise _unmet(f"turn {turn + 1} expected response-format {expect['response-format']!r}")
    if "tool-choice" in expect and request.get("tool-choice") != expect["tool-choice"]:
        raise _unmet(
            f"turn {turn + 1} expected tool-choice {expect['tool-choice']!r}, got {request.get('tool-choice')!r}"
        )


def _unmet(message: str) -> ModelError:
    """An unmet ``expect``: the script is deterministic, so no retry can meet it."""
    return ModelError(message, retryable=False)
