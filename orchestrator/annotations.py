"""How a tool is offered over MCP: as a tool, a prompt or both, with its title and its behaviour hints.

All of it is the ``mcp`` metadata key, so the cascade sets it like any other
(an ``AUTHORITY.md`` for a folder, a tool for itself; mappings merge deeply)::

    metadata:
      mcp:
        serve: [tool, prompt]   # what MCP clients see it as; [] serves it as neither
        title: Weather in a city
        read-only: true         # readOnlyHint: it changes nothing
        destructive: false      # destructiveHint: what it changes, it may destroy
        idempotent: true        # idempotentHint: calling it twice does no more than once
        open-world: false       # openWorldHint: it reaches outside the server (the web, other systems)

``serve`` defaults to ``[tool, prompt]`` for markdown tools (templates,
agents, and the files of other formats: Claude commands, Copilot prompt
files, Prompty) and ``[tool]`` for code. Clients auto-approve calls on these
hints, so each unset hint takes the MCP default, the cautious value:
``read-only: false``, ``destructive: true``, ``idempotent: false``,
``open-world: true``. A tool with ``approval`` is never advertised as
read-only, whatever its ``mcp`` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError

KEY = "mcp"
SERVE_AS = ("tool", "prompt")
HINTS = {
    "read-only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open-world": "openWorldHint",
}
DEFAULTS = {"read-only": False, "destructive": True, "idempotent": False, "open-world": True}
FIELDS = ("serve", "title", *HINTS)
OTHER_FIELDS = ("resources",)
"""``mcp`` fields read elsewhere: ``resources`` (files served as MCP resources, ``orchestrator.resources``)."""


@dataclass(frozen=True, slots=True)
class Offer:
    """How one tool is offered over MCP, and why each part is what it is (``show`` prints the reasons)."""

    serve: tuple[str, ...]  # some of SERVE_AS, in that order
    title: str | None
    hints: tuple[tuple[str, bool], ...]  # (hint, value) in HINTS order
    reasons: tuple[tuple[str, str], ...]  # (field, how it was decided) in FIELDS order

    @property
    def as_tool(self) -> bool:
        return "tool" in self.serve

    @property
    def as_prompt(self) -> bool:
        return "prompt" in self.serve

    def annotations(self) -> dict[str, Any]:
        """The MCP ``ToolAnnotations`` fields (camelCase), the title included when there is one."""
        found: dict[str, Any] = {HINTS[hint]: value for hint, value in self.hints}
        if self.title is not None:
            found["title"] = self.title
        return found

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON for ``show --json`` and ``list --json``."""
        return {
            "serve": list(self.serve),
            "title": self.title,
            "hints": dict(self.hints),
            "reasons": dict(self.reasons),
        }


def offer(ref: str, kind: str, meta: Mapping[str, Any]) -> Offer:
    """How the tool ``ref`` (of ``kind``, with merged metadata ``meta``) is offered over MCP.

    Raises:
        ConfigurationError: ``mcp`` is not a mapping, names an unknown field, or holds a value of the wrong type
            (naming the tool and the key, and what to write instead).
    """
    given = meta.get(KEY)
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"mcp must be a mapping (like {{serve: [tool, prompt], read-only: true}}), not {type(given).__name__}",
            tool=ref,
            key=KEY,
        )
    unknown = [str(field) for field in given if field not in FIELDS and field not in OTHER_FIELDS]
    if unknown:
        raise ConfigurationError(
            f"mcp has no field {unknown[0]!r}; its fields are {', '.join((*FIELDS, *OTHER_FIELDS))}",
            tool=ref,
            key=f"{KEY}.{unknown[0]}",
        )
    reasons: dict[str, str] = {}
    serve = _serve(ref, kind, given, reasons)
    title = given.get("title")
    if title is not None and not isinstance(title, str):
        raise ConfigurationError(f"mcp.title must be text, not {type(title).__name__}", tool=ref, key=f"{KEY}.title")
    reasons["title"] = "set by mcp.title" if title is not None else "none: clients show the name"
    hints = []
    held = meta.get("approval") not in (None, False)
    for hint in HINTS:
        value = given.get(hint)
        if value is not None and not isinstance(value, bool):
            raise ConfigurationError(f"mcp.{hint} must be true or false, not {value!r}", tool=ref, key=f"{KEY}.{hint}")
        if hint == "read-only" and held:
            hints.append((hint, False))
            reasons[hint] = "false: the tool has approval, so it is never advertised as read-only"
        elif value is None:
            hints.append((hint, DEFAULTS[hint]))
            reasons[hint] = f"{str(DEFAULTS[hint]).lower()}: unset, the cautious MCP default"
        else:
            hints.append((hint, value))
            reasons[hint] = f"{str(value).lower()}: set by mcp.{hint}"
    return Offer(serve, title, tuple(hints), tuple((field, reasons[field]) for field in FIELDS))


def _serve(ref: str, kind: str, given: Mapping[str, Any], reasons: dict[str, str]) -> tuple[str, ...]:
    value = given.get("serve")
    if value is None:
        if kind == "markdown":
            reasons["serve"] = "tool and prompt: the default for markdown tools"
            return SERVE_AS
        reasons["serve"] = f"tool: the default for {kind} tools (they have no prompt)"
        return ("tool",)
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or any(item not in SERVE_AS for item in items):
        raise ConfigurationError(
            f"mcp.serve must be a list of tool and prompt (or [] for neither), not {value!r}",
            tool=ref,
            key=f"{KEY}.serve",
        )
    serve = tuple(kind for kind in SERVE_AS if kind in items)
    reasons["serve"] = (" and ".join(serve) if serve else "neither") + ": set by mcp.serve"
    return serve


def described(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``mcp`` part of ``show``: how the tool an ``Explanation.to_dict()`` explains is offered, or the error."""
    meta = {item["key"]: item["value"] for item in data.get("keys", ())}
    try:
        return offer(str(data["tool"]), str(data["kind"]), meta).to_dict()
    except ConfigurationError as exc:
        return {"error": str(exc)}
