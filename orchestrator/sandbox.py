"""The bounded jinja2 sandbox every template renders in (``interpolate`` is its public face).

The sandbox refuses resource abuse as well as attribute escapes. Every render
runs under a budget taken from ``Limits`` (the variables ``scope`` builds
carry the manager's; a plain mapping gets ``DEFAULT_LIMITS``), so compiled
templates stay independent of limits:

- ``render_output``: characters one render may produce; output is streamed
  and the render stops as soon as it passes the limit.
- ``render_loops``: loop iterations plus calls (macros, methods, ``loop()``)
  one render may run, counted across all loops, with or without output.
- ``render_value``: characters of a string, or items of a container counted
  through nested containers, that one operation may build: ``*``, ``+``,
  ``%``, ``~``, literals, filters, methods, ``range``, ``{% set %}`` blocks
  and macro bodies. Sizes are checked before anything is built where the
  size is known up front (``'x' * 10**9``, ``'x'.ljust(10**9)``).
- in all, one render may build (or measure) at most ``WORK_FACTOR`` times
  ``render_value`` characters and items, so a loop cannot rebuild a big
  value again and again.
- integers may have at most ``MAX_INT_DIGITS`` digits (CPython's default
  limit for converting one to text); ``10 ** (10 ** 8)`` is refused before
  it is computed (jinja2 reads ``10**10**8`` as ``(10**10)**8``, a small
  number).

A refusal is an ``InterpolationError`` naming the limit and its value.

Partials (``orchestrator.partials``) are loaded by ``get_template`` for the
tool whose render is running (its ``Scope``), render inside the same budget,
and nest at most ``partials.INCLUDE_DEPTH`` deep; ``{% extends %}`` and a
partial named by anything but a literal string are refused when compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import update_wrapper
from itertools import islice
from string import Formatter
from types import BuiltinMethodType, MethodType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import LoopContext, markup_join, new_context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import missing
from markupsafe import EscapeFormatter, Markup

from .budget import BUDGET, Budget, Buffer, Counted, current_budget
from .budget import MAX_INT_DIGITS as MAX_INT_DIGITS
from .budget import WORK_FACTOR as WORK_FACTOR
from .budget import Refused as Refused
from .filters import guard
from .interpolate import ClosedEnv, Scope
from .limits import DEFAULT_LIMITS
from .operations import BINOP_CHECKS, check_call, check_spec
from .partials import INCLUDE_DEPTH, Loader, Roots, resolve
from .placing import media

# The render whose includes are open, and how deep: keyed by its budget, so a new render starts at 0.
_DEPTH: ContextVar[tuple[Budget, list[int]]] = ContextVar("partial_depth")

# -- the environment -----------------------------------------------------------


class _Generator(CodeGenerator):
    """jinja2's code generator, routing loops, literals, ``~`` and block buffers through the budget."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop_iterables: set[int] = set()  # ids of the nodes a {% for %} iterates over

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        self._loop_iterables.add(id(node.iter))
        super().visit_For(node, frame)

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        # jinja2 allows no new node types, so a loop's iterable is wrapped as it is written out
        if id(node) not in self._loop_iterables:
            return super().visit(node, *args, **kwargs)
        self._loop_iterables.discard(id(node))
        self.write("environment.counted(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None

    # Partials (orchestrator.partials): named by a literal, so no argument chooses a file (R-CAS-4); each include
    # or import runs inside environment.nested(), which counts it as a call and bounds how deep they nest.

    def _partial(self, visit: Callable[[Any, Frame], None], node: Any, frame: Frame) -> None:
        template = node.template
        if not (isinstance(template, nodes.Const) and isinstance(template.value, str)):
            self.fail('a partial is named by a literal string: {% include "shared/preamble" %}', node.lineno)
        self.writeline("with environment.nested():")
        self.indent()
        visit(node, frame)
        self.outdent()

    def visit_Include(self, node: nodes.Include, frame: Frame) -> None:
        self._partial(super().visit_Include, node, frame)

    def visit_Import(self, node: nodes.Import, frame: Frame) -> None:
        self._partial(super().visit_Import, node, frame)

    def visit_FromImport(self, node: nodes.FromImport, frame: Frame) -> None:
        self._partial(super().visit_FromImport, node, frame)

    def visit_Extends(self, node: nodes.Extends, frame: Frame) -> None:
        self.fail(
            "{% extends %} is not supported: bring shared text in with {% include %} or {% import %}", node.lineno
        )

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.new_buffer()")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_values(context.eval_ctx, (")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")

    def _built(self, visit: Callable[[Any, Frame], None], node: Any, frame: Frame) -> None:
        self.write("environment.built(")
        visit(node, frame)
        self.write(")")

    def visit_List(self, node: nodes.List, frame: Frame) -> None:
        self._built(super().visit_List, node, frame)

    def visit_Dict(self, node: nodes.Dict, frame: Frame) -> None:
        self._built(super().visit_Dict, node, frame)

    def visit_Tuple(self, node: nodes.Tuple, frame: Frame) -> None:
        if node.ctx == "load":
            self._built(super().visit_Tuple, node, frame)
        else:
            super().visit_Tuple(node, frame)


class _Formatter(SandboxedFormatter):
    """``str.format`` in the sandbox, refusing widths and results past ``render_value``."""

    def __init__(self, env: jinja2.Environment, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._built = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._built = 0
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        budget = current_budget()
        check_spec(budget, format_spec)
        text = super().format_field(value, format_spec)
        self._built += len(text)
        budget.within(self._built)
        return text


class _EscapeFormatter(_Formatter, EscapeFormatter):
    """``Markup.format``: as ``_Formatter``, escaping what it inserts."""


class _Environment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every way of building a value checked against the render's budget."""

    code_generator_class = _Generator
    intercepted_binops = frozenset(BINOP_CHECKS)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        guard(self)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        budget = current_budget()
        BINOP_CHECKS[operator](budget, left, right)
        return budget.admit(self.binop_table[operator](left, right))

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = current_budget()
        budget.step()
        if isinstance(__obj, LoopContext) and args:
            args = (Counted(args[0], budget), *args[1:])  # a recursive loop's next level
        args = check_call(budget, __obj, args, kwargs)
        return budget.admit(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if not isinstance(value, (MethodType, BuiltinMethodType)) or value.__name__ not in ("format", "format_map"):
            return None
        text = value.__self__
        if not isinstance(text, str):
            return None
        formatter: Formatter
        formatter = _EscapeFormatter(self, escape=text.escape) if isinstance(text, Markup) else _Formatter(self)
        kind = type(text)
        mapping = value.__name__ == "format_map"

        def format(*args: Any, **kwargs: Any) -> str:
            if not mapping:
                return kind(formatter.vformat(text, args, kwargs))
            if kwargs or len(args) != 1:
                raise TypeError("format_map() takes exactly one positional argument")
            return kind(formatter.vformat(text, (), args[0]))

        return update_wrapper(format, value)

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """Join a block's text (``self.name()``) within ``render_value``."""
        budget = current_budget()
        taken = []
        size = 0
        for part in parts:
            size += len(part)
            budget.within(size)
            taken.append(part)
        budget.spend(size)
        return "".join(taken)

    def get_template(
        self, name: str | jinja2.Template, parent: str | None = None, globals: Any = None
    ) -> jinja2.Template:
        """Partial ``name``, found for the tool rendering now (``orchestrator.partials``) and loaded by its real path.

        A loaded partial is kept by that path and reloaded once its file changes.
        """
        if isinstance(name, jinja2.Template):
            return name
        budget = BUDGET.get()
        variables = budget.variables if budget is not None else None
        roots = variables.partial_roots() if isinstance(variables, Scope) else Roots(())
        return super().get_template(str(resolve(name, roots)), None, globals)

    # called from the generated code (see _Generator)

    @contextmanager
    def nested(self) -> Iterator[None]:
        """Around one include or import: counted as a call, and at most ``INCLUDE_DEPTH`` deep."""
        budget = current_budget()
        budget.step()
        box = _DEPTH.get(None)
        if box is None or box[0] is not budget:
            box = (budget, [0])
            _DEPTH.set(box)
        depth = box[1]
        if depth[0] >= INCLUDE_DEPTH:
            raise Refused(
                f"template includes or imports partials more than {INCLUDE_DEPTH} deep (partials.INCLUDE_DEPTH)"
            )
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    def counted(self, items: Iterable[Any]) -> Counted:
        """A loop's iterable, counting its items."""
        return Counted(items, current_budget())

    def new_buffer(self) -> Buffer:
        """A buffer for a block's text."""
        return Buffer(current_budget())

    def built(self, value: Any) -> Any:
        """A list, tuple or dict literal, checked."""
        return current_budget().admit(value)

    def concat_values(self, eval_ctx: jinja2.nodes.EvalContext, values: tuple[Any, ...]) -> str:
        """``a ~ b``: each part converted and counted before they are joined."""
        budget = current_budget()
        parts = []
        size = 0
        for value in values:
            text = value if isinstance(value, str) else str(value)
            size += len(text)
            budget.within(size)
            parts.append(text)
        return str(budget.admit(markup_join(parts) if eval_ctx.autoescape else "".join(parts)))


class _Template(jinja2.Template):
    """A compiled template whose renders run under a budget and stop once the output passes its limit."""

    _flat: dict[str, Any] | None = None

    def render(self, *args: Any, **kwargs: Any) -> str:
        variables = args[0] if len(args) == 1 and not kwargs else dict(*args, **kwargs)
        limits = getattr(variables, "limits", DEFAULT_LIMITS)
        cap = limits.render_output
        # jinja2 merges the template's globals (a ChainMap, slow to copy and to list) into every render's
        # context: merged here with a flat copy made once, and that copy is the globals the context lists.
        flat = self._flat
        if flat is None:
            flat = self._flat = dict(self.globals)
        token = BUDGET.set(Budget(limits, variables))
        try:
            parts = []
            size = 0
            context = new_context(self.environment, self.name, self.blocks, {**flat, **variables}, True, flat, None)
            for part in self.root_render_func(context):
                size += len(part)
                if size > cap:
                    raise Refused(f"template output exceeds {cap} characters (Limits.render_output)")
                parts.append(part)
            return "".join(parts)
        finally:
            BUDGET.reset(token)

    def generate(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        yield self.render(*args, **kwargs)


class EnvClosedError(jinja2.UndefinedError):
    """A template read ``env`` that its tool may not see."""


class _Undefined(jinja2.StrictUndefined):
    """StrictUndefined, except that a name missing from a closed ``env`` explains the trust rule, and a
    misspelt name or key says what it may have meant (``args has no key 'titel'; did you mean 'args.title'?``).
    """

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        name, owner = self._undefined_name, self._undefined_obj
        budget = BUDGET.get()
        if self._undefined_hint is not None or not isinstance(name, str) or budget is None:
            return super()._undefined_message
        variables = budget.variables
        if owner is missing:
            guess = meant(name, None, variables)
            message = f"{name!r} is undefined"
        elif isinstance(owner, Mapping):
            found = next((n for n, v in variables.items() if v is owner and n in ("args", "meta")), None)
            guess = meant(found, name, variables) if found is not None else _close(name, owner)
            message = f"{found} has no key {name!r}" if found is not None else super()._undefined_message
        else:
            return super()._undefined_message
        return f"{message}; did you mean {guess!r}?" if guess else message

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[jinja2.TemplateRuntimeError] = jinja2.UndefinedError,
    ) -> None:
        if isinstance(obj, ClosedEnv):
            hint, exc = obj.reason, EnvClosedError
        super().__init__(hint, obj, name, exc)


ENVIRONMENT = _Environment(undefined=_Undefined, autoescape=False, keep_trailing_newline=True, loader=Loader())
ENVIRONMENT.template_class = _Template
ENVIRONMENT.globals["media"] = media  # places an image, audio or a file in a prompt (orchestrator.placing)


# -- what a template reads, and what a misspelt read may have meant ------------------------------------

SCOPED = ("args", "meta")  # the variables whose keys ``reads`` reports
SUGGEST_FROM = 10_000  # keys one suggestion compares at most: a caller's huge mapping costs a bounded look


def meant(name: str, key: str | None, variables: Mapping[str, Any]) -> str | None:
    """What a read of ``name`` (``name.key`` with ``key``) that ``variables`` lack may have meant, or None.

    ``variables`` maps each template variable to its value or its keys. A
    key of ``args`` is looked for among the keys of ``args`` and the
    properties ``meta.params`` declares. A bare name is a variable or global
    spelt another way (``arg``), else a key of ``args`` or ``meta``
    (``titel`` -> ``args.title``).
    """
    if key is not None:
        close = _close(key, [k for k in _keys_of(name, variables) if k != key])  # a declared key not passed: no guess
        return f"{name}.{close}" if close else None
    close = _close(name, [*variables, *ENVIRONMENT.globals])
    if close:
        return close
    for owner in SCOPED:
        close = _close(name, _keys_of(owner, variables))
        if close:
            return f"{owner}.{close}"
    return None


def _keys_of(name: str, variables: Mapping[str, Any]) -> list[str]:
    """The string keys of variable ``name`` (and, for ``args``, of the ``params`` properties in ``meta``)."""
    sources: list[Any] = [variables.get(name)]
    if name == "args":
        sources.append(_get(_declared(_get(variables.get("meta"), "params")), "properties"))
    keys: list[str] = []
    for value in sources:
        if _iterable(value):
            keys.extend(k for k in islice(value, SUGGEST_FROM) if isinstance(k, str))
    return keys


def _declared(params: Any) -> Any:
    """``params`` as JSON Schema (a Picoschema shorthand expanded), or None when it cannot be read."""
    from .errors import ConfigurationError
    from .schema import json_schema  # only a failing render asks

    try:
        return json_schema(params)
    except ConfigurationError:
        return None


def _iterable(value: Any) -> bool:
    return isinstance(value, (Mapping, Collection)) and not isinstance(value, (str, bytes, bytearray))


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _close(word: str, choices: Iterable[Any]) -> str | None:
    import difflib  # only a failing render or check needs it

    keys = [c for c in islice(choices, SUGGEST_FROM) if isinstance(c, str)]
    close = difflib.get_close_matches(word, keys, n=1)
    return close[0] if close else None
