"""``check``'s look at templates: syntax errors, and reads that no render can satisfy (nothing is rendered)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from .errors import ConfigurationError
from .frozen import FrozenDict, answer_by_identity
from .interpolate import has_templates, has_templates_frozen, is_template
from .problems import Report
from .reads import reads
from .sandbox import ENVIRONMENT, meant
from .schema import json_schema

if TYPE_CHECKING:
    from .cascade import Plan
    from .tool import Tool

# The variables every template has (R-CAS-3); ``reads`` reports the rest.
VARIABLES = ("args", "meta", "tool", "locals", "cwd", "env")
_FREE_SCHEMA = ("$ref", "allOf", "anyOf", "oneOf", "patternProperties", "if", "dependentSchemas")


def check_reads(tool: Tool, plan: Plan, report: Report, templated: Iterable[str] | None = None) -> None:
    """Template reads no render can satisfy: a name that is no variable, a key ``params`` and the metadata lack.

    The prompt and the tool's own metadata templates are read (an authority's
    serve tools with other params). ``args.KEY`` is checked when the merged
    ``params`` is an object schema listing ``properties``; ``meta.KEY``
    against every key the cascade sets. A read guarded with ``is defined``
    or ``| default`` is never reported. ``templated``: the metadata keys
    whose values hold a template, when the caller found them already
    (``templated_keys``).
    """
    sources: list[tuple[str, str, int | None, int]] = []
    if tool.prompt is not None and is_template(tool.prompt):
        sources.append(("the prompt", tool.prompt, tool.prompt_line, 1))
    for key in templated_keys(tool.metadata) if templated is None else templated:
        sources.extend((f"metadata key {key!r}", text, tool.lines.get(key), 0) for text in _strings(tool.metadata[key]))
    if not sources:
        return
    values = plan.raw.values
    params = values.get("params")
    declared = _declared(params, tool, holds_template(tool, templated, "params", params))
    for where, source, first, per_line in sources:
        try:
            found = reads(source)
        except jinja2.TemplateSyntaxError:
            continue  # reported as a syntax error
        for read in found:
            line = first + (read.line - 1) * per_line if first is not None else None
            if read.key is None:
                if read.name in VARIABLES:
                    continue
                what = f"{where} reads {read.name!r}, which is no template variable ({', '.join(VARIABLES)})"
            elif read.name == "args":
                if declared is None or read.key in declared:
                    continue
                what = f"{where} reads args.{read.key}, which params does not declare"
            elif read.key in values:
                continue
            else:
                what = f"{where} reads meta.{read.key}, which no metadata of this tool sets"
            variables = {**dict.fromkeys(VARIABLES, ()), "args": declared or (), "meta": values}  # for a hint only
            guess = meant(read.name, read.key, variables)
            hint = f"did you mean {guess!r}?" if guess else "declare it, or guard it (| default(...), is defined)"
            report.add(tool.path, line, f"{what}: every render of it fails; {hint}")


def _declared(params: Any, tool: Tool, templated: bool) -> list[str] | None:
    """The arg names ``params`` (JSON Schema or shorthand) lists, or None when it lets other args through.

    ``templated``: whether ``params`` holds a template (then only args know it). A frozen ``params`` (an
    authority's, or one equal across files: ``orchestrator.frontmatters``) is read once, by its identity.
    """
    if templated:
        return None
    declared = answer_by_identity(_DECLARED, params, lambda p: _declared_names(p, tool), 1024, _FROZEN_DICT)
    return declared  # type: ignore[no-any-return]


_DECLARED: dict[int, tuple[Any, Any]] = {}  # id(a frozen params) -> (it, its declared arg names)
_FROZEN_DICT = frozenset({FrozenDict})


def _declared_names(params: Any, tool: Tool) -> list[str] | None:
    """``_declared`` worked out: the properties of the JSON Schema ``params`` means, when no other arg may pass."""
    try:
        schema = json_schema(params, "params", tool)
    except ConfigurationError:
        return None  # check reports the malformed shorthand itself (schema_problems)
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return None
    if any(key in schema for key in _FREE_SCHEMA) or isinstance(schema.get("additionalProperties"), Mapping):
        return None  # other args may be declared elsewhere (a shorthand's (*) gives every other property's schema)
    return [str(key) for key in schema["properties"]]


def templated_keys(metadata: Mapping[str, Any]) -> list[str]:
    """The metadata keys whose values hold a template (annotations are never templates, R-CAS-3)."""
    return [key for key, value in metadata.items() if not str(key).startswith("$") and has_templates_frozen(value)]


def holds_template(tool: Tool, templated: Iterable[str] | None, key: str, value: Any) -> bool:
    """``has_templates(value)``, answered from ``templated`` (``templated_keys`` of the tool's metadata) when
    ``value`` is the tool's own value of ``key``: a ``params`` schema is walked once per check, not four times.
    """
    if templated is not None and value is not None and value is tool.metadata.get(key):
        return key in templated
    return has_templates(value)


def check_templates(
    metadata: Mapping[str, Any],
    path: Path | None,
    lines: Mapping[str, int],
    report: Report,
    templated: Iterable[str] | None = None,
) -> None:
    """Report a template syntax error in any metadata value; ``templated`` as ``check_reads`` takes it."""
    for key in templated_keys(metadata) if templated is None else templated:
        for source in _strings(metadata[key]):
            for err in syntax_errors(source):
                report.add(path, lines.get(key), f"template syntax error in metadata key {key!r}: {err.message or err}")


def _strings(value: Any) -> Iterator[str]:
    """Every template string inside ``value``, recursively, as the cascade would render them."""
    if isinstance(value, str):
        if is_template(value):
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@lru_cache(maxsize=2048)
def syntax_errors(source: str) -> tuple[jinja2.TemplateSyntaxError, ...]:
    """The syntax error compiling ``source`` raises, as a tuple (empty when it compiles); once per text.

    Compiled as far as jinja2's Python source (``compile(raw=True)``): parsing and the sandbox's code
    generation raise every error a render's compile does (an unknown filter or test, ``extends``), and the
    Python compile and the Template a render needs, more than half the cost, are left to a render (a check
    renders nothing: a catalog whose every prompt differs compiled each one).
    """
    try:
        ENVIRONMENT.compile(source, raw=True)
    except jinja2.TemplateSyntaxError as err:
        return (err.with_traceback(None),)  # kept: no frames held with it
    return ()
