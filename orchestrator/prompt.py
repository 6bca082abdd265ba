"""A markdown tool's prompt: directives out, template rendered, directive outputs in (R-DIR-1, R-DIR-2).

Directives are found in the author's source only. Each directive that names
a tool is replaced by a placeholder before the prompt is rendered; after
rendering, placeholders are swapped for the directive tools' outputs. So
nothing that comes from args, a directive tool or any other output is ever
parsed for directives or rendered as a template: the safety is structural,
not an escaping scheme.

Decisions (each tested):

- The author's source is ``ctx.tool.prompt``, the value the engine puts in
  ``locals['prompt']``. When a middleware that ran earlier replaced
  ``locals['prompt']``, directives are not expanded: that text is left as it
  is and never parsed for directives (it may come from args).
- A directive runs only when its placeholder survives a render of the prompt
  made before any directive tool runs: one in a false ``{% if %}`` branch or
  in a loop over nothing does not run. Whether a directive runs is decided
  there, once; a directive tool that sets locals changes the text the final
  render shows, not which directives run. If that first render fails (most
  often because the prompt reads a local that a directive tool sets), every
  directive runs, as when the prompt has no template, and the render after
  them decides what is shown.
- The prompt is rendered again after the directive tools ran. A placeholder
  it shows whose directive did not run becomes nothing, like a directive
  whose tool returned None.
- Prompts without directives naming tools, or without template syntax, are
  rendered once.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from .chain import SKIPPED
from .directives import Directive, find_directives
from .errors import InterpolationError
from .frozen import freeze
from .interpolate import is_template, render, render_value, scope
from .ordering import Entry
from .placing import KEY as MEDIA
from .placing import Pieces, placed_pieces, shown

if TYPE_CHECKING:
    from .context import Context

# Placeholders carry a per-process secret, so text from args cannot forge one.
_NONCE = secrets.token_hex(8)
_PLACEHOLDER = re.compile("\x02" + _NONCE + r":(\d+)\x03")


def placeholder(index: int) -> str:
    """The placeholder that stands for directive ``index`` in a rendered prompt."""
    return f"\x02{_NONCE}:{index}\x03"


@lru_cache(maxsize=512)
def with_placeholders(source: str, names: frozenset[str]) -> str:
    """``source`` with every directive whose name is in ``names`` replaced by its placeholder."""
    parts = []
    position = 0
    for index, directive in enumerate(find_directives(source)):
        if directive.name in names:
            parts.append(source[position : directive.start])
            parts.append(placeholder(index))
            position = directive.end
    parts.append(source[position:])
    return "".join(parts)


def render_prompt(ctx: Context) -> Any:
    """Render ``ctx.locals['prompt']`` and put directive outputs in place of their placeholders.

    Only the author's prompt (as written, or with directive placeholders) is
    rendered; a prompt a middleware set instead is used as it is. Placeholders
    of directives that did not run become nothing. A prompt that placed media
    (``{{ media(...) }}``, ``orchestrator.placing``) keeps their placeholders
    for its agent (``agent.media.prompt_content`` cuts the text there); without
    a model its result is its pieces, text and media parts in order.

    Raises:
        InterpolationError, SecurityError: the template failed, broke the sandbox or went over a render limit.
        ConfigurationError: ``media(...)`` was given no media, or media of another kind.
    """
    prompt = ctx.locals.get("prompt")
    if not isinstance(prompt, str):
        return prompt
    tool = ctx.tool
    text = prompt
    # Only the author's text is a template (R-CAS-4, R-DIR-2): a prompt a middleware put in its place may
    # hold args or tool output, so it is used as it is. Placeholders carry a secret: only directives make them.
    authored = prompt == tool.prompt or _PLACEHOLDER.search(prompt) is not None
    if authored and is_template(prompt):
        variables = scope(ctx, ctx.meta)
        variables.placing = ctx  # media(...) places parts for this context (orchestrator.placing)
        try:
            text = render(prompt, variables, tool=tool.name, level="prompt", path=tool.path, line=tool.prompt_line)
        except InterpolationError as exc:
            refused = variables.refused
            if refused is not None and exc.__cause__ is refused:
                raise refused from None  # media(...) refused its value: its own error names the tool
            hint = _misspelt(ctx.meta) if "undefined" in exc.detail else None
            if hint is None:
                raise
            raise InterpolationError(
                f"{exc.detail}; {hint}", tool=tool.name, level="prompt", path=tool.path, line=tool.prompt_line
            ) from exc
    outputs = ctx.locals.get("directives")
    if outputs:
        text = _PLACEHOLDER.sub(lambda m: outputs.get(int(m.group(1)), ""), text)  # one pass: outputs go in as they are
    if MEDIA in ctx.locals:
        return _with_media(ctx, text)
    return text


def _with_media(ctx: Context, text: str) -> Any:
    """A prompt that placed media: the text with its placeholders for an agent (``agent.media.prompt_content``
    cuts it), or, for a template (no model), its pieces: text and media parts, the template's result."""
    pieces = placed_pieces(ctx, text)
    if pieces is None or ctx.locals.get("model") is not None or ctx.meta.get("model"):
        return text  # a model answers this prompt (agent-execute's condition)
    return Pieces(pieces)


def shown_prompt(ctx: Context) -> str:
    """The prompt as ``show`` and ``Manager.explain`` print it: ``render_prompt``'s, each media part it places
    written as ``[image: photo.png, image/png, 12 KB]`` (``placing.described_part``), never its data.

    Raises:
        As ``render_prompt``.
    """
    value = render_prompt(ctx)
    return shown(ctx, value) if isinstance(value, str) else str(value)  # Pieces describe their parts


# Metadata keys whose absence leaves args or meta without what a template expects.
_CONFIGURING = ("params", "returns", "model", "tools", "system")


def _misspelt(meta: Mapping[str, Any]) -> str | None:
    """``'paramz' is not a tool; did you mean 'params'?`` when a metadata key misses one of those by an edit."""
    from .typos import one_edit_apart  # only when a template already failed

    for key in meta:
        for name in _CONFIGURING:
            if name not in meta and one_edit_apart(str(key), name):
                return f"metadata key {key!r} is data, not {name!r}: did you mean {name!r}?"
    return None


def directive_entries(target: Context) -> list[Entry]:
    """Prepare ``target``'s prompt for its directives and return one chain entry per directive tool to run.

    Sets ``target.locals['prompt']`` to the source with placeholders and
    ``target.locals['directives']`` to each running directive's current text
    (its source, until its tool returns). Does nothing when an earlier
    middleware replaced ``locals['prompt']``.

    An entry's args ``{name, label, attributes, content, index}`` are a value
    of the author's source, read-only as a metadata middleware's are
    (``orchestrator.frozen``): the entries of directives without templates are
    made once per prompt and reused by every call.

    Raises:
        InterpolationError: a label or attribute template failed.
        SecurityError: the prompt touched something the sandbox forbids.
    """
    source = target.tool.prompt
    if not isinstance(source, str) or ":" not in source:
        return []
    prompt = target.locals.get("prompt")
    own = prompt is source or prompt == source
    # Our own placeholder text is there again when a retry rewound the chain to before this middleware.
    if not own and not (isinstance(prompt, str) and "\x02" in prompt):
        return []
    exists, paths, checked = target.owner.registry.exists, target.paths, target.run.checked
    every = _names(source)
    tools = [name for name in every if exists(name, paths, checked)]
    if not tools:
        return []
    names = every if len(tools) == len(every) else frozenset(tools)
    layout = _layout(source, names)
    if not own and prompt != layout.expanded:
        return []
    target.locals["prompt"] = layout.expanded
    if not layout.blocks and not layout.templated:  # the common prompt: every directive runs, as written
        target.locals["directives"] = dict(layout.texts)
        return list(layout.entries.values())
    shown = _shown(target, layout.expanded) if layout.blocks else None
    running = [i for i in layout.candidates if shown is None or i in shown]
    target.locals["directives"] = {i: layout.texts[i] for i in running}
    variables: Mapping[str, Any] | None = None
    entries = []
    for index in running:
        entry = layout.entries[index]
        if index in layout.templated:
            variables = variables if variables is not None else scope(target, target.meta)
            args = render_value(entry.args, variables, _where(target, find_directives(source)[index]))
            entry = Entry(entry.name, args, fn=entry.fn)
        entries.append(entry)
    return entries


@lru_cache(maxsize=512)
def _names(source: str) -> frozenset[str]:
    """The names ``source``'s directives use (empty without directives)."""
    return frozenset(directive.name for directive in find_directives(source))


class _Layout(NamedTuple):
    """What a prompt's directives make of it, for one set of directive names that name tools."""

    expanded: str  # the source with those directives' placeholders
    blocks: bool  # a template block or comment that may hide a placeholder: rendered first to see
    candidates: tuple[int, ...]  # the indices of those directives, in document order
    texts: dict[int, str]  # each one's source text, shown until its tool returns
    templated: frozenset[int]  # those whose label, content or an attribute is a template
    entries: dict[int, Entry]  # each candidate's chain entry, its args as written (read-only)


@lru_cache(maxsize=512)
def _layout(source: str, names: frozenset[str]) -> _Layout:
    """The directive layout of ``source``: computed once per prompt text and set of tool names, not per call."""
    found = find_directives(source)
    expanded = with_placeholders(source, names)
    candidates = tuple(i for i, d in enumerate(found) if d.name in names)
    templated = frozenset(
        i
        for i in candidates
        if any(
            isinstance(v, str) and is_template(v)
            for v in (found[i].label, found[i].content, *found[i].attributes.values())
        )
    )
    entries = {
        i: Entry(
            found[i].name,
            freeze(
                {
                    "name": found[i].name,
                    "label": found[i].label,
                    "attributes": dict(found[i].attributes),
                    "content": found[i].content,
                    "index": i,
                }
            ),
            fn=_runner(found[i].name, i),
        )
        for i in candidates
    }
    return _Layout(
        expanded,
        is_template(expanded) and ("{%" in expanded or "{#" in expanded),
        candidates,
        {i: source[found[i].start : found[i].end] for i in candidates},
        templated,
        entries,
    )


def _shown(target: Context, expanded: str) -> frozenset[int] | None:
    """Indices of the placeholders a render of ``expanded`` shows now; None when that render fails.

    Asked only when ``expanded`` has a block or comment (``_Layout.blocks``): without one, every
    placeholder shows and no render is needed.

    Raises:
        SecurityError: the prompt touched something the sandbox forbids.
    """
    tool = target.tool
    try:
        text = render(
            expanded, scope(target, target.meta), tool=tool.name, level="prompt", path=tool.path, line=tool.prompt_line
        )
    except InterpolationError:
        return None  # it may read what a directive tool sets: run them all, the final render decides
    return frozenset(int(match.group(1)) for match in _PLACEHOLDER.finditer(text))


def _where(target: Context, directive: Directive) -> Callable[[], dict[str, Any]]:
    tool = target.tool
    line = tool.prompt_line + directive.line - 1
    return lambda: {"tool": tool.name, "level": f"directive :{directive.name}", "path": tool.path, "line": line}


@lru_cache(maxsize=1024)
def _runner(name: str, index: int) -> Callable[[Context, Any], Any]:
    """The entry function of directive ``index`` naming ``name``: one per pair, so the runner's async check is cached."""

    async def run(ctx: Context, args: Any) -> Any:
        # A full invocation of the directive tool, checked for invocation cycles like any chain entry.
        value = await ctx.manager.invoke_entry(name, args)
        if value is not SKIPPED:
            ctx.locals["directives"][index] = "" if value is None else str(value)
        return await ctx.manager.next()

    return run
