"""Claude Code's Markdown files as tools: subagents, slash commands and skills.

- **Subagents** (``.claude/agents/NAME.md``): ``name`` (else the file's stem),
  ``description``, ``tools``, ``model``; the body is the system prompt and the
  caller's task the user message: args ``{"prompt": "..."}``. Without
  ``model`` (or with ``model: inherit``) the alias table's ``inherit`` model
  answers.
- **Slash commands** (``.claude/commands/**.md``): the name is the path
  below ``commands/`` with ``:`` for ``/`` (``frontend/component.md`` is
  ``frontend:component``); ``description`` (else the body's first line),
  ``argument-hint``, ``allowed-tools``, ``model``. Args ``{"arguments":
  "..."}``: ``$ARGUMENTS`` is that string, ``$1``..``$9`` its
  whitespace-separated words (``$ARGUMENTS[0]`` the first); a body that uses
  none of them gets ``ARGUMENTS: ...`` appended when arguments are given, as
  Claude Code does. Without ``model`` the result is the substituted prompt;
  with one, a model answers it. ``@file``, ``!`cmd``` and `````!`` blocks
  run only under ``host-trust: {context: true}`` (``orchestrator.formats.injection``);
  otherwise they stay text and ``check`` says how to turn them on.
- **Skills** (``.claude/skills/NAME/SKILL.md``): found by the folder's name
  (the Agent Skills name); a different ``name:`` ("Writing Hookify Rules")
  is its display name, kept under ``format-fields``. ``description``,
  ``allowed-tools`` (commas or the Agent Skills' spaces: ``Read Edit
  Bash(git:*)``), ``model``; the body is the instructions prompt, with the
  commands' ``$ARGUMENTS``. The folder's other files are resources: they
  stay files and are never tools.

Plugins (``plugins/NAME/{agents,commands,skills}``, or a folder holding
``.claude-plugin/plugin.json``; ``orchestrator.formats.plugins``) are read
as these locations; their tools are named ``NAME:tool`` and
``${CLAUDE_PLUGIN_ROOT}`` in their text is written ``plugins/NAME`` (a folder
with a manifest: its path from the search path, ``.`` when it is the search
path): no server path reaches a prompt.

Frontmatter that is not strict YAML loads as Claude Code loads it
(``LENIENCY``, ``orchestrator.formats.lenient``), with a warning per key read
as text; ``description`` and ``argument-hint`` take a YAML list
(``argument-hint: [pr-number]``) as the text written. In a subagent,
``@file``, ``!`cmd``` and `````!`` blocks are reported and stay text, as
Claude Code preprocesses only commands and skills; ``@`` inside code and
npm scopes (``@axe-core/puppeteer``) are not file references. A ``model``
that is no alias, ``provider:name`` or Anthropic id is kept as written,
never guessed: ``check`` warns, and a run fails naming the aliases.

Claude Code's own tools that toolcascade runs as built-ins (``Read``,
``Glob``, ``Grep``, ``LS``, ``Write``, ``Edit``, ``Bash``, ``WebFetch``;
``orchestrator.hosttools``) go to ``tools`` and are offered to the model;
a subagent without ``tools`` gets all of them, as Claude Code gives it every
tool. Reading is confined to the run's folder; ``Write``, ``Edit``,
``Bash`` and ``WebFetch`` need the ``host-trust`` grant and ask for approval. A permission
pattern (``Bash(git:*)``, ``WebFetch(domain:x.org)``) narrows its tool through ``host-rules``. The
other names (``WebSearch``, ``Task``, ``mcp__...``, a pattern on a reader,
``Read(src/**)``) are kept as data under ``host-tools``: never offered to a
model, never run. Lower-case names are ours and go to ``tools``.
Other fields (``color``, ``permissionMode``, ...) are kept as data under
``format-fields``. Model aliases go through ``orchestrator.formats.ALIASES``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..hosttools import GRANT, IMPLEMENTED_ORDER, RULES, offer
from .fields import (
    Adapted,
    Mapped,
    Summary,
    field_error,
    in_location,
    key_line,
    literal,
    name_list,
    prose_field,
    resolve_model,
    split_tools,
    text_field,
    unknown_model,
)
from .injection import KEY as INJECTION
from .injection import arguments, marks, problem, template_piece
from .lenient import Leniency
from .plugins import ROOT_VARIABLE, Place, fill_root, place

RESERVED = frozenset({"README.md", "AUTHORITY.md", "AUTHORITY.local.md"})
FORMAT_FIELDS = "format-fields"
HOST_TOOLS = "host-tools"
# Resources listed in a skill's mapping: enough to show what is there.
RESOURCES_SHOWN = 20

_PLACEHOLDER = re.compile(r"\$ARGUMENTS\[(\d{1,2})\]|\$ARGUMENTS\b|\$([1-9])(?!\d)")
LENIENCY = Leniency("Claude Code", frozenset({"description", "argument-hint", "model", "color", "when_to_use"}))
"""Claude Code loads a file whose frontmatter is not strict YAML; these fields are text to it."""
Problems = tuple[tuple[int | None, str], ...]
ARGUMENTS_TAIL = "{% if args.arguments %}\n\nARGUMENTS: {{ args.arguments }}{% endif %}"
"""What a command whose body places no ``$ARGUMENTS`` gets after it, as Claude Code appends the arguments."""

_LENIENT = (
    "frontmatter that is not strict YAML is read key by key, each key read as text a warning at its line; "
    "a YAML list in `description` or `argument-hint` is the text written"
)
_HOST_ONLY = (
    "Claude Code's tools we do not run (`WebSearch`, `Task`, `mcp__…`) are kept as `host-tools`: never offered, never "
    "a failure (`Read`, `Glob`, `Grep`, `LS`, `Write`, `Edit`, `Bash`, `WebFetch`, narrowed by `Bash(git:*)` and "
    "`WebFetch(domain:…)`, run as built-ins); "
)
_AGENT_ONLY = (
    _HOST_ONLY + "`@file`, `` !`cmd` `` and ```` ```! ```` blocks stay text (Claude Code runs them only in commands)"
)
_INJECTED = _HOST_ONLY + (
    "`@file`, `` !`cmd` `` and ```` ```! ```` blocks stay text, reported by `check` with how to turn them on: "
    "`host-trust: {context: true}` inlines project files, and with `exec` and `Bash` in `allowed-tools` runs the "
    "commands through the `Bash` built-in (its patterns and approval apply)"
)


def _line(body: str, body_line: int, offset: int) -> int:
    return body_line + body.count("\n", 0, offset)


def _model(
    front: Mapping[str, Any], name: str, path: Path, default: str | None
) -> tuple[dict[str, Any], list[Mapped], Problems]:
    """``model`` (or ``default`` when absent) as our metadata, with its mapping and a warning for an unknown name."""
    value = text_field(front, "model", tool=name, path=path)
    if value is None:
        if default is None:
            return {}, [], ()
        spec, note, lossless = resolve_model(default)
        return {"model": spec}, [Mapped("model", "model", f"absent: {note}", lossless)], ()
    spec, note, lossless = resolve_model(value)
    unknown = unknown_model(value)
    problems: Problems = ((key_line(front, "model"), unknown),) if unknown else ()
    return {"model": spec}, [Mapped("model", "model", note, lossless)], problems


def _prose(front: Mapping[str, Any], key: str, name: str, path: Path) -> tuple[str | None, list[Mapped], Problems]:
    """A field Claude Code documents as text: a YAML list is read as the text written, and said so."""
    value, how = prose_field(front, key, tool=name, path=path)
    if not how:
        return value, [], ()
    return value, [Mapped(key, key, how, lossless=True)], ((key_line(front, key), f"{key!r} is {how}"),)


def _tools(front: Mapping[str, Any], key: str, name: str, path: Path) -> tuple[dict[str, Any], list[Mapped]]:
    """A tool list: ours and the host tools we run (``Read``, ``Bash``...) to ``tools``, the rest to ``host-tools``.

    A permission pattern (``Bash(git:*)``) narrows its tool through ``host-rules``.
    """
    if key not in front:
        return {}, []
    ours, host = split_tools(name_list(front, key, tool=name, path=path, spaces=True))
    built_in, patterns, host = offer(host)
    metadata: dict[str, Any] = {}
    mapping = []
    if ours or built_in:
        metadata["tools"] = [*ours, *built_in]
    if ours:
        mapping.append(Mapped(key, "tools", f"our tools, offered to the model: {', '.join(ours)}"))
    if built_in:
        note = f"Claude Code's tools, run by toolcascade's built-ins: {', '.join(built_in)}"
        mapping.append(
            Mapped(
                key,
                "tools",
                note + " (reading confined to the project folder; writing and Bash need "
                f"the {GRANT} grant and approval)",
            )
        )
    if patterns:
        metadata[RULES] = patterns
        shown = ", ".join(f"{tool}({p})" for tool, found in patterns.items() for p in found)
        mapping.append(Mapped(key, RULES, f"permission patterns narrow the tools: {shown}"))
    if host:
        metadata[HOST_TOOLS] = host
        mapping.append(
            Mapped(key, HOST_TOOLS, f"kept as data, never run: host tools {', '.join(host)}", lossless=False)
        )
    return metadata, mapping


def _extra(front: Mapping[str, Any], known: tuple[str, ...]) -> tuple[dict[str, Any], list[Mapped]]:
    """Fields toolcascade does not use, kept as data under ``format-fields``."""
    extra = {key: value for key, value in front.items() if key not in known}
    if not extra:
        return {}, []
    mapping = [
        Mapped(str(key), FORMAT_FIELDS, "kept as data: not used by toolcascade", lossless=False) for key in extra
    ]
    return {FORMAT_FIELDS: extra}, mapping


def _static(metadata: dict[str, Any]) -> None:
    """Mark the data keys as data, so a tool that happens to share their name never runs as middleware."""
    data = [key for key in (HOST_TOOLS, RULES, FORMAT_FIELDS) if key in metadata]
    if data:
        metadata["$static"] = data


def _name(front: Mapping[str, Any], derived: str, path: Path) -> tuple[str, Mapped]:
    value = front.get("name")
    if value is None:
        return derived, Mapped("(file name)", "name", f"no 'name': {derived!r} from the file's location")
    if not isinstance(value, str):
        raise field_error(
            f"'name' must be text, not a {type(value).__name__}", tool=derived, path=path, front=front, key="name"
        )
    return value, Mapped("name", "name")


def _skill_name(front: Mapping[str, Any], folder: str, path: Path) -> tuple[str, Mapped]:
    """A skill is found by its folder's name (the Agent Skills name); its ``name:`` is a display name."""
    value = front.get("name")
    if value is None or value == folder:
        return _name(front, folder, path)
    if not isinstance(value, str):
        raise field_error(
            f"'name' must be text, not a {type(value).__name__}", tool=folder, path=path, front=front, key="name"
        )
    note = f"the display name {value!r}: the skill is found by its folder's name {folder!r}"
    return folder, Mapped("name", FORMAT_FIELDS, note)


def _plugin_name(name: str, named: Mapped, plugin: Place | None) -> tuple[str, Mapped]:
    """A plugin's file is named after its plugin, as Claude Code names it: ``PLUGIN:name``."""
    if plugin is None or name.startswith(f"{plugin.name}:"):
        return name, named
    note = f"{named.note}; " if named.note else ""
    return f"{plugin.name}:{name}", Mapped(
        named.source, named.target, f"{note}in plugin {plugin.name!r}", named.lossless
    )


def _root_note(body: str, plugin: Place | None) -> tuple[Mapped, ...]:
    """How ``${CLAUDE_PLUGIN_ROOT}`` was written, when the body uses it."""
    if plugin is None or ROOT_VARIABLE not in body:
        return ()
    return (Mapped(ROOT_VARIABLE, "prompt", f"written {plugin.root}: the plugin's folder, relative to the project"),)


def _word(index: int) -> str:
    """The template of the arguments' word ``index`` (0-based), empty when there are fewer words."""
    return "{{ args.arguments.split()[" + str(index) + "] | default('') }}"


def substitute(body: str) -> tuple[str, bool]:
    """A command body as our template: ``$ARGUMENTS``/``$N`` become args, the rest stays literal text.

    Returns the template and whether it used any placeholder.
    """
    pieces: list[str] = []
    start = 0
    used = False
    for match in _PLACEHOLDER.finditer(body):
        pieces.append(literal(body[start : match.start()]))
        index, position = match.group(1), match.group(2)
        if index is not None:
            pieces.append(_word(int(index)))
        elif position is not None:
            pieces.append(_word(int(position) - 1))
        else:
            pieces.append("{{ args.arguments }}")
        used = True
        start = match.end()
    pieces.append(literal(body[start:]))
    return "".join(pieces), used


def unsupported(body: str, body_line: int) -> Problems:
    """``@file``, ``!`cmd``` and `````!`` blocks in a subagent's body: Claude Code runs them in commands and
    skills only, and toolcascade never does here.

    Code is not prose: an ``@`` inside a code span or fence, and an npm
    package's scope (``@axe-core/puppeteer``), name no file.
    """
    found: list[tuple[int | None, str]] = []
    for mark in marks(body):
        what = "files are never read into the prompt" if mark.kind == "file" else "commands are never run"
        found.append((_line(body, body_line, mark.start), f"{mark.source} is not supported: {what} (it stays text)"))
    return tuple(found)


def _arguments_prompt(
    body: str, body_line: int
) -> tuple[str, list[Mapped], tuple[tuple[int | None, str], ...], dict[str, Any]]:
    """The prompt of a command or skill, its mapping, its problems and its context injection's metadata.

    Each `` !`cmd` ``, `````!`` block and ``@file`` becomes a choice in the
    template (``orchestrator.formats.injection``): its output under the
    ``host-context`` grant, else its own text.
    """
    found = marks(body)
    pieces: list[str] = []
    used = False
    position = 0
    for index, mark in enumerate(found):
        text, placed = substitute(body[position : mark.start])
        pieces += [text, template_piece(index, mark, body)]
        used = used or placed
        position = mark.end
    text, placed = substitute(body[position:])
    template, used = "".join([*pieces, text]), used or placed
    mapping = [Mapped("body", "prompt", "$ARGUMENTS and $1..$9 from args.arguments" if used else "literal text")]
    if not used:
        # Claude Code appends the arguments to a body that does not place them.
        template += ARGUMENTS_TAIL
        mapping.append(Mapped("(arguments)", "prompt", "appended as 'ARGUMENTS: ...' when given"))
    problems = tuple((_line(body, body_line, mark.start), problem(mark)) for mark in found)
    if not found:
        return template, mapping, problems, {}
    note = "@file, !`cmd` and ```! blocks: run and inlined under host-trust {context: true}, else they stay text"
    mapping.append(Mapped("body", INJECTION, note, lossless=False))
    return template, mapping, problems, {INJECTION: arguments(found)}


def _arguments_params(hint: str | None, required: bool = False) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string", "default": ""}
    prop["description"] = f"Arguments: {hint}" if hint else "The command's arguments ($ARGUMENTS)."
    return {"type": "object", "properties": {"arguments": prop}, "additionalProperties": False}


def _first_line(body: str) -> str | None:
    for line in body.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            return text[:200]
    return None


class ClaudeAgent:
    """Claude Code subagents: ``.claude/agents/*.md``."""

    name = "claude-agent"
    locations = (".claude/agents",)
    known = ("name", "description", "tools", "model")
    leniency = LENIENCY
    summary = Summary(
        "`.claude/agents/*.md`, a plugin's `agents/*.md` (as `P:name`; a plugin is `plugins/P/` or a folder with "
        "`.claude-plugin/plugin.json`, up to 4 levels down): `name`, `description`, `tools`, `model`; other fields "
        "kept as data",
        'an agent: the body is the system prompt, `{"prompt": ...}` the user message; our tools '
        "(`mcp__toolcascade__NAME` too) and Claude Code's `Read`, `Glob`, `Grep`, `LS`, `Write`, `Edit`, `Bash`, "
        "`WebFetch` offered (all of them without `tools`; reading confined to the project, writing, `Bash` and "
        "`WebFetch` need `host-trust` and approval); `model` an alias or Anthropic id, else `inherit`; "
        "an unknown name fails naming the aliases",
        _LENIENT,
        _AGENT_ONLY,
    )

    def recognises(self, path: Path, root: Path) -> bool:
        return path.suffix == ".md" and path.name not in RESERVED and in_location(path, self.locations[0]) is not None

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        plugin = place(path, "agents", getattr(front, "root", None))
        name, named = _plugin_name(*_name(front, path.stem, path), plugin)
        mapping = [named, *_root_note(body, plugin)]
        body = fill_root(body, plugin)
        metadata: dict[str, Any] = {}
        description, mapped, problems = _prose(front, "description", name, path)
        if description is not None:
            metadata["description"] = description
            mapping += mapped or [Mapped("description", "description")]
        tools, tool_map = _tools(front, "tools", name, path)
        model, model_map, model_problems = _model(front, name, path, "inherit")
        metadata.update(model)
        mapping += model_map
        metadata.update(tools)
        mapping += tool_map
        if "tools" not in front:  # Claude Code's rule: a subagent without tools gets every tool
            metadata["tools"] = list(IMPLEMENTED_ORDER)
            note = f"absent: every Claude Code tool toolcascade runs ({', '.join(IMPLEMENTED_ORDER)}), as Claude Code"
            mapping.append(Mapped("tools", "tools", note + " offers every tool; writing and Bash need a grant"))
        metadata["params"] = {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": f"The task for the {name} agent."}},
            "required": ["prompt"],
            "additionalProperties": False,
        }
        mapping.append(Mapped("(the caller's task)", "params", "args {prompt: ...} as the user message"))
        if body:
            metadata["system"] = literal(body)
            mapping.append(Mapped("body", "system", "the system prompt, as literal text"))
        extra, extra_map = _extra(front, self.known)
        metadata.update(extra)
        mapping += extra_map
        _static(metadata)
        found = sorted((*problems, *model_problems, *unsupported(body, body_line)), key=lambda item: item[0] or 0)
        return Adapted(name, metadata, "{{ args.prompt }}", tuple(mapping), tuple(found))


class ClaudeCommand:
    """Claude Code slash commands: ``.claude/commands/**/*.md``, subfolders as ``folder:name`` namespaces."""

    name = "claude-command"
    locations = (".claude/commands",)
    known = ("name", "description", "argument-hint", "allowed-tools", "model")
    leniency = LENIENCY
    summary = Summary(
        "`.claude/commands/**/*.md` (`git/x.md` is `git:x`), `plugins/P/commands/` (`P:x`): `description` "
        "(else the first line), `argument-hint`, `allowed-tools`, `model`",
        '`{"arguments": ...}` fills `$ARGUMENTS`, `$1`..`$9` (appended when the body uses none); '
        "`${CLAUDE_PLUGIN_ROOT}` is `plugins/P` (with a manifest: its folder from the search path, `.` for the search path itself); with `model`, an agent",
        _LENIENT,
        _INJECTED,
    )

    def recognises(self, path: Path, root: Path) -> bool:
        return path.suffix == ".md" and path.name not in RESERVED and in_location(path, self.locations[0]) is not None

    def derived_name(self, path: Path) -> str:
        """``frontend/component.md`` under ``commands/`` -> ``frontend:component``; in plugin ``web``, ``web:frontend:component``."""
        folder = in_location(path, self.locations[0])
        parts = path.relative_to(folder).with_suffix("").parts if folder is not None else (path.stem,)
        plugin = place(path, "commands")
        return ":".join((plugin.name, *parts) if plugin is not None else parts)

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        plugin = place(path, "commands", getattr(front, "root", None))
        name, named = _name(front, self.derived_name(path), path)
        if "name" in front:
            name, named = _plugin_name(name, named, plugin)
        adapted = _command_like(self, name, named, path, front, fill_root(body, plugin), body_line)
        note = _root_note(body, plugin)
        return replace(adapted, mapping=(*adapted.mapping, *note)) if note else adapted


class ClaudeSkill:
    """Claude Code skills: ``.claude/skills/NAME/SKILL.md``; the folder's other files are resources."""

    name = "claude-skill"
    locations = (".claude/skills",)
    known = ("name", "description", "argument-hint", "allowed-tools", "model")
    leniency = LENIENCY
    summary = Summary(
        "`.claude/skills/NAME/SKILL.md`, `plugins/P/skills/NAME/` (`P:NAME`): found by the folder's name, "
        "`name:` a display name; `allowed-tools` by commas or spaces (`Read Edit Bash(git:*)`)",
        "the instructions, with `$ARGUMENTS`; the folder's other files stay files, never tools",
        _LENIENT,
        _INJECTED,
    )

    def recognises(self, path: Path, root: Path) -> bool:
        if path.name != "SKILL.md":
            return False
        folder = in_location(path, self.locations[0])
        return folder is not None and path.parent.parent == folder

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        plugin = place(path, "skills", getattr(front, "root", None))
        name, named = _plugin_name(*_skill_name(front, path.parent.name, path), plugin)
        adapted = _command_like(self, name, named, path, front, fill_root(body, plugin), body_line)
        root_note = _root_note(body, plugin)
        if root_note:
            adapted = replace(adapted, mapping=(*adapted.mapping, *root_note))
        resources = _resources(path.parent)
        if resources:
            shown = ", ".join(resources[:RESOURCES_SHOWN]) + (", ..." if len(resources) > RESOURCES_SHOWN else "")
            note = f"{len(resources)} file(s) beside SKILL.md stay files, never tools: {shown}"
            return Adapted(
                adapted.name,
                adapted.metadata,
                adapted.prompt,
                (*adapted.mapping, Mapped("resources", None, note)),
                adapted.problems,
            )
        return adapted


def _command_like(
    fmt: ClaudeCommand | ClaudeSkill,
    name: str,
    named: Mapped,
    path: Path,
    front: Mapping[str, Any],
    body: str,
    body_line: int,
) -> Adapted:
    mapping = [named]
    metadata: dict[str, Any] = {}
    description, mapped, problems = _prose(front, "description", name, path)
    if description is not None:
        metadata["description"] = description
        mapping += mapped or [Mapped("description", "description")]
    elif _first_line(body):
        metadata["description"] = _first_line(body)
        mapping.append(Mapped("(body's first line)", "description", "no 'description': the body's first line"))
    hint, hint_map, hint_problems = _prose(front, "argument-hint", name, path)
    metadata["params"] = _arguments_params(hint)
    mapping += hint_map
    mapping.append(Mapped("argument-hint" if hint else "(arguments)", "params", "args {arguments: ...}, default ''"))
    model, model_map, model_problems = _model(front, name, path, None)
    metadata.update(model)
    mapping += model_map
    tools, tool_map = _tools(front, "allowed-tools", name, path)
    metadata.update(tools)
    mapping += tool_map
    prompt, prompt_map, body_problems, injection = _arguments_prompt(body, body_line)
    mapping += prompt_map
    metadata.update(injection)
    extra, extra_map = _extra(front, fmt.known)
    if named.target == FORMAT_FIELDS:  # a skill's display name
        extra = {FORMAT_FIELDS: {"name": front["name"], **extra.get(FORMAT_FIELDS, {})}}
    metadata.update(extra)
    mapping += extra_map
    _static(metadata)
    found = sorted((*problems, *hint_problems, *model_problems, *body_problems), key=lambda item: item[0] or 0)
    return Adapted(name, metadata, prompt, tuple(mapping), tuple(found))


def _resources(folder: Path) -> list[str]:
    """The files of a skill's folder other than SKILL.md, relative and sorted (at most a few hundred looked at)."""
    found: list[str] = []
    try:
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for file in sorted(files):
                rel = Path(current, file).relative_to(folder).as_posix()
                if rel != "SKILL.md":
                    found.append(rel)
                if len(found) > 10 * RESOURCES_SHOWN:
                    return found
    except OSError:
        return found
    return found


AGENT = ClaudeAgent()
COMMAND = ClaudeCommand()
SKILL = ClaudeSkill()
FORMATS = (AGENT, COMMAND, SKILL)
