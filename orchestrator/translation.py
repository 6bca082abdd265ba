"""What an export keeps and loses: ``Lost``, the keys every written format leaves behind, and our jinja2
templates turned into another format's (literal text, or Prompty's jinja2 with the args in scope).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import OrchestratorError
from .tool import Tool

FORMAT_FIELDS = "format-fields"
"""The annotation an adapter keeps another format's own fields under."""
HOST_TOOLS = "host-tools"
"""The key an adapter keeps another host's tools under (never offered to a model)."""


@dataclass(frozen=True, slots=True)
class Lost:
    """A field that does not survive an export, and why."""

    field: str
    why: str

    def __str__(self) -> str:
        return f"{self.field}: {self.why}"


_PREAMBLE = re.compile(r"\{% set (\w+) = args\[('[^']*'|\"[^\"]*\")\] if \2 in args else [^%]*%\}")
_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_ARG = re.compile(r"\bargs\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(?:'([^']*)'|\"([^\"]*)\")\s*\])")
_SCOPE = re.compile(r"(?<![\w.'\"])(args|meta|locals|tool|env|cwd)\b")


def unliteral(text: str) -> str | None:
    """``text`` rendered when it needs no variables (a literal block, static text), else None."""
    from .interpolate import is_template, render

    if not is_template(text):
        return text
    try:
        return render(text, {})
    except OrchestratorError:
        return None


def as_authored(tool: Tool, text: str) -> str:
    """A section of ``tool`` as its author wrote it, for another format's file.

    A Prompty file's sections carry what its adapter adds for lenient
    rendering (``(x.y|default(''))`` reads, history markers): they are undone
    (``orchestrator.formats.prompty.authored``). Any other tool's text is returned as it is.
    """
    if tool.format != "prompty":
        return text
    from .formats.prompty import authored

    return authored(text)


def prompty_threads(tool: Tool, names: Iterable[str]) -> set[str]:
    """The inputs among ``names`` that a Prompty file declared as threads (``kind: thread``), placed as messages.

    The adapter marks where each one's messages go (``orchestrator.formats.history``); ``as_authored``
    writes the marker back as ``{{name}}``, so the exported input must say it is a thread again.
    """
    if tool.format != "prompty":
        return set()
    from .formats.history import thread_marker

    messages = tool.metadata.get("messages")
    texts = [str(tool.metadata.get("system") or ""), tool.prompt or ""]
    if isinstance(messages, list | tuple):
        texts += [str(m.get("content", "")) for m in messages if isinstance(m, Mapping)]
    return {name for name in names if any(thread_marker(name) in text for text in texts)}


def strip_request(text: str) -> tuple[str, str | None]:
    """``text`` without the request an adapter appends to a body, and the arg that request reads (or None).

    Claude Code's commands get their ``arguments``, Copilot's prompt files
    their ``input`` after the body: that is the caller's task, which a
    subagent takes as its user message, so the body alone is its system prompt.
    """
    from .formats.claude import ARGUMENTS_TAIL
    from .formats.copilot import INPUT_TAIL

    for tail, arg in ((ARGUMENTS_TAIL, "arguments"), (INPUT_TAIL, "input")):
        if text.endswith(tail):
            return text[: -len(tail)], arg
    return text, None


def strip_preamble(text: str) -> str:
    """``text`` without the ``{% set x = args['x'] ... %}`` lines the Prompty adapter puts first."""
    position = 0
    while (match := _PREAMBLE.match(text, position)) is not None:
        position = match.end()
    return text[position:]


def prompty_template(text: str, where: str, lost: list[Lost]) -> str:
    """One of our templates as a Prompty jinja2 template: ``args.x`` read as ``x``.

    The preamble the Prompty adapter writes is dropped (it is that mapping
    reversed); a read of ``meta``, ``locals``, ``tool``, ``env``, ``cwd`` or
    the whole ``args`` has no Prompty equivalent and is reported.
    """
    text = strip_preamble(text)
    unknown: set[str] = set()

    def tag(match: re.Match[str]) -> str:
        # What the tag reads besides args.NAME (checked before the rename: an input may be called 'tool').
        unknown.update(m.group(1) for m in _SCOPE.finditer(_strip_strings(_ARG.sub("_", match.group(0)))))
        return _ARG.sub(lambda m: m.group(1) or m.group(2) or m.group(3) or "", match.group(0))

    converted = _TAG.sub(tag, _protect_raw(text))
    converted = _restore_raw(converted)
    for name in sorted(unknown):
        lost.append(Lost(where, f"reads {name!r}, which Prompty templates do not have: it renders empty there"))
    return converted


_RAW = re.compile(r"\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}", re.DOTALL)


def raw_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the ``{% raw %}`` blocks in ``text``: literal text there is not a template."""
    return [(match.start(), match.end()) for match in _RAW.finditer(text)] if "raw" in text else []


def _protect_raw(text: str) -> str:
    # Raw blocks are literal text: their braces are not tags.
    return _RAW.sub(lambda m: "\x00" + m.group(0).encode("utf-8").hex() + "\x00", text)


def _restore_raw(text: str) -> str:
    return re.sub("\x00([0-9a-f]*)\x00", lambda m: bytes.fromhex(m.group(1)).decode("utf-8"), text)


def _strip_strings(expression: str) -> str:
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", expression)


def format_fields(tool: Tool, meta: dict[str, Any], lost: list[Lost], written: str, host: str) -> dict[str, Any]:
    """The tool's own file-format fields (taken out of ``meta``), kept only when ``written`` is that format.

    Written in another format, each field is ``lost``: ``host`` has no place for it.
    """
    fields = meta.pop(FORMAT_FIELDS, None)
    kept = dict(fields) if isinstance(fields, Mapping) and tool.format == written else {}
    if fields and not kept:
        for key in fields:
            lost.append(
                Lost(f"{FORMAT_FIELDS}.{key}", f"a field of the {tool.format} file: {host} has no place for it")
            )
    return kept


def report_rest(meta: dict[str, Any], lost: list[Lost], generated: tuple[str, ...], tool: Tool) -> None:
    """Report every key left in ``meta`` as lost (the annotations adapters generate excepted)."""
    from .hosttools import RULES

    adapter_keys = {FORMAT_FIELDS, HOST_TOOLS, RULES, "prompty"}
    for key, value in meta.items():
        if key == "$static" and isinstance(value, list) and set(value) <= adapter_keys:
            continue
        if key == "$order" and isinstance(value, Mapping) and set(value) <= {"prompty"}:
            continue
        if key == HOST_TOOLS:
            lost.append(Lost(key, f"host tools {', '.join(map(str, value))} have no place in this format"))
        elif key.startswith("$"):
            lost.append(Lost(key, "a toolcascade annotation: the cascade is toolcascade's own"))
        elif key == "tools":
            lost.append(Lost(key, "this format cannot offer tools to the model"))
        else:
            lost.append(Lost(key, "toolcascade metadata (middleware or data): no equivalent in this format"))
