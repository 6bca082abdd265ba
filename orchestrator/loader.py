"""Turn files into Tools: markdown with YAML frontmatter, or python modules.

YAML is read with the safe loader (the C one when PyYAML has it); errors carry
the line in the file, not in the frontmatter block. Python tools are imported
by path as isolated modules: nothing is added to ``sys.path`` and two
``helper.py`` in different folders never clash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import frontmatter
import yaml

from .errors import ToolDefinitionError
from .limits import DEFAULT_LIMITS, Limits
from .tool import Tool

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

_HANDLER = frontmatter.YAMLHandler()
_BOUNDARY = re.compile(r"^-{3,}[ \t]*$", re.MULTILINE)
KNOWN_KEYS = ("name", "description", "authority", "metadata")


def check_name(name: object, path: Path | None = None) -> str:
    """Return ``name`` if it is a usable tool name.

    Raises:
        ToolDefinitionError: empty, not a string, or containing ``/``, ``\\`` or ``..``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ToolDefinitionError(f"tool name must be a non-empty string, not {name!r}", path=path)
    if "/" in name or "\\" in name or ".." in name:
        raise ToolDefinitionError(f"tool name {name!r} may not contain '/', '\\' or '..'", path=path)
    return name


def split_frontmatter(
    text: str, path: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[dict[str, Any], dict[str, int], str, int]:
    """Split a markdown file into (frontmatter, key lines, body, body line).

    Key lines map each top-level key, and each ``metadata`` key, to its line.

    Raises:
        ToolDefinitionError: empty file, unclosed or malformed frontmatter.
    """
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise ToolDefinitionError("file is empty: a markdown tool needs frontmatter or a prompt", path=path)
    if not _HANDLER.detect(text):
        if text.startswith("---"):
            raise ToolDefinitionError("frontmatter opened with '---' is never closed", path=path, line=1)
        return {}, {}, text.strip(), 1
    opening = _BOUNDARY.search(text)
    closing = _BOUNDARY.search(text, opening.end()) if opening else None
    if opening is None or closing is None:
        raise ToolDefinitionError("frontmatter opened with '---' is never closed", path=path, line=1)
    block = text[opening.end() : closing.start()]
    first_line = text.count("\n", 0, opening.end()) + 1
    data, lines = load_yaml(block, path, first_line, limits)
    body = text[closing.end() :]
    lead = len(body) - len(body.lstrip())
    body_line = text.count("\n", 0, closing.end() + lead) + 1
    return data, lines, body.strip(), body_line


def load_yaml(
    block: str, path: Path, first_line: int = 1, limits: Limits = DEFAULT_LIMITS
) -> tuple[dict[str, Any], dict[str, int]]:
    """Safely load a YAML mapping; return it with the file line of each key.

    ``first_line`` is the file line on which ``block`` starts.

    Raises:
        ToolDefinitionError: invalid YAML, a non-mapping document, or a key that is not a string.
    """
    loader = SafeLoader(block)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = first_line + mark.line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or str(exc)
        raise ToolDefinitionError(f"invalid YAML in frontmatter: {problem}", path=path, line=line) from exc
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ToolDefinitionError(
            f"frontmatter must be a mapping of keys to values, not a {type(data).__name__}",
            path=path,
            line=first_line + (node.start_mark.line if node is not None else 0),
        )
    _check_keys(node, path, first_line)
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            lines[key_node.value] = first_line + key_node.start_mark.line
            if key_node.value == "metadata" and isinstance(value_node, yaml.MappingNode):
                for meta_key, _ in value_node.value:
                    lines.setdefault(meta_key.value, first_line + meta_key.start_mark.line)
    return data, lines


def _check_keys(node: yaml.Node | None, path: Path, first_line: int) -> None:
    """Refuse mapping keys that YAML read as something other than a string (``on: push``)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                if key_node.tag != "tag:yaml.org,2002:str":
                    raise ToolDefinitionError(
                        f"key {key_node.value!r} is read by YAML as {key_node.tag.rsplit(':', 1)[-1]}, "
                        f"not a string; quote it: '{key_node.value}'",
                        path=path,
                        line=first_line + key_node.start_mark.line,
                    )
                stack.append(value_node)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _check_python_keys(value: Any, path: Path, where: str) -> None:
    """Refuse mapping keys that are not strings in a python tool's ``frontmatter``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ToolDefinitionError(f"key {key!r} in {where} is not a string", path=path)
            _check_python_keys(item, path, f"{where}[{key!r}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_python_keys(item, path, f"{where}[{index}]")


def tool_from_frontmatter(
    data: Mapping[str, Any],
    *,
    path: Path,
    kind: str,
    root: Path | None,
    trusted: bool,
    lines: Mapping[str, int] | None = None,
    prompt: str | None = None,
    prompt_line: int = 1,
    fn: Any = None,
) -> Tool:
    """Build a Tool from a frontmatter mapping, checking its shape.

    Raises:
        ToolDefinitionError: a field of the wrong type or a bad name.
    """
    lines = lines or {}
    name = check_name(data.get("name", path.stem), path)
    metadata = data.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ToolDefinitionError(
            f"'metadata' must be a mapping, not a {type(metadata).__name__}",
            tool=name,
            path=path,
            line=lines.get("metadata"),
        )
    for key in ("description", "authority"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise ToolDefinitionError(
                f"{key!r} must be a string, not a {type(value).__name__}", tool=name, path=path, line=lines.get(key)
            )
    return Tool(
        name=name,
        uri=path.as_uri() if path.is_absolute() else str(path),
        kind=kind,
        frontmatter=dict(data),
        metadata=metadata,
        prompt=prompt,
        fn=fn,
        authority=data.get("authority"),
        description=data.get("description"),
        path=path,
        root=root,
        trusted=trusted,
        prompt_line=prompt_line,
        lines=dict(lines),
    )


def load_markdown(path: Path, root: Path | None = None, trusted: bool = True, limits: Limits = DEFAULT_LIMITS) -> Tool:
    """Load a ``.md`` tool.

    Raises:
        ToolDefinitionError: unreadable file or malformed frontmatter.
    """
    text = read_text(path)
    data, lines, body, body_line = split_frontmatter(text, path, limits)
    return tool_from_frontmatter(
        data, path=path, kind="markdown", root=root, trusted=trusted, lines=lines, prompt=body, prompt_line=body_line
    )


def read_text(path: Path) -> str:
    """Read a UTF-8 file, turning OS and decoding errors into ToolDefinitionError."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolDefinitionError(f"cannot read file: {exc}", path=path) from exc


def load_python(path: Path, root: Path | None = None, trusted: bool = True) -> Tool:
    """Import a ``.py`` tool as an isolated module and read its ``frontmatter`` and ``main``.

    Each load executes the file afresh under a module name derived from its
    path, so a reload after an edit really re-imports it.

    Raises:
        ToolDefinitionError: syntax error, exception on import, missing ``main``, bad ``frontmatter``.
    """
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"_toolcascade_tools.{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ToolDefinitionError("cannot import file as a python module", path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise ToolDefinitionError(f"syntax error: {exc.msg}", path=path, line=exc.lineno) from exc
    except Exception as exc:
        sys.modules.pop(module_name, None)
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if Path(frame.filename) == path:
                line = frame.lineno
        raise ToolDefinitionError(
            f"importing the tool raised {type(exc).__name__}: {exc}", path=path, line=line
        ) from exc
    data = getattr(module, "frontmatter", {})
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ToolDefinitionError(
            f"module-level 'frontmatter' must be a mapping, not a {type(data).__name__}", path=path
        )
    _check_python_keys(data, path, "frontmatter")
    main = getattr(module, "main", None)
    if not callable(main):
        raise ToolDefinitionError("a python tool must define a callable main(ctx)", path=path)
    return tool_from_frontmatter(data, path=path, kind="python", root=root, trusted=trusted, fn=main)


def load_tool(path: Path, root: Path | None = None, trusted: bool = True, limits: Limits = DEFAULT_LIMITS) -> Tool:
    """Load a tool file by its extension."""
    if path.suffix == ".py":
        return load_python(path, root, trusted)
    return load_markdown(path, root, trusted, limits)
