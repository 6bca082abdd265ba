"""``${file:path}`` and ``${env:NAME}`` references anywhere in a Prompty file's frontmatter.

Prompty resolves ``${protocol:value}`` strings in every field, nested ones
included (``sample: {profile: ${file:profile.json}}``). Here:

- ``${file:path}`` is read when the file is loaded: a JSON or YAML file (by
  its suffix) becomes its data, any other file its text. The path is
  relative to the prompty's folder and may not leave it (symlinks
  included), as for the older ``sample: file.json``. A file read this way
  may itself name others (at most ``MAX_DEPTH`` deep).
- ``${env:NAME}`` (the prefix in any case: ``${ENV:NAME}`` as Azure samples
  write it) is never read when a file is loaded. Under ``model`` the
  connection mapper decides (a key becomes ``api-key-env``, see
  ``connections``). Anywhere else a reference with a default
  (``${env:NAME:default}``) takes its default and one without is left out;
  both are reported with the line of their top-level key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ToolDefinitionError
from . import Front
from .adaptation import Adaptation

ENV = re.compile(r"^\$\{(?i:env):([A-Za-z_][A-Za-z0-9_]*)(?::(.*))?\}$", re.DOTALL)
"""An environment reference, the prefix in any case: group 1 the variable, group 2 its default."""

FILE = re.compile(r"^\$\{(?i:file):(.+)\}$", re.DOTALL)
"""A file reference: group 1 the path, relative to the prompty's folder."""

MAX_DEPTH = 4
"""Files a ``${file:}`` chain may read through (a file naming a file naming a file...)."""

_LEFT_OUT = object()


def resolve_references(a: Adaptation) -> Front:
    """``a.front`` with every ``${file:}`` read and every ``${env:}`` outside ``model`` settled (reported).

    Raises:
        ToolDefinitionError: a path leaving the prompty's folder, a missing or malformed file, a chain too deep.
    """
    resolved: dict[str, Any] = {}
    for key, value in a.front.items():
        value = _walk(a, value, str(key), str(key), 0)
        if value is not _LEFT_OUT:
            resolved[key] = value
    return Front(resolved, getattr(a.front, "lines", None))


def _walk(a: Adaptation, value: Any, top: str, where: str, depth: int) -> Any:
    if isinstance(value, str):
        return _reference(a, value, top, where, depth)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            item = _walk(a, item, top, f"{where}.{key}", depth)
            if item is not _LEFT_OUT:
                out[key] = item
        return out
    if isinstance(value, list):
        walked = [_walk(a, item, top, f"{where}[{index}]", depth) for index, item in enumerate(value)]
        return [item for item in walked if item is not _LEFT_OUT]
    return value


def _reference(a: Adaptation, text: str, top: str, where: str, depth: int) -> Any:
    stripped = text.strip()
    if not stripped.startswith("${"):
        return text
    found = FILE.match(stripped)
    if found is not None:
        if depth >= MAX_DEPTH:
            raise a.error(f"{where}: ${{file:}} references nest more than {MAX_DEPTH} deep", top)
        return _walk(a, read_reference(a, found.group(1).strip(), top), top, where, depth + 1)
    found = ENV.match(stripped)
    if found is None or top == "model":
        return text  # the model's connection decides what its references mean (``connections``)
    variable, default = found.group(1), found.group(2)
    line = a.line_of(top)
    if default is not None:
        a.problems.append(
            (
                line,
                f"{where} reads ${{env:{variable}}}: not read when a file is loaded; its default {default!r} is used",
            )
        )
        return default
    a.problems.append(
        (line, f"{where} reads ${{env:{variable}}}: not read when a file is loaded, so the value is left out")
    )
    return _LEFT_OUT


def read_reference(a: Adaptation, rel: str, key: str) -> Any:
    """The data of a file a prompty names (JSON, YAML, else text), read within the file limits.

    Raises:
        ToolDefinitionError: an absolute path or one leaving the prompty's folder, a missing or malformed file.
    """
    from ..documents import parse_yaml
    from ..loader import read_text

    folder = a.path.parent.resolve()
    target = (folder / rel).resolve()
    if Path(rel).is_absolute() or not target.is_relative_to(folder):
        raise a.error(f"{key}: file {rel!r} must be inside the prompty's folder", key)
    if not target.is_file():
        raise a.error(f"{key}: file {rel!r} does not exist (paths are relative to the prompty's folder)", key)
    text = read_text(target)
    if target.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolDefinitionError(
                f"{key}: {rel} is not JSON: {exc.msg}", tool=a.name, path=target, line=exc.lineno, key=key
            ) from exc
    if target.suffix in (".yaml", ".yml"):
        data, _node = parse_yaml(text, target, what=key)
        return data
    return text
