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
    expect:                    # checks on what the model was sent
      contains: Paris          # some message contains each of these strings
      tools: [weather]         # exactly these tools were offered
      last-role: tool          # role of the last message
      response-format: true    # a JSON answer was asked for
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigurationError, ModelError

_FILES: dict[str, tuple[tuple[int, int], list[Any]]] = {}
_ATTEMPTS: dict[tuple[str, str, int], int] = {}
_ATTEMPTS_LIMIT = 10_000


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
    try:
        st = os.stat(path)
        sig = (st.st_mtime_ns, st.st_size)
        hit = _FILES.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"cannot read model script: {exc}", path=path, key="model") from exc
    if not isinstance(data, list):
        raise ConfigurationError("a model script file must hold a YAML list of turns", path=path, key="model")
    _FILES[path] = (sig, data)
    return data


class ScriptedProvider:
    """Replays scripted assistant turns; never touches the network."""

    async def complete(self, request: Mapping[str, Any], *, run: str) -> dict[str, Any]:
        spec = request["model"]
        script = load_script(spec)
        messages = request.get("messages") or []
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(script):
            raise ModelError(f"the model script has {len(script)} turn(s); the agent asked for turn {turn + 1}")
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
                raise ModelError(f"{step.get('error', 'scripted failure')} (turn {turn + 1}, attempt {seen})")
        calls = step.get("calls", step.get("tool_calls")) or []
        content = step.get("answer", step.get("content"))
        return {
            "content": None
            if content is None
            else str(content)
            if not isinstance(content, (dict, list))
            else json.dumps(content),
            "tool_calls": [
                {"id": f"call_{turn + 1}_{i + 1}", "name": call["name"], "arguments": call.get("arguments", {})}
                for i, call in enumerate(calls)
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "model": spec.get("name") or "scripted",
        }


def _check(expect: Any, request: Mapping[str, Any], turn: int) -> None:
    """Raise ModelError when the request does not meet a turn's ``expect``."""
    if not expect:
        return
    messages = request.get("messages") or []
    text = "\n".join(str(m.get("content") or "") for m in messages)
    wanted = expect.get("contains", [])
    for needle in [wanted] if isinstance(wanted, str) else wanted:
        if needle not in text:
            raise ModelError(f"turn {turn + 1} expected the messages to contain {needle!r}")
    if "tools" in expect:
        offered = sorted(t["name"] for t in request.get("tools") or [])
        if offered != sorted(expect["tools"]):
            raise ModelError(f"turn {turn + 1} expected tools {sorted(expect['tools'])}, was offered {offered}")
    if "last-role" in expect and (not messages or messages[-1].get("role") != expect["last-role"]):
        got = messages[-1].get("role") if messages else None
        raise ModelError(f"turn {turn + 1} expected the last message from {expect['last-role']!r}, got {got!r}")
    if "response-format" in expect and bool(request.get("response-format")) != bool(expect["response-format"]):
        raise ModelError(f"turn {turn + 1} expected response-format {expect['response-format']!r}")
