"""The provider protocol: what every model provider receives, reads of a spec, and returns (R-AGENT-2).

A leaf of ``orchestrator.agent``: the built-in providers (``openai``,
``anthropic``, ``scripted``) and their shared answer and HTTP code import it,
never ``model.py``, which finds the providers by name. ``model.py``
re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, Generic, Protocol, TypeVar

from ..errors import SecurityError
from .routes import granted

DEFAULT_TIMEOUT = 120.0
"""Seconds one model request may take, streaming included, unless the spec sets ``timeout``."""
CONNECT_TIMEOUT = 10.0
"""Seconds to open the connection (never more than the request's own timeout)."""
DEFAULT_MAX_TOKENS = 4096
"""Tokens one answer may have unless the spec sets ``max-tokens``."""

Delta = Callable[[dict[str, Any]], None]
"""Receives each piece of an answer as it streams in (see ``orchestrator.agent.model``)."""
T = TypeVar("T")


class Setting(Generic[T]):
    """Sets ``var`` to ``value`` inside a ``with`` block, and back to what it was on exit.

    What the model requests made inside the block read: ``answer.bounded``
    (the answer limit) and ``clients.keeping`` (the Manager keeping the
    clients). A class, not a generator context manager: ``model-call``
    enters both on every model request, on the way to the first token.
    """

    __slots__ = ("var", "value", "token")

    def __init__(self, var: ContextVar[T], value: T) -> None:
        self.var = var
        self.value = value

    def __enter__(self) -> None:
        self.token: Token[T] = self.var.set(self.value)

    def __exit__(self, *exc: object) -> None:
        self.var.reset(self.token)


class Provider(Protocol):
    """Answers one model request: ``{model, messages, tools, tool-choice, response-format}``.

    The answer is ``{content, tool_calls: [{id, name, arguments}], finish_reason,
    usage: {prompt_tokens, completion_tokens, total_tokens}, model}`` with
    ``arguments`` a mapping (or the raw string when the model sent bad JSON)
    and ``finish_reason`` one of ``stop``, ``tool_calls``, ``length`` (or what
    the API said). ``on_delta`` receives the answer's pieces while it streams.
    """

    async def complete(
        self, request: Mapping[str, Any], *, run: str, on_delta: Delta | None = None
    ) -> dict[str, Any]: ...


def label(spec: Mapping[str, Any]) -> str:
    """``provider:name``, as errors name a model."""
    return f"{spec.get('provider')}:{spec.get('name') or ''}".rstrip(":")


def timeouts(spec: Mapping[str, Any]) -> tuple[float, float]:
    """``(whole request, connect)`` seconds for a spec."""
    total = float(spec.get("timeout") or DEFAULT_TIMEOUT)
    return total, min(total, CONNECT_TIMEOUT)


def max_tokens(spec: Mapping[str, Any]) -> int:
    """The ``max-tokens`` of a spec, or the default."""
    return int(spec.get("max-tokens") or DEFAULT_MAX_TOKENS)


def normal_usage(prompt: Any, completion: Any) -> dict[str, int]:
    """``{prompt_tokens, completion_tokens, total_tokens}`` from two counts (missing ones are 0)."""
    p = prompt if isinstance(prompt, int) else 0
    c = completion if isinstance(completion, int) else 0
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


# -- the route a provider may use ---------------------------------------------


def check_route(spec: Mapping[str, Any]) -> None:
    """Refuse a spec whose ``base-url`` or ``api-key-env`` trusted configuration did not grant.

    Called where a provider picks its key and endpoint, so it holds however
    the request was built.

    Raises:
        SecurityError: naming the model and the fields.
    """
    chosen = [field for field in ("base-url", "api-key-env") if spec.get(field)]
    if chosen and not granted(spec):
        raise SecurityError(
            f"model {label(spec)}: {' and '.join(chosen)} not granted: only an agent's model and the models its "
            "model-pipeline names for fallback and compact, set by trusted configuration, choose where a key is "
            "sent; a request built elsewhere (a model's call to model-call, a program's) uses the provider's default "
            "endpoint and key. Set the endpoint in the agent's model or model-pipeline, or grant a spec built in "
            "program code with orchestrator.agent.model.grant_model",
            key="model",
        )
