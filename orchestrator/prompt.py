"""A markdown tool's prompt: directives out, template rendered, directive outputs in (R-DIR-1, R-DIR-2).

Directives are found in the author's source only. Each directive that names
a tool is replaced by a placeholder before the prompt is rendered; after
rendering, placeholders are swapped for the directive tools' outputs. So
nothing that comes from args, a directive tool or any other output is ever
parsed for directives or rendered as a template: the safety is structural,
not an escaping scheme.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .chain import SKIPPED
from .directives import Directive, find_directives
from .interpolate import is_template, render, render_value, scope
from .ordering import Entry

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

    Raises:
        InterpolationError, SecurityError: the template failed or broke the sandbox.
    """
    prompt = ctx.locals.get("prompt")
    if not isinstance(prompt, str):
        return prompt
    tool = ctx.tool
    text = prompt
    if is_template(prompt):
        text = render(
            prompt, scope(ctx, ctx.meta), tool=tool.name, level="prompt", path=tool.path, line=tool.prompt_line
        )
    outputs = ctx.locals.get("directives")
    if outputs:
        text = _PLACEHOLDER.sub(lambda m: outputs.get(int(m.group(1)), ""), text)
    return text


def directive_entries(target: Context) -> list[Entry]:
    """Prepare ``target``'s prompt for its directives and return one chain entry per directive tool.

    Sets ``target.locals['prompt']`` to the source with placeholders and
    ``target.locals['directives']`` to each directive's current text (its
    source, until its tool returns).

    Raises:
        InterpolationError: a label or attribute template failed.
    """
    source = target.tool.prompt
    if not isinstance(source, str) or ":" not in source:
        return []
    found = find_directives(source)
    if not found:
        return []
    registry = target._manager.registry
    names = frozenset(d.name for d in found if registry.exists(d.name, target.paths, target.run.checked))
    if not names:
        return []
    target.locals["prompt"] = with_placeholders(source, names)
    outputs = {i: source[d.start : d.end] for i, d in enumerate(found) if d.name in names}
    target.locals["directives"] = outputs
    variables: Mapping[str, Any] | None = None
    entries = []
    for index, directive in enumerate(found):
        if directive.name not in names:
            continue
        args: dict[str, Any] = {
            "name": directive.name,
            "label": directive.label,
            "attributes": dict(directive.attributes),
            "content": directive.content,
            "index": index,
        }
        if any(
            isinstance(v, str) and is_template(v)
            for v in (directive.label, directive.content, *directive.attributes.values())
        ):
            variables = variables if variables is not None else scope(target, target.meta)
            args = render_value(args, variables, _where(target, directive))
        entries.append(Entry(directive.name, args, fn=_runner(directive.name, index)))
    return entries


def _where(target: Context, directive: Directive) -> Callable[[], dict[str, Any]]:
    tool = target.tool
    line = tool.prompt_line + directive.line - 1
    return lambda: {"tool": tool.name, "level": f"directive :{directive.name}", "path": tool.path, "line": line}


def _runner(name: str, index: int) -> Callable[[Context, Any], Any]:
    async def run(ctx: Context, args: Any) -> Any:
        # A full invocation of the directive tool, checked for invocation cycles like any chain entry.
        value = await ctx._manager._invoke_entry(ctx, Entry(name, args))
        if value is not SKIPPED:
            ctx.locals["directives"][index] = "" if value is None else str(value)
        return await ctx.manager.next()

    return run
