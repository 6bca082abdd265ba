"""Untrusted callers: what MCP clients and models may ask of an invocation.

The program is trusted: its own ``invoke`` calls may pass any option. A call
made for someone else (an MCP client, a model's tool call) passes a
``Caller`` to ``invoke``, and the engine applies one rule set to the ``$``
options that came in the args, wherever the call entered:

- the ref must be one of the tools the caller can call (``Caller.tools``);
- ``$overrides`` only when the caller is allowed them (an MCP server started
  with ``--allow-overrides``), never with ``$`` annotations, and never for a
  key that names a tool the caller cannot call or an engine setting
  (``ENGINE_SETTINGS``: the model, the tools an agent is offered, ...);
- ``$context`` carries plain data only: ``locals`` (minus the keys the engine
  reads, ``ENGINE_LOCALS``) and ``nonlocals``. ``envelope`` (caller identity),
  ``paths``, ``cwd``, ``parent`` and ``target`` are refused;
- ``$context.session`` (continue a stored conversation) only when the caller
  is allowed sessions (``Caller.sessions``): session ids are names, not
  secrets, so a client that may name any session could read another
  client's conversation. Models never may;
- ``$middleware`` may remove entries that are not ``$locked`` (nor the
  guards ``approval``, ``call-limit``, ``circuit-breaker``) and add or
  override only tools the caller can call: hidden built-ins such as ``paths``
  or ``delegate`` would otherwise point a call at any file on disk.

Explicit options the program (the MCP server, the agent loop) passes beside
the caller's args are its own and are not checked.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvocationError, SecurityError
from .ordering import extra_specs

REFUSED_CONTEXT = ("envelope", "paths", "cwd", "parent", "target")
ENGINE_LOCALS = frozenset(
    {
        "prompt",
        "result",
        "media",
        "middleware",
        "directives",
        "model",
        "allowed-tools",
        "stream",
        "session",
        "conversation",
        "resume",
    }
)
"""``ctx.locals`` keys the engine and its built-ins read: set only by trusted code and metadata."""
ENGINE_SETTINGS = frozenset(
    {
        "model",
        "tools",
        "allowed-tools",
        "tool-choice",
        "model-pipeline",
        "tool-pipeline",
        "batch-pipeline",
        "trust",
        "visibility",
        "max-iterations",
        "max-consecutive-errors",
        "max-tool-calls",
        "host-trust",
        "host-rules",
        "media-urls",
        "instructions",
        "mcp-servers",
        "complete-with",
    }
)
"""Metadata keys that choose models, endpoints, secrets, offered tools, trust (the host tools' ``host-trust``
and ``host-rules`` included), what an agent may fetch or read, or the agent loop's bounds: never from an
untrusted caller."""
GUARDS = frozenset({"approval", "call-limit", "circuit-breaker", "agent-execute", "model"})
"""Middleware that guards calls for the program: an untrusted caller may not remove it with ``$middleware``.

``agent-execute`` and ``model`` keep an agent an agent: without them a caller would get its hidden rendered
prompt back instead of the model's answer."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Someone the program calls a tool for, who is not trusted: an MCP client, a model.

    ``name`` is how errors name it (``"MCP callers"``, ``"a model"``);
    ``tools`` the refs it may call and use as middleware; ``overrides``
    whether it may send ``$overrides``; ``sessions`` whether it may continue
    a stored conversation with ``$context.session``. ``switch`` is how the
    program allows those two, named when they are refused: the MCP server's
    ``--allow-`` (``--allow-overrides``, ``--allow-sessions``); empty for a
    caller nothing allows them (a model).
    """

    name: str
    tools: Container[str]
    overrides: bool = False
    sessions: bool = False
    switch: str = ""

    def allowing(self, what: str) -> str:
        """``: start the server with --allow-overrides ...`` for a refusal of ``what``, or nothing."""
        if not self.switch:
            return ""
        keyword = f"{self.switch.strip('-')}_{what}".replace("-", "_")
        return f": start the server with {self.switch}{what} ({keyword}=True from Python) to accept it"


def check_untrusted(ref: str, options: Mapping[str, Any], caller: Caller) -> None:
    """Refuse what ``caller`` may not ask for: ``options`` are the ``$`` options from its args.

    Raises:
        SecurityError: a ref it cannot call, refused ``$overrides``, a refused
            ``$context`` key or local, a session it is not allowed, or extra middleware naming a tool outside
            ``caller.tools`` (removals pass).
        InvocationError: a ``$context`` that is not a mapping.
    """
    who = caller.name
    if ref not in caller.tools:
        raise SecurityError(f"{who} may not call {ref!r}", tool=ref)
    overrides = options.get("overrides")
    if overrides is not None:
        if not caller.overrides:
            raise SecurityError(
                f"$overrides is not accepted from {who}{caller.allowing('overrides')}", tool=ref, key="$overrides"
            )
        _check_overrides(ref, overrides, caller)
    context = options.get("context") or {}
    if not isinstance(context, Mapping):
        raise InvocationError(f"$context must be a mapping, not {type(context).__name__}", tool=ref, key="$context")
    for key in REFUSED_CONTEXT:
        if key in context:
            raise SecurityError(f"$context.{key} is not accepted from {who}", tool=ref, key="$context")
    if "session" in context and not caller.sessions:
        raise SecurityError(
            f"$context.session is not accepted from {who}: conversations are kept only for callers the program "
            f"allows sessions{caller.allowing('sessions')}",
            tool=ref,
            key="$context",
        )
    seeded = context.get("locals")
    if isinstance(seeded, Mapping):
        engine = sorted(ENGINE_LOCALS.intersection(seeded))
        if engine:
            hint = "; pass extra middleware as $middleware" if "middleware" in engine else ""
            raise SecurityError(
                f"$context.locals.{engine[0]} is read by the engine and not accepted from {who}{hint}",
                tool=ref,
                key="$context",
            )
    for name, spec, source in extra_specs(options.get("middleware"), "$middleware"):
        if spec.get("remove") and name in GUARDS:
            raise SecurityError(
                f"{source} from {who} may not remove {name!r}: it guards the call for the program", tool=ref, key=source
            )
        if not spec.get("remove") and name not in caller.tools:
            raise SecurityError(
                f"{source} from {who} may add or override only tools it can call, not {name!r}", tool=ref, key=source
            )


def _check_overrides(ref: str, overrides: Any, caller: Caller) -> None:
    if not isinstance(overrides, Mapping):
        return  # not a mapping: the engine reports it
    for key in overrides:
        if not isinstance(key, str):
            continue
        if key.startswith("$"):
            raise SecurityError(f"$overrides from {caller.name} may not carry {key}", tool=ref, key="$overrides")
        if key in ENGINE_SETTINGS:
            raise SecurityError(
                f"$overrides from {caller.name} may not set {key!r}: it is an engine setting", tool=ref, key=key
            )
