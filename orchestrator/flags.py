"""The options and arguments the commands share: ``--path`` (with ``--format``), ``--set``, ``--debug``,
``--json``, and ARGS as JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from .exits import fail

F = TypeVar("F", bound=Callable[..., Any])


def path_option(fn: F) -> F:
    fn = click.option(
        "--format",
        "formats",
        multiple=True,
        metavar="NAME",
        expose_value=False,
        callback=remember_formats,
        help="Read only these formats besides our own .md/.py tools (repeatable): claude (claude-agent, "
        "claude-command, claude-skill), prompty, copilot-prompt, or none. Default: every format.",
    )(fn)
    return click.option(
        "--path",
        "paths",
        multiple=True,
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Search DIR for tools (repeatable; first match wins). Default: ./tools when it exists. "
        "The built-in tools are always searched last.",
    )(fn)


def parse_sets(_ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> dict[str, Any]:
    """``--set key=value`` items as overrides, each value read as YAML (``n=3`` is an int, ``t=[a,b]`` a list)."""
    import yaml

    overrides: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not key=value", param=param)
        try:
            overrides[key] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or exc
            raise click.BadParameter(f"the value of {key!r} is not valid YAML: {problem}", param=param) from None
    return overrides


def set_option(fn: F) -> F:
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        callback=parse_sets,
        help="Override a metadata key for this call (repeatable). VALUE is read as YAML: "
        "n=3 is a number, tags=[a,b] a list, x=null a null, anything else a string.",
    )(fn)


def debug_option(fn: F) -> F:
    return click.option("--debug", is_flag=True, help="Show the Python traceback of an error.")(fn)


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")(fn)


def remember_formats(ctx: click.Context, _param: click.Parameter, values: Sequence[str]) -> None:
    """Keep ``--format`` names for the command's Manager (``none``: our own tools only)."""
    if values:
        ctx.meta["toolcascade.formats"] = [] if list(values) == ["none"] else list(values)


def chosen_formats() -> list[str] | None:
    """The ``--format`` names of the running command, or None (every format)."""
    formats: list[str] | None = click.get_current_context().meta.get("toolcascade.formats")
    return formats


def search_paths(paths: Sequence[Path]) -> list[Path]:
    """The ``--path`` folders, each once (``tools`` and ``./tools/`` are one), else ``./tools`` when it exists."""
    if paths:
        unique: dict[Path, Path] = {}
        for path in paths:
            unique.setdefault(path.resolve(), path)
        return list(unique.values())
    default = Path("tools")
    return [default] if default.is_dir() else []


def parse_args(text: str | None) -> Any:
    """ARGS as JSON: ``-`` reads stdin; nothing means ``{}``."""
    if text is None:
        return {}
    source = "ARGS"
    if text == "-":
        text, source = sys.stdin.read(), "stdin"
        if not text.strip():
            return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ""
        if text.strip()[:1] not in ("{", "[", '"', "-", "t", "f", "n", *"0123456789"):
            hint = " (a JSON string needs quotes: '\"text\"')"
        fail(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{hint}")
