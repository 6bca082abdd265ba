"""An export to a Claude Code subagent: the frontmatter Claude Code reads, the system prompt, and what is lost."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from .errors import ConfigurationError
from .schema import json_schema
from .tool import Tool
from .translation import (
    HOST_TOOLS,
    Lost,
    as_authored,
    format_fields,
    report_rest,
    strip_preamble,
    strip_request,
    unliteral,
)

_TASK = re.compile(r"^\s*\{\{\s*args(?:\.prompt|\[\s*['\"]prompt['\"]\s*\])\s*\}\}\s*$")


def to_claude_agent(tool: Tool, meta: dict[str, Any], lost: list[Lost]) -> str:
    """Our tool as a Claude Code subagent (see the module docstring)."""
    front: dict[str, Any] = {"name": tool.name}
    kept = format_fields(tool, meta, lost, "claude-agent", "Claude Code")
    if tool.description:
        front["description"] = tool.description
    else:
        front["description"] = tool.name
        lost.append(Lost("description", f"Claude Code needs one to choose the agent: written as {tool.name!r}"))
    _tools(tool, meta, front, lost)
    _model(meta, front, lost)
    for key in ("tool-choice", "max-iterations", "returns"):
        if key in meta:
            lost.append(Lost(key, "Claude Code subagents have no such setting"))
            meta.pop(key)
    body = _body(tool, meta, lost)
    for key, value in kept.items():
        front.setdefault(key, value)
    report_rest(meta, lost, ("$static",), tool)
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n" + "\n\n".join(part for part in body if part) + "\n"


def _tools(tool: Tool, meta: dict[str, Any], front: dict[str, Any], lost: list[Lost]) -> None:
    """``tools``: ours as Claude Code calls them when served, Claude Code's own as they are, and nothing else.

    Ours are written ``mcp__toolcascade__NAME`` (Claude Code reaches them
    through ``toolcascade serve`` as its MCP server ``toolcascade``; the
    adapter reads them back as ours). The host tools toolcascade runs as
    built-ins (``Read``, ``Bash``: ``orchestrator.hosttools``) are Claude
    Code's own, written by their names, with the permission patterns that
    narrow them (``Bash(git:*)``). Another host's tools (Copilot's
    ``codebase``) are lost and never written, so no name changes meaning.
    Without a ``tools`` line Claude Code offers every tool it has: that is said too.
    """
    from .formats import SERVED
    from .hosttools import IMPLEMENTED, IMPLEMENTED_ORDER, RULES
    from .tool import wire_name

    claude = (tool.format or "").startswith("claude-")
    ours = [str(n) for n in meta.pop("tools", None) or []]
    host = [str(n) for n in meta.pop(HOST_TOOLS, None) or []]
    rules = meta.pop(RULES, None)
    if claude and ours == list(IMPLEMENTED_ORDER) and not host:
        return  # the adapter's reading of a file without a tools line: every tool, written as it was
    written = [
        _host_tool(name, rules) if name in IMPLEMENTED else SERVED + name for name in ours if wire_name(name) == name
    ]
    unreachable = [name for name in ours if wire_name(name) != name]
    if unreachable:
        lost.append(Lost("tools", f"{', '.join(unreachable)}: Claude Code cannot name these tools (not written)"))
    if claude:
        written += host
    elif host:
        lost.append(
            Lost(
                HOST_TOOLS,
                f"{', '.join(host)}: tools of the {tool.format or 'other'} host, not Claude Code's (not written)",
            )
        )
    if written:
        front["tools"] = ", ".join(written)
    else:  # a command's file without tools offers none here; a subagent without them gets every tool
        lost.append(Lost("tools", "no tools line: Claude Code offers the subagent every tool it has"))


def _host_tool(name: str, rules: Any) -> str:
    """A host tool as Claude Code names it: ``Bash``, or ``Bash(git:*), Bash(npm test)`` when patterns narrow it."""
    patterns = rules.get(name) if isinstance(rules, Mapping) else None
    if not patterns:
        return name
    return ", ".join(f"{name}({pattern})" for pattern in ([patterns] if isinstance(patterns, str) else patterns))


def _model(meta: dict[str, Any], front: dict[str, Any], lost: list[Lost]) -> None:
    """``model`` as a Claude Code alias or Anthropic model name; any other model is lost (the caller's is used)."""
    from .formats import aliases

    model = meta.pop("model", None)
    if model is None:
        lost.append(Lost("model", "a subagent is always answered by a model: Claude Code uses the caller's (inherit)"))
        return
    alias = _alias(model, aliases())
    if alias is not None:
        front["model"] = alias
        return
    from .agent.model import parse_model

    try:
        spec = parse_model(model)
    except ConfigurationError:
        spec = {"provider": None}
    if spec.get("provider") == "anthropic" and spec.get("name"):
        front["model"] = spec["name"]
        lost.append(Lost("model", f"{spec['name']!r} is no alias (sonnet, opus, haiku): Claude Code may refuse it"))
    else:
        from .agent.model import label

        shown = label(spec) if spec.get("provider") else repr(model)
        lost.append(Lost("model", f"{shown} is not an Anthropic model: the subagent inherits the caller's"))


def _body(tool: Tool, meta: dict[str, Any], lost: list[Lost]) -> list[str]:
    """The subagent's system prompt: ``system``, then the tool's prompt unless it only passes the task on."""
    params = json_schema(meta.pop("params", None), "params", tool)  # a shorthand's properties are its args
    system = meta.pop("system", None)
    body: list[str] = []
    if system is not None:
        written = as_authored(tool, str(system))
        text = unliteral(written)
        if text is None:
            lost.append(Lost("system", "a template of args: Claude Code does not render it (written as is)"))
            text = strip_preamble(written)
        body.append(text.strip())
    prompt, request = strip_request(as_authored(tool, tool.prompt or ""))
    if _TASK.match(prompt):
        props = params.get("properties") if isinstance(params, Mapping) else None
        if isinstance(props, Mapping) and set(props) - {"prompt"}:
            lost.append(Lost("params", f"{', '.join(sorted(set(props) - {'prompt'}))}: a subagent takes one task text"))
    elif prompt.strip():
        text = unliteral(prompt)
        lost.append(
            Lost(
                "prompt",
                "a subagent's user message is the caller's task: this tool's prompt is appended to "
                "the system prompt" + ("" if text is not None else " as a template Claude Code does not render"),
            )
        )
        body.append((text if text is not None else strip_preamble(prompt)).strip())
        props = set(params.get("properties") or ()) if isinstance(params, Mapping) else set()
        if params and not (request is not None and props <= {request}):  # the request alone is the task
            lost.append(Lost("params", "the caller's task is one text: these args cannot be passed"))
    if meta.pop("messages", None):
        lost.append(
            Lost("messages", "a subagent starts from its system prompt and the task: prior messages are dropped")
        )
    settings = meta.pop("prompty", None)
    if isinstance(settings, Mapping) and settings.get("template") == "mustache":
        lost.append(Lost("prompty.template", "mustache: Claude Code does not render it (written as is)"))
    return body


def _alias(model: Any, table: Mapping[str, Any]) -> str | None:
    """The alias (not ``inherit``) whose spec is ``model``, if any."""
    for alias, spec in table.items():
        if alias != "inherit" and spec == model:
            return alias
    return None
