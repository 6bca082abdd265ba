"""GitHub Copilot prompt files (``*.prompt.md``, e.g. ``.github/prompts/``) as tools.

- The name is ``name`` when given, else the file name without ``.prompt.md``
  (``explain-code.prompt.md`` is ``explain-code``).
- ``description`` is ours. ``mode`` (``ask``, ``edit``, ``agent`` or a custom
  chat mode; ``agent:`` in newer files), ``argument-hint`` and other fields
  are kept as data under ``format-fields``: toolcascade runs every prompt file
  the same way.
- ``model``: a spec we know (``openai:gpt-4o``, an alias of
  ``orchestrator.formats.aliases()``, configurable through
  ``TOOLCASCADE_MODEL_ALIASES``) is used as it is; a VS Code model picker
  name is mapped by its family (``GPT-4o`` -> ``openai:gpt-4o``, ``o3-mini``
  -> ``openai:o3-mini``, ``Claude Sonnet 4`` -> ``anthropic:claude-sonnet-4``,
  reported as a guess); any other name is kept as data and reported. Without
  a model the result is the substituted prompt, as for our own template tools.
- ``tools``: VS Code's own tools and tool sets (``codebase``, ``editFiles``,
  ``fetch``, ``githubRepo``, ``search``, ...), MCP tools (``server/tool``,
  ``mcp__...``) and PascalCase host names are kept as data under
  ``host-tools``: never offered to a model, never run. Other names are taken
  as our tools.
- ``${input:name}`` and ``${input:name:placeholder}`` become required string
  params (the placeholder is the description) substituted into the prompt.
  ``${selection}``, ``${file}``, ``${workspaceFolder}`` and VS Code's other
  variables, ``#file:...`` references and links to files are the editor's:
  they stay text, and ``check`` reports each of them. Nothing is ever read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import Adapted, Mapped, aliases, field_error, is_host_tool, literal, name_list, text_field

SUFFIX = ".prompt.md"
FORMAT_FIELDS = "format-fields"
HOST_TOOLS = "host-tools"
KNOWN = ("name", "description", "model", "tools")

# VS Code's built-in chat tools and tool sets: names a prompt file lists for the editor, never ours.
VSCODE_TOOLS = frozenset(
    {
        "changes",
        "codebase",
        "createDirectory",
        "createFile",
        "edit",
        "editFiles",
        "editNotebook",
        "extensions",
        "fetch",
        "fileSearch",
        "findTestFiles",
        "getTerminalOutput",
        "githubRepo",
        "listDirectory",
        "new",
        "openSimpleBrowser",
        "problems",
        "readFile",
        "runCommands",
        "runInTerminal",
        "runNotebooks",
        "runTasks",
        "runTests",
        "search",
        "searchResults",
        "terminalLastCommand",
        "terminalSelection",
        "testFailure",
        "textSearch",
        "think",
        "todos",
        "usages",
        "vscodeAPI",
    }
)

_INPUT = re.compile(r"\$\{input:([A-Za-z_][A-Za-z0-9_-]*)(?::([^}\n]*))?\}")
_VARIABLE = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_]*)(?::[^}\n]*)?\}")
_REFERENCE = re.compile(r"(?<![\w#])#(file|folder|sym):(`[^`\n]+`|[^\s)\]]+)")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?!https?:|mailto:|#)([^)\s]+)\)")
_FAMILIES = (
    (re.compile(r"^(gpt-|o\d)"), "openai"),
    (re.compile(r"^claude-"), "anthropic"),
)


class CopilotPrompt:
    """Copilot prompt files: ``*.prompt.md`` anywhere in a search path."""

    name = "copilot-prompt"
    suffixes = (SUFFIX,)
    locations = (".github/prompts",)

    def recognises(self, path: Path, root: Path) -> bool:
        return path.name.endswith(SUFFIX) and len(path.name) > len(SUFFIX)

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map a prompt file onto our tool (see the module docstring).

        Raises:
            ToolDefinitionError: a field of the wrong type.
        """
        derived = path.name[: -len(SUFFIX)]
        mapping: list[Mapped] = []
        problems: list[tuple[int | None, str]] = []
        metadata: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        value = front.get("name")
        if value is None:
            name = derived
            mapping.append(Mapped("(file name)", "name", f"no 'name': {derived!r} from the file name"))
        elif isinstance(value, str) and value.strip():
            name = value.strip()
            mapping.append(Mapped("name", "name"))
        else:
            raise field_error(
                f"'name' must be non-empty text, not {value!r:.60}", tool=derived, path=path, front=front, key="name"
            )
        description = text_field(front, "description", tool=name, path=path)
        if description is not None:
            metadata["description"] = description
            mapping.append(Mapped("description", "description"))
        model = text_field(front, "model", tool=name, path=path)
        if model is not None:
            spec, note, lossless = map_model(model)
            if spec is None:
                extra["model"] = model
                mapping.append(Mapped("model", FORMAT_FIELDS, note, lossless=False))
                problems.append((_line(front, "model"), f"model {model!r}: {note}"))
            else:
                metadata["model"] = spec
                mapping.append(Mapped("model", "model", note, lossless))
        else:
            mapping.append(Mapped("model", None, "absent: the result is the substituted prompt"))
        names = name_list(front, "tools", tool=name, path=path)
        ours = [n for n in names if not _is_host(n)]
        host = [n for n in names if _is_host(n)]
        if ours:
            metadata["tools"] = ours
            mapping.append(Mapped("tools", "tools", f"our tools, offered to the model: {', '.join(ours)}"))
        if host:
            metadata[HOST_TOOLS] = host
            mapping.append(
                Mapped("tools", HOST_TOOLS, f"kept as data, never run: VS Code tools {', '.join(host)}", lossless=False)
            )
        for key in ("mode", "agent"):
            if key in front:
                mode = text_field(front, key, tool=name, path=path)
                extra[key] = mode
                mapping.append(
                    Mapped(key, FORMAT_FIELDS, f"kept as data: every prompt file runs the same way ({mode})")
                )
        for key, item in front.items():
            if key not in (*KNOWN, "mode", "agent"):
                extra[key] = item
                mapping.append(Mapped(str(key), FORMAT_FIELDS, "kept as data: not used by toolcascade", lossless=False))
        prompt, params, body_map, body_problems = substitute(body, body_line, host)
        mapping += body_map
        problems += body_problems
        metadata["params"] = params
        if extra:
            metadata[FORMAT_FIELDS] = extra
        static = [key for key in (HOST_TOOLS, FORMAT_FIELDS) if key in metadata]
        if static:
            metadata["$static"] = static
        ordered = tuple(sorted(problems, key=lambda item: item[0] or 0))
        return Adapted(name, metadata, prompt, tuple(mapping), ordered)


def _line(front: Mapping[str, Any], key: str) -> int | None:
    from . import key_line

    return key_line(front, key)


def _is_host(name: str) -> bool:
    return name in VSCODE_TOOLS or is_host_tool(name) or "/" in name or "." in name or name.startswith("mcp_")


def map_model(value: str) -> tuple[Any, str, bool]:
    """A prompt file's ``model`` as (our spec or None, a note, lossless)."""
    table = aliases()
    if value in table:
        spec = table[value]
        shown = spec if isinstance(spec, str) else f"{spec.get('provider')}:{spec.get('name') or ''}"
        return spec, f"alias {value} -> {shown}", True
    if ":" in value:
        return value, "kept", True
    # A model picker name: "GPT-4o", "Claude Sonnet 4", "o3-mini (Preview)".
    plain = re.sub(r"\s*\([^)]*\)\s*$", "", value).strip().lower().replace(" ", "-")
    for pattern, provider in _FAMILIES:
        if pattern.match(plain):
            return f"{provider}:{plain}", f"VS Code model {value!r} -> {provider}:{plain} (by its family)", False
    return None, "not a model toolcascade knows: kept as data; set one with --set model=provider:name", False


def substitute(
    body: str, body_line: int, host: list[str]
) -> tuple[str, dict[str, Any], list[Mapped], list[tuple[int | None, str]]]:
    """A prompt file's body as our template, its params, mapping and problems.

    ``${input:...}`` become args; everything else stays literal text.
    """
    pieces: list[str] = []
    properties: dict[str, Any] = {}
    mapping: list[Mapped] = []
    problems: list[tuple[int | None, str]] = []
    start = 0
    for match in _INPUT.finditer(body):
        pieces.append(literal(body[start : match.start()]))
        name, placeholder = match.group(1), match.group(2)
        pieces.append("{{ args[" + repr(name) + "] }}")
        if name not in properties:
            prop: dict[str, Any] = {"type": "string"}
            if placeholder and placeholder.strip():
                prop["description"] = placeholder.strip()
            properties[name] = prop
            mapping.append(Mapped(match.group(0), f"params.properties.{name}", "a required string, substituted"))
        start = match.end()
    pieces.append(literal(body[start:]))
    template = "".join(pieces)
    params: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if properties:
        params["required"] = list(properties)
    mapping.append(Mapped("body", "prompt", "the prompt, ${input:...} substituted" if properties else "literal text"))

    def line(offset: int) -> int:
        return body_line + body.count("\n", 0, offset)

    for match in _VARIABLE.finditer(body):
        if match.group(1) == "input":
            continue
        problems.append((line(match.start()), f"{match.group(0)} is a VS Code variable: not supported, it stays text"))
        mapping.append(Mapped(match.group(0), None, "editor variable: stays text", lossless=False))
    for match in _REFERENCE.finditer(body):
        problems.append(
            (
                line(match.start()),
                f"{match.group(0)} is not supported: files are never read into the prompt (it stays text)",
            )
        )
        mapping.append(Mapped(match.group(0), None, "file reference: never read, stays text", lossless=False))
    for match in _LINK.finditer(body):
        problems.append(
            (
                line(match.start()),
                f"link to {match.group(1)!r}: VS Code adds the file as context; toolcascade never reads it",
            )
        )
        mapping.append(Mapped(f"link {match.group(1)}", None, "file link: never read, stays text", lossless=False))
    for tool in host:
        for match in re.finditer(r"(?<![\w#])#" + re.escape(tool) + r"\b", body):
            problems.append((line(match.start()), f"#{tool} names a VS Code tool: it stays text and never runs"))
    return template, params, mapping, problems


FORMAT = CopilotPrompt()
FORMATS = (FORMAT,)
