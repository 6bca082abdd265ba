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
  name maps by ``COPILOT_MODELS`` (``Claude Sonnet 4.5 (copilot)`` ->
  ``anthropic:claude-sonnet-4-5``, ``GPT-4o`` -> ``openai:gpt-4o``); any
  other name is kept as written, never guessed: ``check`` warns and a run
  fails naming the aliases (an alias of that name makes it run). Without a
  model the result is the substituted prompt, as for our own template tools.
- ``tools``: VS Code's tools whose work toolcascade's host built-ins do map
  onto them by ``VSCODE_HOST_TOOLS`` (``codebase``, ``search``, ``readFile``
  -> ``Read``/``Grep``/``Glob``; ``editFiles`` -> ``Edit``, ``Write``;
  ``runInTerminal`` -> ``Bash``; ``fetch`` -> ``WebFetch``), confined and gated as
  ``orchestrator.hosttools`` says. VS Code's other tools and tool sets
  (``githubRepo``, ``problems``, ...), MCP tools
  (``server/tool``, ``mcp__...``) and every name ours cannot be
  (``terminalCommand``, ``Microsoft Docs``: ours are lower case) are kept as
  data under ``host-tools``: never offered to a model, never run. Other
  names are taken as our tools.
- What is typed after ``/name`` is the ``input`` arg (default ``""``), added
  after the prompt as the request, as VS Code sends it.
- ``${input:name}`` and ``${input:name:placeholder}`` become required string
  params (the placeholder is the description) substituted into the prompt.
  ``${selection}``, ``${file}``, ``${workspaceFolder}`` and VS Code's other
  variables (``VARIABLES``; outside code, so a JavaScript ``${name}`` is
  text), ``#file:...`` references and links to files are the editor's: they
  stay text, and ``check`` reports each of them. Nothing is ever read.
- Frontmatter that is not strict YAML loads with a warning per key read as
  text (``LENIENCY``), as VS Code loads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..hosttools import GRANT
from .fences import Code
from .fields import (
    Adapted,
    Mapped,
    Summary,
    aliases,
    field_error,
    is_host_tool,
    key_line,
    literal,
    name_list,
    prose_field,
    text_field,
    unknown_model,
)
from .lenient import Leniency

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
        # the tool sets of newer VS Code releases
        "agent",
        "execute",
        "read",
        "todo",
        "vscode",
        "web",
    }
)
VSCODE_HOST_TOOLS: dict[str, tuple[str, ...]] = {
    "codebase": ("Grep", "Glob", "Read"),
    "search": ("Glob", "Grep"),
    "textSearch": ("Grep",),
    "fileSearch": ("Glob",),
    "readFile": ("Read",),
    "listDirectory": ("LS",),
    "read": ("Read",),
    "editFiles": ("Edit", "Write"),
    "createFile": ("Write",),
    "edit": ("Edit", "Write"),
    "runInTerminal": ("Bash",),
    "runCommands": ("Bash",),
    "execute": ("Bash",),
    "fetch": ("WebFetch",),
    "web": ("WebFetch",),
}
"""VS Code's tools (and tool sets) whose work toolcascade's host built-ins do (``orchestrator.hosttools``).

``codebase`` (VS Code's search of the workspace by meaning) becomes text and
path search plus reading: the model finds what it needs the way a Claude Code
subagent does; ``fetch`` (and the ``web`` tool set, whose GitHub search is
VS Code's) becomes ``WebFetch``. The rest stay VS Code's.
"""
_OURS = re.compile(r"^[a-z0-9][a-z0-9_-]*(?::[a-z0-9][a-z0-9_-]*)*$")
"""Our tool names: lower case, digits, ``-`` and ``_`` (``summarize``, ``git:commit``); anything else is VS Code's."""

VARIABLES = frozenset(
    {
        "selection",
        "selectedText",
        "file",
        "fileBasename",
        "fileDirname",
        "fileBasenameNoExtension",
        "workspaceFolder",
        "workspaceFolderBasename",
        "cwd",
        "env",
        "config",
        "command",
        "userHome",
        "pathSeparator",
        "lineNumber",
        "relativeFile",
        "relativeFileDirname",
        "fileExtname",
        "fileWorkspaceFolder",
    }
)
"""VS Code's variables (``${selection}``, ``${env:HOME}``): the editor fills them in; any other ``${name}`` is text."""

INPUT = "input"
"""The arg holding what is typed after ``/name``: VS Code sends it with the prompt, as the user's request."""
INPUT_TAIL = "{% if args.input %}\n\n{{ args.input }}{% endif %}"
"""What a prompt file's body gets after it: the ``input``, when given."""

COPILOT_MODELS: dict[str, str] = {
    "gpt-4o": "openai:gpt-4o",
    "gpt-4o mini": "openai:gpt-4o-mini",
    "gpt-4.1": "openai:gpt-4.1",
    "gpt-4.1 mini": "openai:gpt-4.1-mini",
    "gpt-5": "openai:gpt-5",
    "gpt-5 mini": "openai:gpt-5-mini",
    "gpt-5-codex": "openai:gpt-5-codex",
    "o1": "openai:o1",
    "o1-mini": "openai:o1-mini",
    "o3": "openai:o3",
    "o3-mini": "openai:o3-mini",
    "o4-mini": "openai:o4-mini",
    "claude sonnet 4.5": "anthropic:claude-sonnet-4-5",
    "claude sonnet 4": "anthropic:claude-sonnet-4-0",
    "claude opus 4.1": "anthropic:claude-opus-4-1",
    "claude opus 4": "anthropic:claude-opus-4-0",
    "claude haiku 4.5": "anthropic:claude-haiku-4-5",
    "claude sonnet 3.7": "anthropic:claude-3-7-sonnet-latest",
    "claude 3.7 sonnet": "anthropic:claude-3-7-sonnet-latest",
    "claude sonnet 3.7 thinking": "anthropic:claude-3-7-sonnet-latest",
    "claude 3.7 sonnet thinking": "anthropic:claude-3-7-sonnet-latest",
    "claude sonnet 3.5": "anthropic:claude-3-5-sonnet-latest",
    "claude 3.5 sonnet": "anthropic:claude-3-5-sonnet-latest",
}
"""VS Code's model picker names (lower case, without a ``(copilot)`` or ``(Preview)`` suffix) as real model ids."""

LENIENCY = Leniency("VS Code", frozenset({"description", "argument-hint", "model", "mode", "agent"}))
"""VS Code reads a prompt file whose frontmatter is not strict YAML; these fields are text to it."""

_INPUT = re.compile(r"\$\{input:([A-Za-z_][A-Za-z0-9_-]*)(?::([^}\n]*))?\}")
_VARIABLE = re.compile(r"\$\{([A-Za-z][A-Za-z0-9_]*)(?::[^}\n]*)?\}")
_REFERENCE = re.compile(r"(?<![\w#])#(file|folder|sym):(`[^`\n]+`|[^\s)\]]+)")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?!https?:|mailto:|#)([^)\s]+)\)")


class CopilotPrompt:
    """Copilot prompt files: ``*.prompt.md`` anywhere in a search path."""

    name = "copilot-prompt"
    suffixes = (SUFFIX,)
    locations = (".github/prompts",)
    leniency = LENIENCY
    summary = Summary(
        "`*.prompt.md`: `name`, `description`, `model` (an alias, `provider:name`, or a VS Code model name "
        "through `COPILOT_MODELS`), `tools`; `mode`/`agent` kept as data",
        "`${input:x}` are required args; the text after `/name` is `input`, sent after the prompt; with "
        "`model`, an agent, else the substituted prompt; an unknown model fails naming the aliases",
        "frontmatter that is not strict YAML is read key by key, with a warning; a YAML list in `description` "
        "is the text written",
        "VS Code's tools we do not run (`githubRepo`, `terminalCommand`, `Microsoft Docs`, `server/tool`) are kept as "
        "`host-tools`: never offered, never a failure (`codebase`, `search`, `editFiles`, `runInTerminal`, `fetch` "
        "run as the `Read`/`Grep`/`Glob`, `Edit`/`Write`, `Bash` and `WebFetch` built-ins); `${selection}`, "
        "`${file}`, `#file:` and file links stay text, reported by `check`",
    )

    def recognises(self, path: Path, root: Path) -> bool:
        return path.name.endswith(SUFFIX) and len(path.name) > len(SUFFIX)

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map a prompt file onto our tool (see the module docstring).

        Raises:
            ToolDefinitionError: a field of the wrong type.
        """
        name, mapping = _name(front, path)
        problems: list[tuple[int | None, str]] = []
        metadata: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        description_field(front, name, path, metadata, mapping, problems)
        model_field(front, name, path, metadata, mapping, problems)
        host = tools_field(front, name, path, metadata, mapping)
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


def _name(front: Mapping[str, Any], path: Path) -> tuple[str, list[Mapped]]:
    """The prompt file's name: ``name``, else the file name without ``.prompt.md``."""
    derived = path.name[: -len(SUFFIX)]
    value = front.get("name")
    if value is None:
        return derived, [Mapped("(file name)", "name", f"no 'name': {derived!r} from the file name")]
    if isinstance(value, str) and value.strip():
        return value.strip(), [Mapped("name", "name")]
    raise field_error(
        f"'name' must be non-empty text, not {value!r:.60}", tool=derived, path=path, front=front, key="name"
    )


def description_field(
    front: Mapping[str, Any],
    name: str,
    path: Path,
    metadata: dict[str, Any],
    mapping: list[Mapped],
    problems: list[tuple[int | None, str]],
) -> None:
    """``description`` as text (a YAML list joined, as VS Code renders it); how it was read is a problem for ``check``."""
    description, how = prose_field(front, "description", tool=name, path=path)
    if description is not None:
        metadata["description"] = description
        mapping.append(Mapped("description", "description", how))
        if how:
            problems.append((key_line(front, "description"), f"'description' is {how}"))


def model_field(
    front: Mapping[str, Any],
    name: str,
    path: Path,
    metadata: dict[str, Any],
    mapping: list[Mapped],
    problems: list[tuple[int | None, str]],
) -> None:
    """``model`` through the alias table and ``COPILOT_MODELS``; an unknown name is kept, a run fails and ``check`` says so."""
    model = text_field(front, "model", tool=name, path=path)
    if model is None:
        mapping.append(Mapped("model", None, "absent: the result is the substituted prompt"))
        return
    spec, note, lossless = map_model(model)
    metadata["model"] = spec
    mapping.append(Mapped("model", "model", note, lossless))
    if spec == model:
        unknown = unknown_model(model, COPILOT_MODELS)
        if unknown is not None:
            problems.append((key_line(front, "model"), unknown))


def tools_field(
    front: Mapping[str, Any], name: str, path: Path, metadata: dict[str, Any], mapping: list[Mapped]
) -> list[str]:
    """``tools``: ours and the built-ins VS Code's names map onto to ``tools``, the rest to ``host-tools``.

    Returns the names kept as the host's.
    """
    names = name_list(front, "tools", tool=name, path=path)
    ours = [n for n in names if not _is_host(n)]
    host = [n for n in names if _is_host(n)]
    built_in: list[str] = []
    for vscode in [n for n in host if n in VSCODE_HOST_TOOLS]:
        host.remove(vscode)
        built_in += [tool for tool in VSCODE_HOST_TOOLS[vscode] if tool not in built_in]
        shown = ", ".join(VSCODE_HOST_TOOLS[vscode])
        note = f"VS Code's {vscode} runs as toolcascade's built-in {shown}"
        mapping.append(Mapped("tools", "tools", note, lossless=vscode not in ("codebase", "web")))
    if ours or built_in:
        metadata["tools"] = [*ours, *built_in]
    if ours:
        mapping.append(Mapped("tools", "tools", f"our tools, offered to the model: {', '.join(ours)}"))
    if built_in:
        note = "reading confined to the project folder; writing and running commands need the "
        mapping.append(Mapped("tools", "tools", note + f"{GRANT} grant and approval"))
    if host:
        metadata[HOST_TOOLS] = host
        mapping.append(
            Mapped("tools", HOST_TOOLS, f"kept as data, never run: VS Code tools {', '.join(host)}", lossless=False)
        )
    return host


def _is_host(name: str) -> bool:
    """True for VS Code's tools: its own names, MCP tools (``server/tool``), and any name ours cannot be."""
    return name in VSCODE_TOOLS or is_host_tool(name) or name.startswith("mcp_") or not _OURS.match(name)


def map_model(value: str) -> tuple[Any, str, bool]:
    """A prompt file's ``model`` as (our spec, a note, lossless).

    An alias of ``aliases()`` and ``provider:name`` are used as they are; a
    VS Code model picker name (``Claude Sonnet 4.5 (copilot)``, ``GPT-4o``)
    maps by ``COPILOT_MODELS``. Any other name is kept as written, never
    guessed: a run fails naming the aliases until one is defined for it.
    """
    table = aliases()
    if value in table:
        spec = table[value]
        shown = spec if isinstance(spec, str) else f"{spec.get('provider')}:{spec.get('name') or ''}"
        return spec, f"alias {value} -> {shown}", True
    if ":" in value:
        return value, "kept", True
    plain = re.sub(r"\s*\([^)]*\)\s*$", "", value).strip().lower()
    mapped = COPILOT_MODELS.get(plain) or COPILOT_MODELS.get(plain.replace("-", " "))
    if mapped is not None:
        return mapped, f"VS Code model {value!r} -> {mapped} (orchestrator.formats.copilot.COPILOT_MODELS)", True
    return value, "not a model toolcascade knows: kept as written, a run fails until it names one", False


def substitute(
    body: str, body_line: int, host: list[str]
) -> tuple[str, dict[str, Any], list[Mapped], list[tuple[int | None, str]]]:
    """A prompt file's body as our template, its params, mapping and problems.

    ``${input:...}`` become args; what is typed after ``/name`` is the
    ``input`` arg, added after the prompt as the user's request; everything
    else stays literal text.
    """
    pieces: list[str] = []
    properties: dict[str, Any] = {}
    mapping: list[Mapped] = []
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
    if INPUT not in properties:
        properties[INPUT] = {
            "type": "string",
            "default": "",
            "description": "What is typed after /name: the request, sent after the prompt.",
        }
        template += INPUT_TAIL
        mapping.append(
            Mapped("(the text after /name)", "params.properties.input", "args {input: ...} after the prompt")
        )
    return template, params, mapping, editor_problems(body, body_line, host, mapping)


def editor_problems(body: str, body_line: int, host: list[str], mapping: list[Mapped]) -> list[tuple[int | None, str]]:
    """VS Code variables, ``#file:`` references, file links and ``#tool`` mentions: the editor's, reported."""
    problems: list[tuple[int | None, str]] = []
    code = Code(body) if "`" in body or "~~~" in body else None

    def line(offset: int) -> int:
        return body_line + body.count("\n", 0, offset)

    for match in _VARIABLE.finditer(body):
        if match.group(1) not in VARIABLES or (code is not None and code.covers(match.start())):
            continue  # ${name} in a JavaScript template literal, or any name VS Code does not fill in, is text
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
    return problems


FORMAT = CopilotPrompt()
FORMATS = (FORMAT,)
