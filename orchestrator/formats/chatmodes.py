"""VS Code custom agents (``*.agent.md``) and their older form, custom chat modes (``*.chatmode.md``), as agents.

A custom agent (``.github/agents/NAME.agent.md``; a chat mode,
``.github/chatmodes/NAME.chatmode.md``) is a persona: its body is the
instructions, what the user types in chat is the request. Here it is an
agent like a Claude Code subagent:

- the body is the system prompt (literal text), the request the user
  message: args ``{"prompt": "..."}`` (``argument-hint`` describes it);
- ``name`` names the tool when it is a plain name; a display name with
  spaces ("Security Reviewer") is kept under ``format-fields`` and the file
  name (without ``.agent.md``) is the name;
- ``description`` is ours; ``model`` maps as in prompt files (an alias,
  ``provider:name``, or a VS Code model name through ``COPILOT_MODELS``; a
  list is VS Code's fallback order, of which the first is used), else the
  ``inherit`` alias answers, as VS Code's model picker would;
- ``tools`` as in prompt files (``orchestrator.formats.copilot``): VS Code's
  names whose work the host built-ins do (``codebase``, ``editFiles``,
  ``runInTerminal``, ``fetch``...) run as those built-ins, other VS Code and
  MCP tools stay ``host-tools``. Without ``tools`` the agent gets every host
  built-in, as VS Code gives a custom agent its default tools;
- ``handoffs``, ``agents``, ``target``, ``mcp-servers``, ``user-invocable``
  and every other field are kept as data under ``format-fields``.

Editor variables and ``#file:`` references in the body are reported by
``check`` and stay text, as in prompt files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..hosttools import IMPLEMENTED_ORDER
from .copilot import COPILOT_MODELS, LENIENCY, description_field, editor_problems, map_model, tools_field
from .fields import (
    Adapted,
    Mapped,
    Summary,
    field_error,
    key_line,
    literal,
    prose_field,
    resolve_model,
    unknown_model,
)

SUFFIXES = (".agent.md", ".chatmode.md")
FORMAT_FIELDS = "format-fields"
HOST_TOOLS = "host-tools"
KNOWN = ("name", "description", "model", "tools", "argument-hint")


class CopilotAgent:
    """VS Code custom agents and chat modes: ``*.agent.md`` and ``*.chatmode.md`` anywhere in a search path."""

    name = "copilot-agent"
    suffixes = SUFFIXES
    locations = (".github/agents", ".github/chatmodes")
    leniency = LENIENCY
    summary = Summary(
        "`*.agent.md` (custom agents) and `*.chatmode.md` (chat modes): `name`, `description`, `tools`, `model` "
        "(a list: the first), `argument-hint`; `handoffs`, `agents`, `target` and the rest kept as data",
        'an agent: the body is the system prompt, `{"prompt": ...}` the user message; VS Code\'s tools run as the '
        "host built-ins (all of them without `tools`); `model` as in prompt files, else `inherit`; "
        "an unknown model fails naming the aliases",
        "frontmatter that is not strict YAML is read key by key, with a warning; a YAML list in `description` "
        "is the text written",
        "VS Code's tools we do not run (`githubRepo`, `server/tool`) are kept as `host-tools`; handoffs and "
        "subagent lists are data; `${selection}`, `#file:` and file links stay text, reported by `check`",
    )

    def recognises(self, path: Path, root: Path) -> bool:
        return any(path.name.endswith(suffix) and len(path.name) > len(suffix) for suffix in SUFFIXES)

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map a custom agent or chat mode onto our agent (see the module docstring).

        Raises:
            ToolDefinitionError: a field of the wrong type.
        """
        name, mapping, extra = _name(front, path)
        problems: list[tuple[int | None, str]] = []
        metadata: dict[str, Any] = {}
        description_field(front, name, path, metadata, mapping, problems)
        _model(front, name, path, metadata, mapping, problems)
        host = tools_field(front, name, path, metadata, mapping)
        if "tools" not in front:
            metadata["tools"] = list(IMPLEMENTED_ORDER)
            note = f"absent: every host built-in ({', '.join(IMPLEMENTED_ORDER)}), as VS Code offers its default tools"
            mapping.append(Mapped("tools", "tools", note))
        hint, _how = prose_field(front, "argument-hint", tool=name, path=path)
        metadata["params"] = {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": hint or f"The request for {name}."}},
            "required": ["prompt"],
            "additionalProperties": False,
        }
        mapping.append(Mapped("argument-hint" if hint else "(the chat request)", "params", "args {prompt: ...}"))
        if body:
            metadata["system"] = literal(body)
            mapping.append(Mapped("body", "system", "the instructions, as the system prompt (literal text)"))
        problems += editor_problems(body, body_line, host, mapping)
        for key, item in front.items():
            if key not in KNOWN and key not in extra:
                extra[key] = item
                mapping.append(Mapped(str(key), FORMAT_FIELDS, "kept as data: not used by toolcascade", lossless=False))
        if extra:
            metadata[FORMAT_FIELDS] = extra
        static = [key for key in (HOST_TOOLS, FORMAT_FIELDS) if key in metadata]
        if static:
            metadata["$static"] = static
        ordered = tuple(sorted(problems, key=lambda item: item[0] or 0))
        return Adapted(name, metadata, "{{ args.prompt }}", tuple(mapping), ordered)


def _name(front: Mapping[str, Any], path: Path) -> tuple[str, list[Mapped], dict[str, Any]]:
    """The agent's name: ``name`` when it is a plain name, else the file name (``name`` then a display name)."""
    derived = next(path.name[: -len(s)] for s in SUFFIXES if path.name.endswith(s))
    value = front.get("name")
    if value is None:
        return derived, [Mapped("(file name)", "name", f"no 'name': {derived!r} from the file name")], {}
    if not isinstance(value, str) or not value.strip():
        raise field_error(
            f"'name' must be non-empty text, not {value!r:.60}", tool=derived, path=path, front=front, key="name"
        )
    plain = value.strip()
    if plain.split() == [plain] and not set(plain) & set("/\\") and ".." not in plain:
        return plain, [Mapped("name", "name")], {}
    note = f"the display name {plain!r}: the agent is found by its file name {derived!r}"
    return derived, [Mapped("name", FORMAT_FIELDS, note)], {"name": value}


def _model(
    front: Mapping[str, Any],
    name: str,
    path: Path,
    metadata: dict[str, Any],
    mapping: list[Mapped],
    problems: list[tuple[int | None, str]],
) -> None:
    """``model`` as in prompt files; a list is VS Code's fallback order (the first is used); absent, ``inherit``."""
    value = front.get("model")
    if value is None:
        spec, note, lossless = resolve_model("inherit")
        metadata["model"] = spec
        mapping.append(Mapped("model", "model", f"absent: {note}, as VS Code's model picker chooses", lossless))
        return
    first = value[0] if isinstance(value, list) and value else value
    if not isinstance(first, str) or not first.strip():
        raise field_error(
            f"'model' must be a model name or a list of them, not {value!r:.60}",
            tool=name,
            path=path,
            front=front,
            key="model",
        )
    spec, note, lossless = map_model(first.strip())
    if isinstance(value, list) and len(value) > 1:
        note += f"; the first of VS Code's fallback list (the rest, {', '.join(map(str, value[1:]))}, is not used)"
        lossless = False
    metadata["model"] = spec
    mapping.append(Mapped("model", "model", note, lossless))
    if spec == first.strip():
        unknown = unknown_model(first.strip(), COPILOT_MODELS)
        if unknown is not None:
            problems.append((key_line(front, "model"), unknown))


FORMAT = CopilotAgent()
FORMATS = (FORMAT,)
