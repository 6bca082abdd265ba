"""Prompty's lenient rendering, within our strict sandbox: a missing attribute or key renders empty.

Prompty renders with jinja2's default ``Undefined``: ``{{ item.nickname }}``
on an item without one prints nothing, ``{% if item.nickname %}`` is false
and a loop over it runs no time. Our sandbox is strict (``StrictUndefined``)
for every tool, and it stays so; a Prompty file's sections are rewritten
instead, once, when the file is loaded: every attribute or subscript chain
(``item.nickname``, ``user['profile'].city``) reads as ``(chain |
default(''))``. What stays an error is what is one in Prompty too: an
attribute of something missing (``missing.attr``, ``item.nickname.first``
when ``nickname`` is missing).

Left as written: chains the author tests (``x.y is defined``), gives a
default (``x.y | default('-')``) or calls (``x.items()``), and the targets
of ``set`` and ``for``. Only ``{{ }}`` and the expressions of ``if``,
``elif``, ``for ... in`` and ``set ... =`` are rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .adaptation import MIDDLEWARE
from .history import Piece, marked, source_text, split
from .mustache import render_mustache

if TYPE_CHECKING:
    from ..context import Context

NOTE = (
    "rendered leniently, as Prompty does: a missing attribute or key renders empty and input types are "
    "described, not enforced (our own .md tools stay strict)"
)
"""What ``show`` and ``check`` say about every Prompty file (``leniency_note``)."""

_KEYWORDS = frozenset(
    ("in", "is", "and", "or", "not", "if", "else", "true", "false", "none", "True", "False", "None", "recursive")
)
_REWRITTEN = {"if": None, "elif": None, "for": "in", "set": "="}  # statement -> the token after which to rewrite

Token = tuple[int, str, str]

_WRAPPED = re.compile(r"\(([^()]*)\|default\(''\)\)")


def lenient(source: str) -> str:
    """``source`` (a jinja2 template that parses) with every attribute or subscript chain made lenient."""
    if "{{" not in source and "{%" not in source:
        return source
    from ..sandbox import ENVIRONMENT

    tokens: list[Token] = list(ENVIRONMENT.lexer.tokeniter(source, None))
    out: list[str] = []
    index = 0
    while index < len(tokens):
        kind, value = tokens[index][1], tokens[index][2]
        if kind not in ("variable_begin", "block_begin"):
            out.append(value)
            index += 1
            continue
        end = "variable_end" if kind == "variable_begin" else "block_end"
        close = index + 1
        while close < len(tokens) and tokens[close][1] != end:
            close += 1
        inner = tokens[index + 1 : close]
        out.append(value)
        out.append(_statement(inner) if kind == "block_begin" else _expression(inner))
        if close < len(tokens):
            out.append(tokens[close][2])
        index = close + 1
    return "".join(out)


def _statement(tokens: list[Token]) -> str:
    """A block's tokens, its expression part rewritten for ``if``, ``elif``, ``for ... in`` and ``set ... =``."""
    words = [i for i, token in enumerate(tokens) if token[1] != "whitespace"]
    if not words or tokens[words[0]][1] != "name" or tokens[words[0]][2] not in _REWRITTEN:
        return "".join(token[2] for token in tokens)
    after = _REWRITTEN[tokens[words[0]][2]]
    start = words[0] + 1
    if after is not None:
        found = next((i for i in words[1:] if tokens[i][2] == after), None)
        if found is None:
            return "".join(token[2] for token in tokens)  # a block ``set``: nothing to rewrite
        start = found + 1
    return "".join(token[2] for token in tokens[:start]) + _expression(tokens[start:])


def _expression(tokens: list[Token]) -> str:
    out: list[str] = []
    index = 0
    previous = ""
    while index < len(tokens):
        kind, value = tokens[index][1], tokens[index][2]
        starts = kind == "name" and value not in _KEYWORDS and previous not in (".", "|")
        end = _chain_end(tokens, index) if starts else index + 1
        if end == index + 1:
            out.append(value)
            if kind != "whitespace":
                previous = value
            index += 1
            continue
        chain = value + _segments(tokens[index + 1 : end])
        following = _next_words(tokens, end)
        if following[:1] in (["("], ["is"]) or following[:2] in (["|", "default"], ["|", "d"]):
            out.append(chain)
        else:
            out.append(f"({chain}|default(''))")
        previous = "]"
        index = end
    return "".join(out)


def _chain_end(tokens: list[Token], start: int) -> int:
    """The index just past the ``.name`` and ``[...]`` segments following the name at ``start``."""
    index = start + 1
    while index < len(tokens):
        value = tokens[index][2]
        if value == "." and index + 1 < len(tokens) and tokens[index + 1][1] == "name":
            index += 2
        elif value == "[" and tokens[index][1] == "operator":
            depth = 0
            while index < len(tokens):
                depth += {"[": 1, "]": -1}.get(tokens[index][2], 0) if tokens[index][1] == "operator" else 0
                index += 1
                if depth == 0:
                    break
        else:
            break
    return index


def _segments(tokens: list[Token]) -> str:
    """A chain's segments, the expressions inside its subscripts made lenient too."""
    out: list[str] = []
    index = 0
    while index < len(tokens):
        value = tokens[index][2]
        if value == "[" and tokens[index][1] == "operator":
            depth, close = 0, index
            for close in range(index, len(tokens)):
                if tokens[close][1] == "operator":
                    depth += {"[": 1, "]": -1}.get(tokens[close][2], 0)
                if depth == 0:
                    break
            out.append("[" + _expression(tokens[index + 1 : close]) + "]")
            index = close + 1
        else:
            out.append(value)
            index += 1
    return "".join(out)


def _next_words(tokens: list[Token], start: int) -> list[str]:
    return [token[2] for token in tokens[start:] if token[1] != "whitespace"][:2]


def strict(text: str) -> str:
    """A section ``lenient`` rewrote as its author wrote it (for ``show`` and ``export``)."""
    while True:
        undone = _WRAPPED.sub(lambda m: m.group(1), text)
        if undone == text:
            return text
        text = undone


def leniency_note(metadata: Any) -> str | None:
    """The leniency note for a tool whose metadata came from the Prompty adapter, else None."""
    fields = metadata.get("prompty") if hasattr(metadata, "get") else None
    return NOTE if fields is not None else None


# -- the prompty middleware's work -------------------------------------------------

DESCRIBING = ("description", "default", "examples", "title")
"""What a Prompty input's schema keeps when the call is checked: types describe, they do not reject."""


def described(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as Prompty checks a call: required inputs only, every type, enum and format left out."""
    properties = params.get("properties")
    loose: dict[str, Any] = {"type": "object"}
    if isinstance(properties, Mapping):
        loose["properties"] = {
            name: {k: v for k, v in spec.items() if k in DESCRIBING} if isinstance(spec, Mapping) else {}
            for name, spec in properties.items()
        }
    if isinstance(params.get("required"), list | tuple):
        loose["required"] = list(params["required"])
    return loose


async def prepare(ctx: Context) -> Any:
    """The ``prompty`` middleware: Prompty's leniency and rendering around the target's own pipeline.

    Before ``validate-args``: the target's ``params`` keep their required
    inputs and descriptions, not their types (Prompty does not check them).
    Right after ``validate-args`` (an injected step): mustache sections are
    rendered by chevron, and role lines a template wrote, or a thread input
    it placed, become messages (``orchestrator.formats.history``). Without a
    model, a chat prompty's result is its message list: ``[{role, content}, ...]``.

    Raises:
        ConfigurationError: chevron is missing for a mustache file.
        InterpolationError: a template failed, went over ``Limits.render_output``, or a chat history that
            is not a list of ``{role: user|assistant, content}``.
    """
    from ..agent import model_spec
    from ..ordering import Entry

    target = ctx.target
    settings = dict(ctx.args) if isinstance(ctx.args, Mapping) else {}
    params = target.meta.get("params")
    if isinstance(params, Mapping):
        target.meta["params"] = described(params)
    after, before = ("validate-args",), ("directives", "$pre-execute")
    target.manager.inject([Entry(f"{MIDDLEWARE}-render", settings, before, after, fn=_render)])
    result = await target.manager.next()
    if settings.get("api", "chat") != "chat" or model_spec(target) is not None or not isinstance(result, str):
        return result
    listed: list[dict[str, Any]] = []
    if target.meta.get("system"):
        listed.append({"role": "system", "content": str(target.meta["system"])})
    for message in target.meta.get("messages") or ():
        if isinstance(message, Mapping):
            listed.append({"role": str(message.get("role")), "content": str(message.get("content", ""))})
    if result or target.tool.prompt:  # a file without a user: section has no user message
        listed.append({"role": "user", "content": result})
    return listed


async def _render(target: Context, settings: Any) -> Any:
    """The step after ``validate-args``: mustache rendered, history split into messages; then the chain goes on."""
    tool = target.tool
    where = {"tool": tool.name, "path": tool.path, "line": tool.prompt_line, "level": "prompt"}
    args = target.args if isinstance(target.args, Mapping) else {}
    if isinstance(settings, Mapping) and settings.get("template") == "mustache":
        _mustache(target, args, where)
    else:
        _messages(target, args, where)
    return await target.manager.next()


def _mustache(target: Context, args: Mapping[str, Any], where: dict[str, Any]) -> None:
    from ..interpolate import render

    tool = target.tool
    limit = target.manager.limits.render_output
    if isinstance(tool.prompt, str) and tool.prompt:
        source = render(tool.prompt, {})  # the literal block gives back the mustache source
        target.locals["prompt"] = render_mustache(source, args, limit, **where)
    if isinstance(target.meta.get("system"), str):
        target.meta["system"] = render_mustache(target.meta["system"], args, limit, **{**where, "key": "system"})
    messages = target.meta.get("messages")
    if isinstance(messages, list | tuple):
        target.meta["messages"] = [
            {
                **m,
                "content": render_mustache(str(m.get("content", "")), args, limit, **{**where, "key": "messages"}),
            }
            for m in messages
            if isinstance(m, Mapping)
        ]


def _messages(target: Context, args: Mapping[str, Any], where: dict[str, Any]) -> None:
    """Cut the rendered system, messages and prompt at their history markers into separate messages."""
    from ..prompt import render_prompt

    system = target.meta.get("system")
    messages = [m for m in target.meta.get("messages") or () if isinstance(m, Mapping)]
    prompt = target.locals.get("prompt")
    # The author's sources decide (a loop over an empty history renders no marker, yet its lines go).
    own = target.tool.metadata
    sources = [own.get("system"), target.tool.prompt, *(m.get("content") for m in own.get("messages") or ())]
    if not any(isinstance(text, str) and marked(text) for text in sources):
        return
    pieces: list[Piece] = []
    if isinstance(system, str) and system:
        pieces = split("system", system, args, {**where, "key": "system"})
        first = pieces.pop(0).content if pieces and pieces[0].role == "system" else ""
        target.meta["system"] = first
    for message in messages:
        pieces += split(str(message.get("role")), str(message.get("content", "")), args, {**where, "key": "messages"})
    if isinstance(prompt, str) and marked(prompt) and prompt == target.tool.prompt:
        rendered = render_prompt(target)
        tail = split("user", str(rendered), args, where)
        last = tail.pop() if tail and tail[-1].role == "user" else None
        pieces += tail
        target.locals["prompt"] = last.content if last is not None else ""
    target.meta["messages"] = [{"role": piece.role, "content": piece.content} for piece in pieces]


def authored(text: str) -> str:
    """A Prompty section as its author wrote it: history markers and lenient reads undone (for show and export).

    The ``{% set name = args[...] %}`` binds in front stay: ``export`` strips them already.
    """
    return strict(source_text(text))
