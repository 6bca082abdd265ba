"""Jinja2 rendering for metadata strings and prompts, in a sandbox.

Only the author's text is ever a template: values from args, ``$context`` or
any caller are passed in as variables and never rendered themselves
(R-CAS-4). The environment is jinja2's immutable sandbox with
``StrictUndefined``; compiled templates are cached by source.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import InterpolationError, SecurityError

if TYPE_CHECKING:
    from .context import Context

_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


def is_template(text: str) -> bool:
    """True when ``text`` contains jinja2 syntax worth rendering."""
    return "{{" in text or "{%" in text


def has_templates(value: Any) -> bool:
    """True when any string inside ``value`` (recursively) is a template."""
    if isinstance(value, str):
        return is_template(value)
    if isinstance(value, Mapping):
        return any(has_templates(v) for v in value.values())
    if isinstance(value, list):
        return any(has_templates(v) for v in value)
    return False


@lru_cache(maxsize=2048)
def compile_template(source: str) -> jinja2.Template:
    """Compile ``source`` once; later calls return the cached template.

    Raises:
        jinja2.TemplateSyntaxError: left to ``render`` to wrap with context.
    """
    return _ENV.from_string(source)


def render(source: str, variables: Mapping[str, Any], **where: Any) -> str:
    """Render one template string; ``where`` (tool, level, key, path, line) names the place in errors.

    Raises:
        SecurityError: the template touched something the sandbox forbids.
        InterpolationError: a syntax error, an undefined name, or a failing expression.
    """
    try:
        return compile_template(source).render(variables)
    except jinja2.exceptions.SecurityError as exc:
        raise SecurityError(f"template refused by the sandbox: {exc}", **where) from exc
    except jinja2.TemplateSyntaxError as exc:
        raise InterpolationError(f"template syntax error: {exc.message}", **where) from exc
    except jinja2.UndefinedError as exc:
        raise InterpolationError(f"template uses an undefined value: {exc.message}", **where) from exc
    except Exception as exc:  # any failure inside the author's expression
        raise InterpolationError(f"template failed: {type(exc).__name__}: {exc}", **where) from exc


def render_value(value: Any, variables: Mapping[str, Any], where: Callable[[], dict[str, Any]]) -> Any:
    """Render every template string inside ``value``, building new containers (inputs stay untouched)."""
    if isinstance(value, str):
        return render(value, variables, **where()) if is_template(value) else value
    if isinstance(value, Mapping):
        return {k: render_value(v, variables, where) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, variables, where) for v in value]
    return value


def scope(ctx: Context, meta: Mapping[str, Any]) -> dict[str, Any]:
    """Template variables for ``ctx`` (R-CAS-3); ``meta`` is what the levels below merged.

    ``env`` holds the environment only when the tool's trust allows it.
    """
    tool = ctx.tool
    return {
        "args": ctx.args,
        "meta": meta,
        "tool": {"name": tool.name, "uri": tool.uri, "description": tool.description},
        "locals": ctx.locals,
        "cwd": str(ctx.cwd),
        "env": dict(os.environ) if ctx.trust.get("env") else {},
    }
