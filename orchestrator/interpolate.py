"""Jinja2 rendering for metadata strings and prompts, in a bounded sandbox.

Only the author's text is ever a template: values from args, ``$context`` or
any caller are passed in as variables and never rendered themselves
(R-CAS-4). Templates render in ``orchestrator.sandbox``: jinja2's immutable
sandbox with ``StrictUndefined``, under a per-render budget taken from the
manager's ``Limits`` (output, loop iterations and calls, value sizes, time);
compiled templates are cached by source and shared by every manager. A
refusal is an ``InterpolationError`` naming the limit and its value.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jinja2

from .errors import InterpolationError, SecurityError
from .limits import Limits
from .sandbox import ENVIRONMENT, ClosedEnv, EnvClosedError, Refused

if TYPE_CHECKING:
    from .context import Context


# -- public API ------------------------------------------------------------------


class Scope(dict):  # type: ignore[type-arg]
    """Template variables (a plain dict to jinja2) carrying the limits their renders run under."""

    __slots__ = ("limits",)

    def __init__(self, variables: Mapping[str, Any], limits: Limits) -> None:
        super().__init__(variables)
        self.limits = limits


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
    """Compile ``source`` once; later calls return the cached template (limits apply when it renders).

    Raises:
        jinja2.TemplateSyntaxError: left to ``render`` to wrap with context.
    """
    return ENVIRONMENT.from_string(source)


def render(source: str, variables: Mapping[str, Any], **where: Any) -> str:
    """Render one template string; ``where`` (tool, level, key, path, line) names the place in errors.

    The limits are ``variables.limits`` when it has them (``scope`` gives
    the manager's), else ``DEFAULT_LIMITS``.

    Raises:
        SecurityError: the template touched something the sandbox forbids.
        InterpolationError: a syntax error, an undefined name, a failing
            expression, or a render over one of its limits.
    """
    try:
        return compile_template(source).render(variables)
    except Refused as exc:
        raise InterpolationError(str(exc), **where) from None
    except jinja2.exceptions.SecurityError as exc:
        raise SecurityError(f"template refused by the sandbox: {exc}", **where) from exc
    except jinja2.TemplateSyntaxError as exc:
        raise InterpolationError(f"template syntax error: {exc.message}", **where) from exc
    except EnvClosedError as exc:
        raise InterpolationError(str(exc.message), **where) from exc
    except jinja2.UndefinedError as exc:
        raise InterpolationError(f"template uses an undefined value: {exc.message}", **where) from exc
    except Exception as exc:  # any failure inside the author's expression
        raise InterpolationError(f"template failed: {type(exc).__name__}: {exc}", **where) from exc


def render_value(value: Any, variables: Mapping[str, Any], where: Callable[[], dict[str, Any]]) -> Any:
    """Render every template string inside ``value``, building new containers (inputs stay untouched).

    Raises:
        SecurityError, InterpolationError: as ``render``.
    """
    if isinstance(value, str):
        return render(value, variables, **where()) if is_template(value) else value
    if isinstance(value, Mapping):
        return {k: render_value(v, variables, where) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, variables, where) for v in value]
    return value


def scope(ctx: Context, meta: Mapping[str, Any]) -> Scope:
    """Template variables for ``ctx`` (R-CAS-3); ``meta`` is what the levels below merged.

    ``env`` holds the environment only when the tool's trust allows it;
    otherwise it is empty and reading a name from it says why. The result
    carries the manager's ``Limits`` for ``render``.
    """
    tool = ctx.tool
    env: dict[str, str]
    if ctx.trust.get("env"):
        env = dict(os.environ)
    elif tool.trusted:
        env = ClosedEnv("env is empty: this tool has no trust: {env: true}")
    else:
        env = ClosedEnv("env is empty: tools from untrusted folders never see env, whatever their trust says")
    variables = {
        "args": ctx.args,
        "meta": meta,
        "tool": {"name": tool.name, "uri": tool.uri, "description": tool.description},
        "locals": ctx.locals,
        "cwd": str(ctx.cwd),
        "env": env,
    }
    return Scope(variables, ctx._manager.limits)
