"""Partials: the files ``{% include %}``, ``{% import %}`` and ``{% from ... import %}`` bring into a template.

A partial is a ``.jinja`` file (``.j2`` and ``.jinja2`` too, when named with
their suffix) in the rendering tool's own folder or in one of its search
paths. Its name is written as a tool ref is: relative, ``/`` between
folders, without the suffix (``{% include "shared/preamble" %}`` finds
``shared/preamble.jinja``). It is looked for in the tool's folder first, then
in each search path in order, and the first match wins, as with ``PATH``.

The rules refs follow hold for partials (R-FIND-2):

- a name is a literal string in the template, so no argument chooses which
  file is read (R-CAS-4); absolute names, ``..``, ``.``, backslashes and
  hidden segments are refused before any file is looked at;
- a match whose real path (symlinks followed) leaves the folder it was found
  in is refused with a ``SecurityError``, never read;
- a tool from a trusted folder never includes from a folder the program did
  not trust, so a partial written by someone else never renders where
  ``env`` may be open; a tool from an untrusted folder renders every partial
  with its own closed ``env``, as it renders its own text.

A partial renders with the variables of the template that includes it (an
import without ``with context`` sees none, as in jinja2), inside the same
render: its loops, calls, output and time count against the same
``Limits``, each include or import counts as a call, and includes may nest
``INCLUDE_DEPTH`` deep. A compiled partial is kept with its file's
signature and compiled again once the file changes, so the next render
after an edit sees it.

``uses`` and ``problems`` read the partials a tool's templates name without
rendering them (for ``show`` and ``check``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import nodes

from .errors import InterpolationError, OrchestratorError, SecurityError
from .frozen import answer_by_identity
from .limits import DEFAULT_LIMITS, Limits
from .searchpath import SearchPath, builtin_tools, is_file, signature

if TYPE_CHECKING:
    from .tool import Tool

SUFFIX = ".jinja"
SUFFIXES = (".jinja", ".j2", ".jinja2")
INCLUDE_DEPTH = 32
"""How deep includes and imports may nest in one render: a partial that includes itself stops here."""

SUGGEST_FROM = 20_000  # files one "did you mean" looks at, at most


class PartialNotFound(jinja2.TemplateNotFound):
    """A partial that no folder holds (``{% include ... ignore missing %}`` passes over it).

    The message, with its "did you mean", is made when first read: a miss
    that ``ignore missing`` passes over looks at no folder.
    """

    def __init__(self, name: str, roots: Roots) -> None:
        self.roots = roots
        self._text: str | None = None
        super().__init__(name)

    @property  # type: ignore[override]
    def message(self) -> str:
        if self._text is None:
            folders = ", ".join(str(f) for f in self.roots.searched) or "no folder: this template belongs to no tool"
            guess = suggest(str(self.name), self.roots)
            hint = f"; did you mean {guess!r}?" if guess else ""
            self._text = f"partial {self.name!r} not found (a {SUFFIX} file in {folders}){hint}"
        return self._text

    @message.setter
    def message(self, value: Any) -> None:
        pass  # jinja2 sets the bare name: the property makes the real one

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class Roots:
    """Where a tool's partials are looked for: (folder, the folder its matches must stay in), in order."""

    folders: tuple[tuple[Path, Path], ...]

    @property
    def searched(self) -> tuple[Path, ...]:
        return tuple(dict.fromkeys(folder for folder, _ in self.folders))


def roots_of(tool: Tool | None, paths: tuple[SearchPath, ...]) -> Roots:
    """The folders ``tool``'s templates include from: its own folder, each search path it may use, then
    the ``authorities/`` folder beside each (so a named authority's templates find the partials it ships).

    The package's built-in tools folder is left out: it holds no partials.
    """
    if tool is None:
        return Roots(())
    folders: list[tuple[Path, Path]] = []
    if tool.path is not None:
        own = tool.path.parent
        folders.append((own, tool.root if tool.root is not None else own))
    builtin = builtin_tools()
    for sp in paths:
        if tool.trusted and not sp.trusted:
            continue  # someone else's text never renders where env may be open
        if sp.folder != builtin:  # the package's own tools hold no partials
            folders.append((sp.root, sp.root))
    for sp in paths:
        named = sp.root.parent / "authorities"
        if sp.folder != builtin and (sp.trusted or not tool.trusted) and named.is_dir():
            folders.append((named, named))
    return Roots(tuple(folders))


def file_name(name: str) -> str:
    """The file a partial name stands for: ``shared/preamble`` -> ``shared/preamble.jinja``.

    Raises:
        jinja2.exceptions.SecurityError: the name could leave its folder or names no partial file.
    """
    why = _refusal(name)
    if why:
        raise jinja2.exceptions.SecurityError(
            f"partial {name!r} refused: {why}; write a relative name like 'shared/preamble'"
        )
    return name if name.endswith(SUFFIXES) else name + SUFFIX


def _refusal(name: str) -> str | None:
    """Why ``name`` may not name a partial, or None. Nothing here touches the file system."""
    if not name or len(name) > DEFAULT_LIMITS.ref_length or "\x00" in name:
        return "a partial name is 1 to 1024 characters without NUL"
    if "\\" in name or name.startswith("/") or os.path.isabs(name) or ":" in name.split("/")[0]:
        return "absolute names are never partials"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "'..', '.' and empty segments are refused"
    if any(part.startswith(".") for part in parts):
        return "hidden files are never partials"
    return None


def resolve(name: str, roots: Roots) -> Path:
    """The file partial ``name`` names: the first folder of ``roots`` that holds it.

    Raises:
        jinja2.exceptions.SecurityError: a bad name, or a match that resolves outside its folder.
        PartialNotFound: no folder holds it.
    """
    relative = file_name(name)
    for folder, boundary in roots.folders:
        candidate = folder / relative
        if not is_file(candidate):
            continue
        try:
            real = candidate.resolve()
            inside = real.is_relative_to(boundary.resolve())
        except (OSError, ValueError, RuntimeError):
            continue
        if not inside:
            raise jinja2.exceptions.SecurityError(f"partial {name!r} refused: {candidate} resolves outside {boundary}")
        return real
    raise PartialNotFound(name, roots)


def suggest(name: str, roots: Roots) -> str | None:
    """The partial name closest to ``name`` among the partial files of ``roots``, or None."""
    close = difflib.get_close_matches(name, list(_names(roots)), n=1)
    return close[0] if close else None


def _names(roots: Roots) -> Iterator[str]:
    """The partial names ``roots`` hold, looking at ``SUGGEST_FROM`` files at most (a huge folder costs a bounded look)."""
    seen = 0
    for folder, _ in roots.folders:
        for top, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for file in files:
                seen += 1
                if seen > SUGGEST_FROM:
                    return
                if file.endswith(SUFFIXES) and not file.startswith("."):
                    relative = Path(top, file).relative_to(folder).as_posix()
                    yield relative[: -len(SUFFIX)] if relative.endswith(SUFFIX) else relative


class Loader(jinja2.BaseLoader):
    """Loads a partial by the real path ``resolve`` found; a loaded partial is current while its file is unchanged."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        from .budget import BUDGET, Refused
        from .loader import read_text

        path = Path(template)
        budget = BUDGET.get()
        limits = getattr(budget.variables, "limits", DEFAULT_LIMITS) if budget is not None else DEFAULT_LIMITS
        seen = signature(template)
        try:
            text = read_text(path, limits if isinstance(limits, Limits) else DEFAULT_LIMITS)
        except OrchestratorError as exc:
            raise Refused(f"partial {template}: {exc.detail}") from None
        return text, template, lambda: signature(template) == seen


# -- what a tool's templates name, read without rendering --------------------------------------


@dataclass(frozen=True, slots=True)
class Use:
    """A partial a tool's template names: where (``level``: ``prompt`` or a metadata key; ``line``), and what it is.

    ``path`` is the file it resolves to, None when it resolves to none;
    ``error`` then says why (not found, with "did you mean", or refused).
    ``via`` is the partial that names it, for one named by another partial.
    """

    name: str
    level: str
    line: int | None
    path: Path | None
    error: OrchestratorError | None = None
    via: str | None = None


def uses(tool: Tool, paths: tuple[SearchPath, ...]) -> list[Use]:
    """Every partial ``tool``'s prompt and metadata templates name, and the partials those name, in order.

    For ``show``: each with the file it resolves to now.
    """
    found: list[Use] = []
    sources: list[tuple[str, str, int | None]] = []
    if isinstance(tool.prompt, str) and "{%" in tool.prompt:  # partials are named by statements only
        sources.append(("prompt", tool.prompt, tool.prompt_line))
    for key, value in tool.metadata.items():
        if str(key).startswith("$") or not _holds_statement(value):
            continue  # annotations are never rendered; a value without a statement includes nothing
        for text in _strings(value):
            if "{%" in text:
                sources.append((str(key), text, tool.line_of(str(key))))
    if not sources:
        return found  # nothing to include from: the roots (a stat per search path) are not looked for
    roots = roots_of(tool, paths)
    seen: set[Path] = set()
    for level, text, first in sources:
        _follow(text, level, first, None, tool, roots, found, seen)
    return found


def problems(tool: Tool, paths: tuple[SearchPath, ...]) -> list[OrchestratorError]:
    """The partials ``tool``'s templates name that would fail: not found (with "did you mean") or refused.

    For ``check``: each an ``InterpolationError`` or ``SecurityError`` naming the tool, file, line and level.
    """
    return [use.error for use in uses(tool, paths) if use.error is not None]


def _follow(
    text: str,
    level: str,
    first: int | None,
    via: Path | None,
    tool: Tool,
    roots: Roots,
    found: list[Use],
    seen: set[Path],
) -> None:
    from .loader import read_text

    try:
        tree = _parser().parse(text)
    except jinja2.TemplateSyntaxError:
        return  # the render (and check's template reads) report it
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport)):
        name = getattr(getattr(node, "template", None), "value", None)
        if not isinstance(name, str):
            continue  # refused when the template compiles
        path_shown: Path | None
        line: int | None
        if via is not None:
            path_shown, line = via, node.lineno  # a partial naming another: its own file and line
        else:
            path_shown, line = tool.path, None if first is None else first + node.lineno - 1
        shown = None if via is None else str(via)
        try:
            path = resolve(name, roots)
        except PartialNotFound as exc:
            if not getattr(node, "ignore_missing", False):
                error = InterpolationError(str(exc.message), tool=tool.name, level=level, path=path_shown, line=line)
                found.append(Use(name, level, line, None, error, shown))
            continue
        except jinja2.exceptions.SecurityError as exc:
            refused = SecurityError(str(exc), tool=tool.name, level=level, path=path_shown, line=line)
            found.append(Use(name, level, line, None, refused, shown))
            continue
        found.append(Use(name, level, line, path, None, shown))
        if path not in seen:
            seen.add(path)
            try:
                inner = read_text(path)
            except OrchestratorError:
                continue  # the render says why
            _follow(inner, level, None, path, tool, roots, found, seen)


@lru_cache(maxsize=1)
def _parser() -> jinja2.Environment:
    """A plain environment: parsing (what ``uses`` does) needs the syntax only, not the sandbox."""
    return jinja2.Environment(keep_trailing_newline=True)


_STATEMENTS: dict[int, tuple[Any, bool]] = {}  # id(a frozen mapping or list) -> (it, _has_statement(it))


def _holds_statement(value: Any) -> bool:
    """``_has_statement(value)``, remembered by identity for a frozen mapping or list (``frozen.answer_by_identity``).

    A catalog's one shared ``params`` is walked once, not once per tool.
    """
    return answer_by_identity(_STATEMENTS, value, _has_statement)  # type: ignore[no-any-return]


def _has_statement(value: Any) -> bool:
    """Whether any string inside ``value`` holds ``{%``: a walk without generators (``check`` asks of every value)."""
    if isinstance(value, str):
        return "{%" in value
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        if value is None or isinstance(value, int | float) or not isinstance(value, Mapping | tuple):
            return False
        value = value.values() if isinstance(value, Mapping) else value
    return any(map(_has_statement, value))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
