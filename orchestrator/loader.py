"""Turn files into Tools: markdown with YAML frontmatter, or python modules.

YAML is read with the safe loader (the C one when PyYAML has it); errors carry
the line in the file, not in the frontmatter block. Files come from other
people, so reading is bounded before anything is built: a file's size, its
encoding, and its YAML graph measured with aliases expanded (nodes, bytes of
text, depth; a recursive alias is refused), so an alias bomb is refused in
microseconds instead of growing the process by gigabytes. Python tools are
imported by path as isolated modules: nothing is added to ``sys.path`` and two
``helper.py`` in different folders never clash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import stat
import sys
import traceback
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import OrchestratorError, ToolDefinitionError
from .frozen import thaw
from .limits import DEFAULT_LIMITS, Limits
from .tool import Tool

if TYPE_CHECKING:
    from .formats import Adapted, Format

_BOUNDARY = re.compile(r"^-{3,}[ \t]*$", re.MULTILINE)
# A document opens with frontmatter when this matches at its start: python-frontmatter's test for YAML
# (its ``YAMLHandler.FM_BOUNDARY``), without importing it for every first file read.
_OPENING = re.compile(r"^-{3,}\s*$", re.MULTILINE)
KNOWN_KEYS = ("name", "description", "authority", "metadata", "role", "when", "evals")
# A top-level ``name:`` key in a frontmatter block (the cheap test before parsing it for the names index).
_NAME_LINE = re.compile(r"^name[ \t]*:", re.MULTILINE)


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
    text: str, path: Path, limits: Limits = DEFAULT_LIMITS, *, empty_ok: bool = False, frozen: bool = False
) -> tuple[dict[str, Any], dict[str, int], str, int]:
    """Split a markdown file into (frontmatter, key lines, body, body line).

    Key lines map each top-level key, and each ``metadata`` key, to its line.
    ``frozen``: the frontmatter's values may come back read-only (``load_yaml``).

    Raises:
        ToolDefinitionError: empty file, unclosed or malformed frontmatter, or one over ``limits``.
    """
    text = text.lstrip("\ufeff")
    if not text.strip():
        if empty_ok:
            return {}, {}, "", 1
        raise ToolDefinitionError("file is empty: a markdown tool needs frontmatter or a prompt", path=path)
    block, first_line, body, body_line = cut_frontmatter(text, path)
    if block is None:
        return {}, {}, body, body_line
    data, lines = load_yaml(block, path, first_line, limits, frozen=frozen)
    return data, lines, body, body_line


def cut_frontmatter(text: str, path: Path) -> tuple[str | None, int, str, int]:
    """A markdown file's text cut into (frontmatter block or None, its first line, body, body line), unparsed.

    Raises:
        ToolDefinitionError: frontmatter opened with ``---`` and never closed.
    """
    text = text.lstrip("\ufeff")
    if not _OPENING.match(text):
        if text.startswith("---"):
            raise ToolDefinitionError("frontmatter opened with '---' is never closed", path=path, line=1)
        return None, 1, text.strip(), 1
    opening = _BOUNDARY.search(text)
    closing = _BOUNDARY.search(text, opening.end()) if opening else None
    if opening is None or closing is None:
        raise ToolDefinitionError("frontmatter opened with '---' is never closed", path=path, line=1)
    block = text[opening.end() : closing.start()]
    first_line = text.count("\n", 0, opening.end()) + 1
    body = text[closing.end() :]
    lead = len(body) - len(body.lstrip())
    body_line = text.count("\n", 0, closing.end() + lead) + 1
    return block, first_line, body.strip(), body_line


def load_yaml(
    block: str, path: Path, first_line: int = 1, limits: Limits = DEFAULT_LIMITS, *, frozen: bool = False
) -> tuple[dict[str, Any], dict[str, int]]:
    """Safely load a YAML mapping (a frontmatter) within ``limits``; return it with the file line of each key.

    ``first_line`` is the file line on which ``block`` starts. ``frozen``: its
    values may come back read-only (a Tool freezes them anyway; ``parse_yaml``).
    A block of this exact text parsed before, here or in an earlier process, comes from the cache folder
    (``orchestrator.frontmatters``): a ``check`` after a listing parses no YAML.

    Raises:
        ToolDefinitionError: what ``parse_yaml`` refuses, or a document that is not a mapping.
    """
    text = str(path)
    own = text.startswith(_own_folders())
    folder = "" if own else os.path.dirname(os.path.abspath(text))
    from . import cachefolder, frontmatters  # the cache folder: only once a file is read

    kept = cachefolder.kept_frontmatter(block, first_line, limits) if own else None
    if not own and (found := frontmatters.kept_block(folder, block, first_line, limits)) is not None:
        kept = (found[0] if frozen else thaw(found[0])), found[1]
    if kept is not None:
        return kept
    import yaml  # yaml comes with the first file read, not with the package

    from .documents import parse_yaml

    data, node = parse_yaml(block, path, first_line, limits, frozen=frozen and not own)  # kept ones: plain JSON
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ToolDefinitionError(
            f"frontmatter must be a mapping of keys to values, not a {type(data).__name__}",
            path=path,
            line=first_line + (node.start_mark.line if node is not None else 0),
        )
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            lines[key_node.value] = first_line + key_node.start_mark.line
            if key_node.value == "metadata" and isinstance(value_node, yaml.MappingNode):
                for meta_key, _ in value_node.value:
                    lines.setdefault(meta_key.value, first_line + meta_key.start_mark.line)
    if own:
        cachefolder.keep_frontmatter(block, first_line, limits, data, lines)
    else:
        frontmatters.keep_block(folder, block, first_line, limits, data, lines)
    return data, lines


@lru_cache(maxsize=1)
def _own_folders() -> tuple[str, ...]:
    """The package's own ``tools`` and ``authorities`` folders (wheel or checkout), each ending in a separator.

    Their parsed frontmatters are kept on disk by content (``orchestrator.index``): a first invoke
    plans through the built-in tools without importing YAML.
    """
    package = Path(__file__).resolve().parent
    found = []
    for name in ("tools", "authorities"):
        installed = package / "builtin" / name
        found.append(os.path.join(str(installed if installed.is_dir() else package.parent / name), ""))
    return tuple(found)


def _check_python_keys(value: Any, path: Path, limits: Limits) -> None:
    """Hold a python tool's ``frontmatter`` to what YAML could produce: a tree of string keys, within limits.

    The walk is iterative and stops at the first problem: a shared object is
    counted each time it is reached, a container inside itself is a cycle.

    Raises:
        ToolDefinitionError: a key that is not a string, a cycle, too deep, or over ``limits``.
    """
    # Depth first with one iterator per open container: a list of 200,000 values is refused at its
    # 100,001st without anything built for the rest. A frame is [container id, its items, the key being
    # walked], so the current value's place is the frames' keys, spelled out only for a message.
    nodes = size = 0
    inside: set[int] = set()  # the containers on the current path
    frames: list[list[Any]] = []
    current = value
    while True:
        nodes += 1
        kind = type(current)
        if kind is str or (kind not in _SCALARS and isinstance(current, str)):
            size += len(current)
        if nodes > limits.yaml_nodes or size > limits.yaml_bytes:
            what = f"{limits.yaml_nodes} values" if nodes > limits.yaml_nodes else f"{limits.yaml_bytes} characters"
            raise ToolDefinitionError(
                f"frontmatter has more than {what} (at {_spell(frames)}); "
                "shorten it or raise Limits.yaml_nodes/yaml_bytes",
                path=path,
            )
        # A plain scalar is told by its exact type (the ABC check of ``Mapping`` was a third of the walk).
        if kind not in _SCALARS and isinstance(current, _CONTAINERS):
            mapping = kind is dict or (kind is not list and isinstance(current, Mapping))
            if id(current) in inside:
                raise ToolDefinitionError(f"{_spell(frames)} contains itself; metadata must be a tree", path=path)
            if len(frames) >= limits.yaml_depth:
                raise ToolDefinitionError(
                    f"{_spell(frames)} nests more than {limits.yaml_depth} levels deep; flatten it", path=path
                )
            for key in current if mapping else ():
                if not isinstance(key, str):
                    raise ToolDefinitionError(f"key {key!r} in {_spell(frames)} is not a string", path=path)
            inside.add(id(current))
            items = current.items() if mapping else enumerate(current)  # type: ignore[union-attr]  # a Mapping
            frames.append([id(current), iter(items), None])
        while frames:  # the next value: the top frame's next item, or close the frame
            frame = frames[-1]
            step = next(frame[1], None)
            if step is not None:
                frame[2], current = step
                break
            frames.pop()
            inside.discard(frame[0])
        else:
            return


_SCALARS = frozenset({str, int, float, bool, type(None)})  # exact types: neither a Mapping nor a list
_CONTAINERS = (Mapping, list)


def _spell(frames: list[list[Any]]) -> str:
    """Where the walk is, for a message: ``frontmatter['metadata']['many'][3]``."""
    return "frontmatter" + "".join(f"[{frame[2]!r}]" for frame in frames)


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
    text = read_text(path, limits)
    data, lines, body, body_line = split_frontmatter(text, path, limits, frozen=True)
    return tool_from_frontmatter(
        data, path=path, kind="markdown", root=root, trusted=trusted, lines=lines, prompt=body, prompt_line=body_line
    )


def file_limit(limits: Limits = DEFAULT_LIMITS) -> int:
    """The most bytes a tool or authority file may have: ``limits.file_bytes``."""
    return limits.file_bytes


def read_text(path: Path, limits: Limits = DEFAULT_LIMITS) -> str:
    """Read a tool or authority file as UTF-8 text with universal newlines, as ``open()`` would.

    At most ``file_limit(limits)`` bytes are read: the size is checked before
    reading, and the read stops there however the file grows meanwhile.

    Raises:
        ToolDefinitionError: unreadable, not a regular file, too big, not UTF-8, or holding a NUL character.
    """
    cap = file_limit(limits)
    too_big = (
        f"the file is bigger than the {cap} bytes a tool or authority file may have "
        "(Limits.file_bytes); shorten it or raise Limits.file_bytes"
    )
    try:
        # Non-blocking, so a FIFO in a tools folder cannot hang the open; it is refused just below.
        fd = os.open(path, _READ_FLAGS)
        try:  # the descriptor itself, without a buffered file object: a listing reads 10,000 small files
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ToolDefinitionError("cannot read file: it is not a regular file", path=path)
            if info.st_size > cap:
                raise ToolDefinitionError(too_big, path=path)
            # Read what the stat promised, then on in chunks should the file have grown since:
            # never more than cap + 1 bytes, and no cap-sized buffer for a small file.
            data, ended = _read_all(fd, min(info.st_size, cap) + 1)
            while not ended and len(data) <= cap:
                more, ended = _read_all(fd, min(1 << 16, cap + 1 - len(data)))
                data += more
        finally:
            os.close(fd)
    except OSError as exc:
        raise ToolDefinitionError(f"cannot read file: {exc}", path=path) from exc
    if len(data) > cap:
        raise ToolDefinitionError(too_big, path=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolDefinitionError(
            f"cannot read file: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8; save it as UTF-8",
            path=path,
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from exc
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    nul = text.find("\x00")
    if nul >= 0:
        raise ToolDefinitionError(
            "the file holds a NUL character: tool and authority files are text; remove it",
            path=path,
            line=text.count("\n", 0, nul) + 1,
        )
    return text


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _read_all(fd: int, size: int) -> tuple[bytes, bool]:
    """(up to ``size`` bytes from ``fd``, whether a read met the end of the file): fewer bytes only at the end
    (``os.read`` may return less). Told of the end, a caller reads no more (a third of a listing's reads).

    Raises:
        OSError: the read failed.
    """
    data = os.read(fd, size)
    while 0 < len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            return data, True
        data += more
    return data, not data


def load_python(path: Path, root: Path | None = None, trusted: bool = True, limits: Limits = DEFAULT_LIMITS) -> Tool:
    """Import a ``.py`` tool as an isolated module and read its ``frontmatter`` and ``main``.

    Each load compiles the file's current text afresh (no ``__pycache__``:
    its bytecode is keyed by whole-second mtimes and size, so a same-size
    edit within a second would run the old code) and executes it under a
    module name derived from its path.

    Raises:
        ToolDefinitionError: syntax error, exception on import, missing ``main``, bad ``frontmatter``
            (a key that is not a string, a cycle, or over ``limits``).
    """
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"_toolcascade_tools.{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ToolDefinitionError("cannot import file as a python module", path=path)
    source = read_text(path, limits)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up here
    try:
        exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
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
    _check_python_keys(data, path, limits)
    main = getattr(module, "main", None)
    if not callable(main):
        raise ToolDefinitionError("a python tool must define a callable main(ctx)", path=path)
    return tool_from_frontmatter(data, path=path, kind="python", root=root, trusted=trusted, fn=main)


def load_adapted(
    path: Path, fmt: Format, root: Path | None = None, trusted: bool = True, limits: Limits = DEFAULT_LIMITS
) -> Tool:
    """Load a file of another format through its adapter (``orchestrator.formats``).

    The file is read and its frontmatter parsed within ``limits`` exactly as
    for our own tools; the adapter maps them onto our frontmatter and prompt.
    A format whose host loads frontmatter that is not strict YAML has a
    ``leniency`` (``orchestrator.formats.lenient``): only when strict parsing
    fails, the block is read key by key, and each key read as text is a
    problem the tool carries for ``check`` and ``show``.

    Raises:
        ToolDefinitionError: unreadable file, malformed frontmatter, or a field the adapter refuses.
    """
    from .formats import Front

    text = read_text(path, limits)
    recovered: tuple[tuple[int | None, str], ...] = ()
    try:
        data, lines, body, body_line = split_frontmatter(text, path, limits, empty_ok=True)
    except ToolDefinitionError as exc:
        leniency = getattr(fmt, "leniency", None)
        if leniency is None or exc.__cause__ is None:
            raise
        from .formats.lenient import is_syntax_error

        if not is_syntax_error(exc):
            raise
        block, first_line, body, body_line = cut_frontmatter(text, path)
        data, lines, recovered = leniency.recover(block or "", path, first_line, limits)
    try:
        adapted = fmt.adapt(path, Front(data, lines, text, root), body, body_line)
    except ToolDefinitionError as exc:
        if exc.path is not None:
            raise
        raise ToolDefinitionError(exc.detail, tool=exc.tool, path=path, line=exc.line, key=exc.key) from exc
    except OrchestratorError as exc:  # e.g. a malformed model alias table: still about this file
        raise ToolDefinitionError(f"{type(exc).__name__}: {exc.detail}", tool=exc.tool, path=path) from exc
    except Exception as exc:  # an adapter's own bug: still one typed error naming the file
        raise ToolDefinitionError(f"the {fmt.name} adapter failed: {type(exc).__name__}: {exc}", path=path) from exc
    if recovered:
        adapted = replace(adapted, problems=tuple(sorted((*recovered, *adapted.problems), key=lambda p: p[0] or 0)))
    return tool_from_adapted(adapted, fmt.name, path=path, root=root, trusted=trusted, lines=lines, body_line=body_line)


def tool_from_adapted(
    adapted: Adapted,
    format_name: str,
    *,
    path: Path,
    root: Path | None,
    trusted: bool,
    lines: Mapping[str, int],
    body_line: int,
) -> Tool:
    """Build a Tool from an adapter's result: its top-level keys as frontmatter, the rest as metadata.

    Each of our keys gets the file line of the source field it came from.

    Raises:
        ToolDefinitionError: a bad name, or keys of the wrong type.
    """
    from .formats import TOP_LEVEL

    if not isinstance(adapted.metadata, Mapping):
        raise ToolDefinitionError(f"the {format_name} adapter gave metadata that is not a mapping", path=path)
    front: dict[str, Any] = {"name": adapted.name}
    metadata: dict[str, Any] = {}
    for key, value in adapted.metadata.items():
        if key in TOP_LEVEL:
            front[key] = value
        elif key == "metadata" and isinstance(value, Mapping):
            metadata.update(value)
        else:
            metadata[key] = value
    front["metadata"] = metadata
    where: dict[str, int] = {}
    for mapped in adapted.mapping:
        if mapped.target is None:
            continue
        head = mapped.source.split(".", 1)[0].split(":", 1)[0].strip()
        line = lines.get(head) or (body_line if head.startswith("body") else None)
        if line is not None:
            where.setdefault(mapped.target, line)
    tool = tool_from_frontmatter(
        front,
        path=path,
        kind="markdown",
        root=root,
        trusted=trusted,
        lines=where,
        prompt=adapted.prompt,
        prompt_line=body_line,
    )
    return replace(tool, format=format_name, mapping=tuple(adapted.mapping), problems=tuple(adapted.problems))


def read_name(path: Path, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The ``name`` a markdown tool declares in its frontmatter, or None; cheap enough to index folders.

    Only the frontmatter block is parsed; a file that cannot be read or
    parsed has no declared name here (loading it reports why).
    """
    try:
        text = read_text(path, limits)
    except ToolDefinitionError:
        return None
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        return None
    opening = _BOUNDARY.search(text)
    closing = _BOUNDARY.search(text, opening.end()) if opening else None
    if opening is None or closing is None:
        return None
    block = text[opening.end() : closing.start()]
    if not _NAME_LINE.search(block):
        return None  # most files: no top-level name, nothing to parse
    try:
        data, _lines = load_yaml(block, path, 1, limits)
    except ToolDefinitionError:
        return None
    name = data.get("name")
    return name if isinstance(name, str) else None


def read_python_name(path: Path, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The ``name`` a python tool's module-level ``frontmatter`` literal declares, or None; nothing is run.

    Only a literal ``frontmatter = {"name": "...", ...}`` is read (the file is
    parsed, never executed): a computed name is not indexed, so such a tool is
    found by its stem.
    """
    import ast

    try:
        text = read_text(path, limits)
    except ToolDefinitionError:
        return None
    if "frontmatter" not in text or "name" not in text:
        return None
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for statement in module.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "frontmatter" for target in statement.targets
        ):
            value = statement.value
            if isinstance(value, ast.Dict):
                for key, item in zip(value.keys, value.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "name" and isinstance(item, ast.Constant):
                        return item.value if isinstance(item.value, str) else None
    return None


def load_tool(
    path: Path,
    root: Path | None = None,
    trusted: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    fmt: Format | None = None,
) -> Tool:
    """Load a tool file: through ``fmt`` when it is another format's, else by its extension.

    Raises:
        ToolDefinitionError: the file is malformed or over ``limits``.
    """
    if fmt is not None:
        return load_adapted(path, fmt, root, trusted, limits)
    if path.suffix == ".py":
        return load_python(path, root, trusted, limits)
    return load_markdown(path, root, trusted, limits)
