"""Jinja2 rendering for metadata strings and prompts, in a bounded sandbox.

Only the author's text is ever a template: values from args, ``$context`` or
any caller are passed in as variables and never rendered themselves
(R-CAS-4). Templates render in ``orchestrator.sandbox``: jinja2's immutable
sandbox with ``StrictUndefined``, under a per-render budget taken from the
manager's ``Limits`` (output, loop iterations and calls, value sizes, time);
compiled templates are cached by source and shared by every manager. A
refusal is an ``InterpolationError`` naming the limit and its value.
``{% include %}`` and ``{% import %}`` find partials through the ``Scope``
(``orchestrator.partials``).

jinja2 (and the sandbox built on it) is imported by the first render, not by
``import orchestrator``: a run without templates never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .errors import InterpolationError, OrchestratorError, SecurityError
from .frozen import answer_by_identity
from .limits import Limits

if TYPE_CHECKING:
    import jinja2

    from .context import Context
    from .partials import Roots
    from .searchpath import SearchPath
    from .tool import Tool


# -- public API ------------------------------------------------------------------


class Scope(dict):  # type: ignore[type-arg]
    """Template variables (a plain dict to jinja2) carrying the limits their renders run under.

    ``scope`` makes them (without a Python ``__init__``: every render of a
    call's metadata and prompt pays for one). ``tool`` and ``paths`` say where
    the render's partials are found (``partial_roots``, worked out at the
    first include only). ``placing`` is the context whose prompt this render
    places media for (``render_prompt`` sets it; ``orchestrator.placing``),
    None for any other render; ``refused`` the error ``media(...)`` raised in it.
    """

    __slots__ = ("limits", "tool", "paths", "placing", "refused", "_roots")

    limits: Limits
    tool: Tool | None
    paths: tuple[SearchPath, ...]
    placing: Context | None
    refused: Exception | None
    _roots: Roots | None

    def partial_roots(self) -> Roots:
        """The folders this render's ``{% include %}`` and ``{% import %}`` look in (``orchestrator.partials``)."""
        roots = self._roots
        if roots is None:
            from .partials import roots_of

            roots = self._roots = roots_of(self.tool, self.paths)
        return roots


def is_template(text: str) -> bool:
    """True when ``text`` contains jinja2 syntax worth rendering."""
    return "{{" in text or "{%" in text


def has_templates(value: Any) -> bool:
    """True when any string inside ``value`` (recursively) is a template.

    Asked of every metadata value a plan or a check reads (hundreds of
    thousands over a catalog): dicts and lists (frozen ones are subclasses)
    and scalars are told apart by C-level checks before the abstract
    ``Mapping`` one, and the containers are walked without generators.
    """
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        if value is None or type(value) in _SCALARS or not isinstance(value, Mapping):
            return False
        value = value.values()
    for item in value:
        if has_templates(item):
            return True
    return False


_SCALARS = frozenset({bool, int, float})
"""Types that hold no string: ``has_templates`` answers them without the abstract ``Mapping`` check."""

_FROZEN_TEMPLATES: dict[int, tuple[Any, bool]] = {}  # id(a frozen mapping or list) -> (it, has_templates(it))


def has_templates_frozen(value: Any) -> bool:
    """``has_templates(value)``, remembered by identity for a frozen mapping or list (``frozen.answer_by_identity``).

    An authority's values are shared by every tool under it, and equal ones
    read from the cache folder by every tool that holds them, so planning
    and checking a catalog walk each once.
    """
    return answer_by_identity(_FROZEN_TEMPLATES, value, has_templates)  # type: ignore[no-any-return]


class ClosedEnv(dict):  # type: ignore[type-arg]
    """``env`` for a tool whose trust does not allow it: empty, and saying why when a template reads it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


@lru_cache(maxsize=2048)
def compile_template(source: str) -> jinja2.Template:
    """Compile ``source`` once; later calls return the cached template (limits apply when it renders).

    Raises:
        jinja2.TemplateSyntaxError: left to ``render`` to wrap with context.
    """
    from .sandbox import ENVIRONMENT  # jinja2 on the first template only

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
    except Exception as exc:
        from .sandbox import Refused  # loaded: the template that failed was compiled by it

        # A refusal's message says it all; any other error keeps what jinja2 said as its cause.
        raise _refusal(exc, where) from (None if isinstance(exc, Refused) else exc)


def _refusal(exc: Exception, where: dict[str, Any]) -> OrchestratorError:
    """The typed error ``render`` raises for ``exc``, an error from compiling or rendering a template."""
    import jinja2

    from .sandbox import EnvClosedError, Refused

    if isinstance(exc, Refused):
        return InterpolationError(str(exc), **where)
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return SecurityError(f"template refused by the sandbox: {exc}", **where)
    if isinstance(exc, jinja2.TemplateSyntaxError):
        if exc.filename:  # in a partial (orchestrator.partials): its own file and line
            where = {**where, "path": exc.filename, "line": exc.lineno}
        return InterpolationError(f"template syntax error: {exc.message}", **where)
    if isinstance(exc, jinja2.TemplateNotFound):
        return InterpolationError(str(exc.message), **where)  # a partial: where it was looked for, what was meant
    if isinstance(exc, EnvClosedError):
        return InterpolationError(str(exc.message), **where)
    if isinstance(exc, jinja2.UndefinedError):
        return InterpolationError(f"template uses an undefined value: {exc.message}", **where)
    return InterpolationError(f"template failed: {type(exc).__name__}: {exc}", **where)  # the author's expression


def render_value(value: Any, variables: Mapping[str, Any], where: Callable[[], dict[str, Any]]) -> Any:
    """Render every template string inside ``value``; a part without one is returned as it is.

    Containers holding a template are rebuilt (inputs stay untouched); an
    untemplated value keeps its identity, so a ``params`` schema next to a
    templated key stays the same object from call to call (its compiled
    validator is found by identity).

    Raises:
        SecurityError, InterpolationError: as ``render``.
    """
    if isinstance(value, str):
        return render(value, variables, **where()) if is_template(value) else value
    if isinstance(value, Mapping):
        if not has_templates(value):
            return value
        return {k: render_value(v, variables, where) for k, v in value.items()}
    if isinstance(value, list):
        if not has_templates(value):
            return value
        return [render_value(v, variables, where) for v in value]
    return value


_OWN: Any = object()  # scope()'s args: the context's own
# The closed ``env`` of a tool without env trust: one of each, shared by every render (templates cannot change a
# mapping in the immutable sandbox, and nothing else writes to them).
_NO_TRUST = ClosedEnv("env is empty: this tool has no trust: {env: true}")
_UNTRUSTED = ClosedEnv("env is empty: tools from untrusted folders never see env, whatever their trust says")


def scope(ctx: Context, meta: Mapping[str, Any], args: Any = _OWN) -> Scope:
    """Template variables for ``ctx`` (R-CAS-3); ``meta`` is what the levels below merged.

    ``args`` are ``ctx.args`` unless given (metadata renders with the
    defaults of ``params`` filled in, before the middleware that fills them).

    ``env`` holds the environment only when the tool's trust allows it;
    otherwise it is empty and reading a name from it says why. The result
    carries the manager's ``Limits`` for ``render``.
    """
    tool = ctx.tool
    env: dict[str, str]
    if ctx.trust.get("env"):
        env = dict(os.environ)
    else:
        env = _NO_TRUST if tool.trusted else _UNTRUSTED
    found = Scope(
        args=ctx.args if args is _OWN else args,
        meta=meta,
        tool={"name": tool.name, "uri": tool.uri, "description": tool.description},
        locals=ctx.locals,
        cwd=str(ctx.cwd),
        env=env,
    )
    found.limits = ctx.owner.limits
    found.tool = tool
    found.paths = ctx.paths
    found.placing = found.refused = found._roots = None
    return found
