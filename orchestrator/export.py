"""Write one of our tools in another format: ``toolcascade export NAME --format prompty|claude-agent``.

``export_tool(tool, format)`` returns the file's text and every field that
does not survive the trip (``Lost``: the field and why), so nothing is lost
silently: the command prints one ``lost: FIELD: WHY`` line per field on
stderr, and ``--strict`` refuses to write anything when there is one.

What maps:

- **prompty**: ``name``, ``description``; ``model`` as ``configuration``
  (``openai``; an ``.../openai/v1`` base URL as ``azure_openai``;
  ``api-key-env`` as ``api_key: ${env:VAR}``) and ``parameters``
  (``max-tokens`` as ``max_tokens``, ``options`` as they are); ``params`` as
  ``inputs`` (``type``, ``description``, ``default``, the first of
  ``examples`` as ``sample``, ``required``; other JSON Schema keywords under
  ``json_schema``); ``returns`` as ``outputs``; ``system``, ``messages`` and
  the prompt as ``system:``, role and ``user:`` sections, with ``args.x``
  written ``x`` as Prompty templates read it. A tool read from a Prompty
  file gets its kept fields (``authors``, ``tags``, ...) and its ``template:
  mustache`` back.
- **claude-agent** (``.claude/agents/NAME.md``): ``name``, ``description``,
  ``tools`` (ours as ``mcp__toolcascade__NAME``, the name Claude Code gives
  them through ``toolcascade serve``, read back as ours; the host tools we
  run as built-ins, ``Read`` or ``Bash(git:*)``, by Claude Code's own names;
  Claude Code's others when the tool came from a Claude Code file; another
  host's never), ``model``
  (an alias of ``orchestrator.formats.aliases()`` when one names it); the
  body is the system prompt. A subagent's user message is the caller's task,
  so only a tool whose prompt is ``{{ args.prompt }}`` maps without loss.

``params`` and ``returns`` in Picoschema shorthand are written as the JSON
Schema they mean (``schema.json_schema``). A Prompty file's sections are
written as its author wrote them (``formats.prompty.authored``): without the
``|default('')`` reads and history markers its adapter adds, a thread
input as ``kind: thread``.

A Claude Code command's context injection (`` !`cmd` ``, `````!`` blocks,
``@file``; ``orchestrator.formats.injection``) is written as the author wrote
it, and reported lost: neither a Prompty file nor a subagent runs it.

A field reported lost is never written. Body lines that would read back as
Prompty role markers (``TOOLS:``, ``# Human:``) are written as jinja2
strings (``{{ 'TOOLS:' }}``), which render the same; one naming a role
Prompty itself splits on after rendering (``user:``) is reported lost.

Everything else (middleware keys, ``$`` annotations, python bodies) is lost
and said so. So is the middleware the tool gets from its authorities
(``default`` included) and the tools it ``$inherit``s, which the exported
file no longer runs (``pipeline_losses``); the entries of the ``$execute``
phase are not, since they run the body, which the other host runs itself.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from .errors import ConfigurationError
from .explain import Explanation
from .frozen import thaw
from .schema import json_schema
from .subagent import to_claude_agent
from .tool import Tool
from .translation import FORMAT_FIELDS as FORMAT_FIELDS
from .translation import HOST_TOOLS as HOST_TOOLS
from .translation import (
    Lost,
    as_authored,
    format_fields,
    prompty_template,
    prompty_threads,
    raw_spans,
    report_rest,
    unliteral,
)

FORMATS = ("prompty", "claude-agent")


@dataclass(frozen=True, slots=True)
class Exported:
    """A tool written in another format: the file's text and what it loses."""

    format: str
    text: str
    lost: tuple[Lost, ...]

    @property
    def lossless(self) -> bool:
        """True when every field survived."""
        return not self.lost


def export_tool(tool: Tool, fmt: str) -> Exported:
    """Write ``tool`` as a file of format ``fmt`` (``prompty`` or ``claude-agent``).

    Raises:
        ConfigurationError: an unknown format, or a tool that is not a markdown tool (no prompt to write).
    """
    writer = _WRITERS.get(fmt)
    if writer is None:
        raise ConfigurationError(f"cannot export to {fmt!r}; formats: {', '.join(FORMATS)}", tool=tool.name)
    if tool.kind != "markdown":
        raise ConfigurationError(
            f"a {tool.kind} tool has code, not a prompt: only markdown tools (and imported files) can be exported",
            tool=tool.name,
        )
    lost: list[Lost] = []
    tool = _without_injection(tool, fmt, lost)
    text = writer(tool, _own(tool), lost)
    return Exported(fmt, text, tuple(lost))


def _without_injection(tool: Tool, fmt: str, lost: list[Lost]) -> Tool:
    """A Claude Code command's tool with its context injection (``!`cmd```, ``@file``) written back as text.

    Neither a Prompty file nor a subagent runs them (Claude Code injects only in commands and skills): the
    markers are written as the author wrote them, and said so.
    """
    from dataclasses import replace

    from .formats.injection import KEY, authored
    from .frozen import freeze

    if KEY not in tool.metadata:
        return tool
    host = "Prompty" if fmt == "prompty" else "a Claude Code subagent"
    lost.append(Lost(KEY, f"!`cmd`, ```! blocks and @file: written as text, which {host} never runs or reads"))
    metadata = {key: value for key, value in thaw(tool.metadata).items() if key != KEY}
    return replace(tool, prompt=authored(tool.prompt or ""), metadata=freeze(metadata))


def pipeline_losses(explanation: Explanation) -> tuple[Lost, ...]:
    """The middleware of a tool's authorities and inherited tools, which its exported file does not run.

    One ``Lost`` per chain entry set by a level other than the tool's own, in
    chain order. Left out: entries with nothing to do for this tool (R-CHAIN-12),
    and those of the ``$execute`` phase (they run the body: the other host runs it itself).
    """
    levels = dict(explanation.levels)  # level name -> 'authority' | 'tool'
    lost = []
    for entry in explanation.chain:
        if entry.origin != "metadata" or not entry.needed or entry.phase == "$execute":
            continue
        try:
            level = explanation.key(entry.name).level
        except KeyError:
            continue
        if level == explanation.tool or level not in levels:
            continue  # the tool's own key: reported with its fields
        source = f"{'authority' if levels[level] == 'authority' else 'inherited tool'} {level!r}"
        lost.append(Lost(entry.name, f"middleware from {source}: the exported file does not run it"))
    return tuple(lost)


def _own(tool: Tool) -> dict[str, Any]:
    """The tool's own metadata as plain data."""
    return dict(thaw(tool.metadata))


# -- prompty -------------------------------------------------------------------


_MARKER_LINE = re.compile(r"^[ \t]*#?[ \t]*([A-Za-z]+)[ \t]*(\[[^\]\n]*\])?[ \t]*:[ \t]*$", re.MULTILINE)
# Roles Prompty itself splits on after rendering: such a line cannot stay text there, whatever the escape.
_PROMPTY_ROLES = ("system", "user", "assistant", "function")


def _directives(text: str, where: str, lost: list[Lost]) -> None:
    if ":" not in text:
        return
    from .directives import find_directives

    for directive in find_directives(text):
        lost.append(Lost(where, f"directive :{directive.name} runs only in toolcascade: it stays text"))


def escape_roles(text: str, where: str, lost: list[Lost]) -> str:
    """``text`` with each line that would read back as a role marker (``TOOLS:``, ``user:``) written as a jinja2 string.

    ``{{ 'TOOLS:' }}`` renders to the same line, and the Prompty adapter finds
    markers in the source, so the exported file loads back with the same
    messages. Prompty itself renders before it splits: a line naming one of its
    roles (``user:``) still starts a message there, and is reported ``lost``.
    """
    if ":" not in text:
        return text
    from .formats.sections import FOREIGN_ROLES, ROLES, UNSUPPORTED_ROLES
    from .typos import one_edit_apart

    roles = (*ROLES, *UNSUPPORTED_ROLES)
    raw = raw_spans(text)

    def escape(match: re.Match[str]) -> str:
        word = match.group(1).lower()
        marker = (
            word in roles
            or word in FOREIGN_ROLES
            or match.group(2) is not None
            or any(one_edit_apart(word, role) and word != role + "s" for role in roles)
        )
        if not marker:
            return match.group(0)
        if word in _PROMPTY_ROLES:
            lost.append(Lost(where, f"the line {match.group(0).strip()!r} starts a new message in Prompty itself"))
        written = "{{ " + repr(match.group(0)) + " }}"
        if any(start < match.start() < end for start, end in raw):  # literal text: step out of the raw block
            return "{% endraw %}" + written + "{% raw %}"
        return written

    return _MARKER_LINE.sub(escape, text)


def to_prompty(tool: Tool, meta: dict[str, Any], lost: list[Lost]) -> str:
    """Our tool as a ``.prompty`` file (see the module docstring)."""
    front: dict[str, Any] = {}
    kept = format_fields(tool, meta, lost, "prompty", "Prompty")
    front["name"] = kept.pop("name", tool.name)
    if tool.description:
        front["description"] = tool.description
    for key in ("version", "authors", "tags", "metadata", "id"):
        if key in kept:
            front[key] = kept.pop(key)
    settings = meta.pop("prompty", None)
    mustache = isinstance(settings, Mapping) and settings.get("template") == "mustache"
    completion = isinstance(settings, Mapping) and settings.get("api") == "completion"
    model = _prompty_model(meta, lost, completion)
    if model is not None:
        front["model"] = model
    params = json_schema(meta.pop("params", None), "params", tool)  # a shorthand as JSON Schema
    inputs = _inputs(params, lost, prompty_threads(tool, _names(params)))
    if inputs:
        front["inputs"] = inputs
    returns = json_schema(meta.pop("returns", None), "returns", tool)
    if returns is not None:
        outputs = _outputs(returns)
        if outputs is None:
            lost.append(Lost("returns", "only an object schema with properties maps onto Prompty outputs"))
        else:
            front["outputs"] = outputs
            if set(returns.get("required") or ()) != set(outputs):
                lost.append(Lost("returns.required", "every Prompty output is required"))
    if "outputs" in kept:
        front.setdefault("outputs", kept.pop("outputs"))
    if mustache:
        front["template"] = "mustache"
    for key, value in kept.items():
        front[key] = value
    sections = _sections(tool, meta, lost, mustache, completion)
    report_rest(meta, lost, ("$static", "$order"), tool)
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n{sections}"


def _prompty_model(meta: dict[str, Any], lost: list[Lost], completion: bool) -> dict[str, Any] | None:
    value = meta.pop("model", None)
    choice = meta.pop("tool-choice", None)
    if value is None:
        if choice is not None:
            lost.append(Lost("tool-choice", "no model to send it to"))
        return None
    from .agent.model import parse_model

    try:
        spec = parse_model(value)
    except ConfigurationError as exc:
        lost.append(Lost("model", f"not a model spec toolcascade reads ({exc.detail}): left out"))
        return None
    config: dict[str, Any] = {}
    provider, url = spec["provider"], spec.get("base-url")
    if provider == "openai" and isinstance(url, str) and url.rstrip("/").endswith("/openai/v1"):
        config = {"type": "azure_openai", "azure_endpoint": url.rstrip("/")[: -len("/openai/v1")]}
        config["azure_deployment"] = spec["name"]
    elif provider == "openai":
        config = {"type": "openai", "name": spec["name"]}
        if url:
            config["base_url"] = url
            lost.append(
                Lost(
                    "model.base-url",
                    "Prompty's openai configuration has no base URL: written as base_url, which only toolcascade reads",
                )
            )
    else:
        config = {"type": provider}
        if spec.get("name"):
            config["name"] = spec["name"]
        lost.append(
            Lost("model.provider", f"{provider!r} is not a Prompty configuration type: only toolcascade runs it")
        )
        for key in ("script", "file"):
            if spec.get(key) is not None:
                config[key] = spec[key]
    if spec.get("api-key-env"):
        config["api_key"] = "${env:" + str(spec["api-key-env"]) + "}"
    model: dict[str, Any] = {"api": "completion" if completion else "chat", "configuration": config}
    parameters: dict[str, Any] = {}
    if spec.get("max-tokens") is not None:
        parameters["max_tokens"] = spec["max-tokens"]
    for key, item in (spec.get("options") or {}).items():
        if key == "stream":
            lost.append(Lost("model.options.stream", "Prompty chooses streaming when it runs"))
            continue
        parameters[key] = item
    if spec.get("timeout") is not None:
        lost.append(Lost("model.timeout", "Prompty has no request timeout"))
    if choice is not None:
        parameters["tool_choice"] = choice
    if parameters:
        model["parameters"] = parameters
    return model


_INPUT_KEYS = ("type", "description", "default", "examples")


def _names(params: Any) -> list[str]:
    properties = params.get("properties") if isinstance(params, Mapping) else None
    return [str(name) for name in properties] if isinstance(properties, Mapping) else []


def _inputs(params: Any, lost: list[Lost], threads: set[str]) -> dict[str, Any]:
    """``params`` as Prompty inputs; each of ``threads`` (a Prompty file's chat history input) as ``kind: thread``."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not isinstance(params.get("properties", {}), Mapping):
        lost.append(Lost("params", "only an object schema with properties maps onto Prompty inputs"))
        return {}
    required = set(params.get("required") or ())
    for key in params:
        if key not in ("type", "properties", "required", "additionalProperties"):
            lost.append(Lost(f"params.{key}", "Prompty inputs have no such keyword"))
    if params.get("additionalProperties") is False:
        lost.append(
            Lost("params.additionalProperties", "Prompty accepts any other input: unknown args are not refused")
        )
    inputs: dict[str, Any] = {}
    for name, prop in (params.get("properties") or {}).items():
        prop = dict(prop) if isinstance(prop, Mapping) else {}
        item: dict[str, Any] = {}
        kind = prop.get("type")
        if name in threads:
            item["kind"] = "thread"  # its type and items are the thread's own
            prop = {k: v for k, v in prop.items() if k not in ("type", "items")}
        elif isinstance(kind, str):
            item["type"] = kind
        elif "examples" not in prop:
            item["type"] = "string"
            lost.append(Lost(f"params.properties.{name}", "has no single type; Prompty needs one: written as string"))
        if "description" in prop:
            item["description"] = prop["description"]
        if "default" in prop:
            item["default"] = prop["default"]
        examples = prop.get("examples")
        if isinstance(examples, list) and examples:
            item["sample"] = examples[0]
            if len(examples) > 1:
                lost.append(Lost(f"params.properties.{name}.examples", "Prompty keeps one sample: the first"))
        if name in required:
            item["required"] = True
        rest = {k: v for k, v in prop.items() if k not in _INPUT_KEYS or (k == "type" and not isinstance(v, str))}
        if rest:
            item["json_schema"] = rest
        inputs[name] = item
    return inputs


def _outputs(returns: Any) -> dict[str, Any] | None:
    if not isinstance(returns, Mapping) or not isinstance(returns.get("properties"), Mapping):
        return None
    outputs: dict[str, Any] = {}
    for name, prop in returns["properties"].items():
        if not isinstance(prop, Mapping):
            return None
        item = {k: v for k, v in prop.items() if k in ("type", "description", "enum", "items", "properties")}
        if len(item) != len(prop):
            return None
        outputs[name] = item
    return outputs


def _sections(tool: Tool, meta: dict[str, Any], lost: list[Lost], mustache: bool, completion: bool) -> str:
    parts: list[str] = []

    def convert(text: str, where: str) -> str:
        text = as_authored(tool, text)  # a Prompty file's text without the adapter's lenient reads and markers
        if mustache:
            source = unliteral(text)
            if source is not None:
                return source
        converted = prompty_template(text, where, lost)
        _directives(converted, where, lost)
        if not completion:
            converted = escape_roles(converted, where, lost)
        return converted.strip()

    prompt = convert(tool.prompt or "", "prompt")
    if completion:
        return prompt + "\n" if prompt else ""
    system = meta.pop("system", None)
    if system is not None:
        parts.append("system:\n" + convert(str(system), "system"))
    messages = meta.pop("messages", None)
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            if isinstance(message, Mapping) and message.get("role") in ("system", "user", "assistant"):
                content = convert(str(message.get("content", "")), f"messages[{index}]")
                parts.append(f"{message['role']}:\n{content}")
            else:
                lost.append(Lost(f"messages[{index}]", "not a {role, content} message"))
    elif messages is not None:
        lost.append(Lost("messages", "not a list of messages"))
    if prompt:
        parts.append("user:\n" + prompt)
    return "\n\n".join(parts) + "\n"


_WRITERS: dict[str, Callable[[Tool, dict[str, Any], list[Lost]], str]] = {
    "prompty": to_prompty,
    "claude-agent": to_claude_agent,
}


# -- the command ---------------------------------------------------------------


def _command() -> click.Command:
    from .exits import reporting
    from .flags import debug_option, search_paths
    from .manager import Manager

    @click.command(short_help="Write a tool as a Prompty file or a Claude Code subagent.")
    @click.argument("tool")
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        required=True,
        help="prompty (a .prompty file) or claude-agent (a .claude/agents/NAME.md file).",
    )
    @click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True, path_type=Path),
        help="Write to FILE instead of stdout.",
    )
    @click.option("--strict", is_flag=True, help="Fail, writing nothing, when any field would be lost.")
    # Not cli.path_option: its --format selects the formats read, and here --format is the one written.
    @click.option(
        "--path",
        "paths",
        multiple=True,
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Search DIR for tools (repeatable; first match wins; every format is read). "
        "Default: ./tools when it exists.",
    )
    @debug_option
    def export(tool: str, fmt: str, output: Path | None, strict: bool, paths: Any, debug: bool) -> None:
        """Write TOOL in another format: every field that does not map is named on stderr.

        Each lost field prints one line, 'lost: FIELD: WHY', on stderr; with
        --strict any lost field is an error and nothing is written.

        \b
        Examples:
          toolcascade export summarize --format prompty -o summarize.prompty
          toolcascade export reviewer --format claude-agent -o .claude/agents/reviewer.md
          toolcascade export summarize --format prompty --strict
        """
        with reporting(debug):
            manager = Manager(search_paths(paths))
            exported = export_tool(manager.find_tool(tool), fmt)
            lost = exported.lost + pipeline_losses(manager.explain(tool, render=False))
        if strict and lost:
            for item in lost:
                click.echo(f"lost: {item}", err=True)
            click.echo(
                f"error: {tool!r} does not export to {fmt} without loss ({len(lost)} field(s) above); "
                "nothing written (--strict)",
                err=True,
            )
            sys.exit(1)
        if output is None:
            click.echo(exported.text, nl=False)
        else:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(exported.text, encoding="utf-8")
        for item in lost:
            click.echo(f"lost: {item}", err=True)

    return export


export = _command()
