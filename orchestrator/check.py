"""check: load every tool and authority under the search paths and report every problem (SPEC section 8).

Nothing is invoked and no template is rendered: files are loaded, cascades
merged without args, chains built and sorted, and template strings compiled.
Every problem is collected, so one broken file never hides another. Warnings
point at likely typos: unknown frontmatter keys, and metadata keys that miss a
tool name by one edit (they silently become data instead of middleware).

Folders that tools add through ``paths:`` metadata and that the program does
not trust are read too: a tool there whose model's endpoint or key a file
from such a folder chose is reported at that file's line (an agent refuses
it at run time, ``orchestrator.agent.model.authorize_model``).
"""

from __future__ import annotations

import difflib
import gc
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any

import jinja2

from .agent.model import KEYLESS, route_line, route_setter, untrusted_roots
from .authorities import FOLDER_FILE, load_authority
from .cascade import make_level
from .directives import find_directives
from .errors import OrchestratorError, ValidationError
from .interpolate import compile_template, has_templates, is_template
from .loader import KNOWN_KEYS, read_text, split_frontmatter
from .ordering import build_chain
from .planner import order_strays
from .reads import reads
from .registry import SearchPath, Snapshot, close_refs
from .sandbox import meant
from .schema import check as check_schema
from .schema import fill_defaults, validator_for
from .tool import Tool

if TYPE_CHECKING:
    from .cascade import Merged, Plan
    from .manager import Manager

AUTHORITY_KEYS = ("name", "description", "metadata", "phases", "inherit")
SCHEMA_KEYS = ("params", "returns")
# Shorter keys (log, cwd, tag, dog ...) are one edit from too many words to be worth a warning.
MIN_TYPO_LENGTH = 4


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of ``check``: where it is, what it is, and whether it fails the check."""

    path: str | None
    line: int | None
    message: str
    severity: str = "error"  # 'error' | 'warning'

    def __str__(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        if self.path is None:
            return f"{label}{self.message}"
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {label}{self.message}"


def check(manager: Manager) -> list[Problem]:
    """Every problem in the tools and authorities of ``manager``'s search paths (not the built-ins).

    Problems are sorted by file and line; each is reported once.
    """
    with manager.registry.snapshot() as run, _collector_paused():  # one look at each file and folder
        return _check(manager, run)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the pass, back as it was after.

    A check keeps what it loads (the caches) and frees little: over 10,000
    tools the collector's full passes over that growing heap took ~2 of 7 s,
    finding nothing to free. Cycles made meanwhile are collected afterwards.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _check(manager: Manager, run: Snapshot) -> list[Problem]:
    report = _Report(manager.cwd)
    user_paths = manager.paths[:-1]
    names = frozenset(ref for ref, _path, _sp in manager.registry.discover(manager.paths, parse=True))
    near = NearNames(names)
    reached: dict[Path, tuple[SearchPath, ...]] = {}
    builtins = manager.registry.names(manager.paths[-1], (), run).refs
    replacing: list[tuple[str, Path]] = []
    for ref, path, _sp in manager.registry.discover(user_paths, parse=True):
        if ref in builtins and path is not None:
            replacing.append((ref, path))
        try:
            _check_tool(manager, ref, path, names, near, report, run, reached)
        except Exception as exc:  # a shape no step expected: still one problem, never a crash
            report.error(exc, path)
    _check_reached(manager, reached, report, run)
    _check_replaced(manager, replacing, report, run)
    for sp, ref, winner, loser, kind in manager.registry.clashes(user_paths):
        if kind == "name":
            report.add(
                loser,
                _name_line(loser),
                f"the name {ref!r} is claimed by {report.shown(winner)} too, which wins (first in "
                f"{report.shown(sp.root)}); rename one of them",
            )
        else:
            report.warn(
                winner,
                _name_line(winner),
                f"this tool's name {ref!r} hides {report.shown(loser)}, which no name reaches now; rename one",
            )
    for path, root in authority_files(manager):
        try:
            _check_authority(manager, path, root, near, report, run)
        except Exception as exc:
            report.error(exc, path)
    return report.problems()


def authority_files(manager: Manager) -> Iterator[tuple[Path, Path | None]]:
    """Every user authority file with the root to load it against: named ones, then ``AUTHORITY.md``."""
    builtin = manager.authorities.builtin.resolve()
    for folder in manager.authorities.folders(manager.paths):
        if folder.resolve() == builtin or not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.md")):
            if path.name != "README.md":
                yield path, None
    for sp in manager.paths[:-1]:
        for path in _folder_authorities(sp):
            yield path, sp.root


def _folder_authorities(sp: SearchPath) -> Iterator[Path]:
    if not sp.root.is_dir():
        return
    for folder, dirs, files in os.walk(sp.root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))  # as discovery skips them
        if FOLDER_FILE in files:
            yield Path(folder, FOLDER_FILE)


def one_edit_apart(a: str, b: str) -> bool:
    """True when one insertion, deletion, substitution or swap of neighbours turns ``a`` into ``b``."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        swapped = start + 1 < len(a) and a[start] == b[start + 1] and a[start + 1] == b[start]
        return a[start + 1 :] == b[start + 1 :] or (swapped and a[start + 2 :] == b[start + 2 :])
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return shorter[start:] == longer[start + 1 :]


class NearNames:
    """Names indexed by their deletion neighbourhoods: which lie one edit from a key, without comparing all pairs.

    Two strings one insertion, deletion, substitution or swap of neighbours
    apart always share a string made by deleting at most one character from
    each (a swap ``xPQy``/``xQPy``: both give ``xQy``). So a key's candidates
    are the names filed under the key and its one-character deletions, a
    handful of dict lookups; ``one_edit_apart`` then decides each candidate,
    so the answer is exactly the all-pairs one.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.by_variant: dict[str, set[str]] = {}
        for name in names:
            for variant in _deletions(name):
                self.by_variant.setdefault(variant, set()).add(name)
        self.compared = 0  # candidates given to one_edit_apart: what tests count instead of time

    def near(self, key: str) -> list[str]:
        """The names one edit from ``key`` (never ``key`` itself), sorted."""
        candidates: set[str] = set()
        for variant in _deletions(key):
            candidates.update(self.by_variant.get(variant, ()))
        self.compared += len(candidates)
        return sorted(name for name in candidates if one_edit_apart(key, name))


def _deletions(text: str) -> set[str]:
    """``text`` and every string one character shorter made from it."""
    return {text, *(text[:i] + text[i + 1 :] for i in range(len(text)))}


class _Report:
    """Collects problems, with paths shown relative to the working directory when inside it."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.found: dict[Problem, None] = {}

    def add(self, path: Path | str | None, line: int | None, message: str, severity: str = "error") -> None:
        self.found.setdefault(Problem(self._show(path), line, message, severity))

    def warn(self, path: Path | str | None, line: int | None, message: str) -> None:
        self.add(path, line, message, "warning")

    def error(self, exc: Exception, path: Path | None, line: int | None = None) -> None:
        """Report an exception; its own file and line win over the fallback ``path``/``line``."""
        if not isinstance(exc, OrchestratorError):
            self.add(path, line, f"internal error while checking: {type(exc).__name__}: {exc}")
            return
        message = str(exc)
        if exc.where and message.startswith(exc.where + ": "):
            message = message[len(exc.where) + 2 :]
        if exc.path is not None:
            path, line = Path(exc.path), exc.line
        self.add(path, line, message)

    def shown(self, path: Path | str) -> str:
        """A path as problems show it."""
        return self._show(path) or str(path)

    def problems(self) -> list[Problem]:
        return sorted(self.found, key=lambda p: (p.path or "", p.line or 0))

    def _show(self, path: Path | str | None) -> str | None:
        if path is None:
            return None
        try:
            return str(Path(path).relative_to(self.cwd))
        except ValueError:
            return str(path)


def _check_tool(
    manager: Manager,
    ref: str,
    path: Path | None,
    names: frozenset[str],
    near: NearNames,
    report: _Report,
    run: Snapshot,
    reached: dict[Path, tuple[SearchPath, ...]],
) -> None:
    try:
        tool = manager.registry.find(ref, manager.paths, run)
    except Exception as exc:  # one broken file never stops the check
        report.error(exc, path)
        return
    _unknown_keys(tool.frontmatter, KNOWN_KEYS, tool.path, tool.lines, report)
    if tool.format is not None:
        _check_adapted(manager, tool, names, report, run)
    _check_templates(tool.metadata, tool.path, tool.lines, report)
    if tool.prompt is not None and is_template(tool.prompt):
        for err in _syntax_errors(tool.prompt):
            line = tool.prompt_line + (err.lineno or 1) - 1
            report.add(tool.path, line, f"template syntax error in the prompt: {err.message or err}")
    _near_misses(manager, tool.metadata, tool.path, tool.lines, near, report, run)
    try:
        plan = manager.planner.plan(tool, manager.paths, run)
        merged = plan.raw
        verdicts = manager.planner.toolkeys(tool, merged, manager.paths, run)
        build_chain(tool, merged, verdicts, [], plan.phases, {})
    except Exception as exc:
        report.error(exc, tool.path, tool.line_of("$order"))
        return
    _check_schemas(tool, plan, merged, report)
    _check_reads(tool, plan, report)
    _check_agent_tools(manager, tool, plan, names, report, run)
    _check_directives(manager, tool, near, report, run)
    _check_names(manager, tool, plan, names, report, run)
    _check_middleware_args(manager, tool, plan, verdicts, report, run)
    _check_collisions(manager, tool, plan, verdicts, report, run)
    for folder in _added_folders(tool, plan):
        reached.setdefault(folder, ())


def _added_folders(tool: Tool, plan: Plan) -> list[Path]:
    """The folders a tool's (untemplated) ``paths`` metadata adds, resolved as the ``paths`` middleware does."""
    value = plan.raw.values.get("paths")
    if tool.path is None or value is None or has_templates(value):
        return []
    found = []
    for name in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        try:
            folder = (tool.path.parent / name).resolve()
            if folder.is_dir():
                found.append(folder)
        except (OSError, TypeError, ValueError):
            continue  # not a folder: the paths middleware reports it when the tool runs
    return found


def _check_reached(
    manager: Manager, reached: dict[Path, tuple[SearchPath, ...]], report: _Report, run: Snapshot
) -> None:
    """Tools in untrusted folders added by ``paths:``: a model whose endpoint or key an untrusted file chose.

    ``reached`` maps each folder to the untrusted search paths in front of it
    (a folder that a tool of an untrusted folder adds in turn).
    """
    queue = list(reached.items())
    seen: set[Path] = set()
    while queue:
        folder, before = queue.pop(0)
        sp = manager.search_path(folder)
        if sp.trusted or folder in seen:
            continue
        seen.add(folder)
        paths = (sp, *before, *manager.paths)
        for ref, _path, _sp in manager.registry.discover((sp,), parse=True):
            try:
                tool = manager.registry.find(ref, paths, run)
                plan = manager.planner.plan(tool, paths, run)
            except Exception:  # noqa: S112 - its own problems show when it is used; only routes are checked here
                continue
            model = plan.raw.values.get("model")
            provider = model.partition(":")[0] if isinstance(model, str) else None
            if isinstance(model, Mapping):
                provider = model.get("provider")
            found = route_setter(plan.levels, tool, paths, untrusted_roots(tool, paths)) if model else None
            if found is not None and provider not in KEYLESS:
                level, message = found
                report.add(level.path, route_line(level), message)
            queue.extend((added, (sp, *before)) for added in _added_folders(tool, plan))


def _name_line(path: Path) -> int | None:
    """The line of a top-level ``name:`` in a file's frontmatter (or ``"name":`` in a python tool), if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, 1):
                if line.startswith("name:") or line.lstrip().startswith(('"name":', "'name':")):
                    return number
                if number > 200:
                    break
    except OSError:
        return None
    return None


def _check_adapted(manager: Manager, tool: Tool, names: frozenset[str], report: _Report, run: Snapshot) -> None:
    """A file of another format: what its adapter could not carry over, host tools, tools that do not exist."""
    for line, message in tool.problems:
        report.warn(tool.path, line, f"{tool.format}: {message}")
    host = tool.metadata.get("host-tools")
    if host:
        report.warn(
            tool.path,
            tool.line_of("host-tools"),
            f"{tool.format}: host tools {', '.join(map(str, host))} are kept as data: never offered to a model, "
            "never run",
        )
    for name in tool.metadata.get("tools") or ():
        if isinstance(name, str) and not manager.registry.exists(name, manager.paths, run):
            report.warn(
                tool.path,
                tool.line_of("tools"),
                f"{tool.format}: {name!r} is not a tool in the search paths: the model cannot call it"
                f"{_did_you_mean(name, names)}",
            )


def _did_you_mean(name: str, refs: Iterable[str]) -> str:
    """``; did you mean 'a' or 'b'?`` with the refs ``name`` may have meant (``close_refs``), else ``""``."""
    close = close_refs(name, refs)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def _check_agent_tools(
    manager: Manager, tool: Tool, plan: Plan, names: frozenset[str], report: _Report, run: Snapshot
) -> None:
    """Names in ``tools`` that are not tools: an agent fails on every run, before asking its model anything.

    Looked up as the agent looks them up: in the search paths, with the
    folders the tool's ``paths`` adds in front (a templated ``paths`` or
    ``tools`` is only known at run time). Another format's file is checked by
    ``_check_adapted``.
    """
    value = plan.raw.values.get("tools")
    if tool.format is not None or not isinstance(value, list) or has_templates(plan.raw.values.get("paths")):
        return
    paths = (*(manager.search_path(folder) for folder in _added_folders(tool, plan)), *manager.paths)
    for name in value:
        if isinstance(name, str) and not is_template(name) and not manager.registry.exists(name, paths, run):
            report.add(
                *_where_key(tool, plan, "tools"),
                f"tools names {name!r}, which is not a tool: an agent offered it fails on every run"
                f"{_did_you_mean(name, names)}",
            )


def _check_directives(manager: Manager, tool: Tool, near: NearNames, report: _Report, run: Snapshot) -> None:
    """A directive one edit from a tool name: it names no tool, so it stays text (most likely a typo)."""
    prompt = tool.prompt
    if not isinstance(prompt, str) or ":" not in prompt:
        return
    for directive in find_directives(prompt):
        name = directive.name
        if len(name) < MIN_TYPO_LENGTH or manager.registry.exists(name, manager.paths, run):
            continue
        close = near.near(name)
        if close:
            report.warn(
                tool.path,
                tool.prompt_line + directive.line - 1,
                f"directive :{name} names no tool, so it stays text; did you mean {close[0]!r}?",
            )


# The variables every template has (R-CAS-3); ``reads`` reports the rest.
VARIABLES = ("args", "meta", "tool", "locals", "cwd", "env")
_FREE_SCHEMA = ("$ref", "allOf", "anyOf", "oneOf", "patternProperties", "if", "dependentSchemas")


def _check_reads(tool: Tool, plan: Plan, report: _Report) -> None:
    """Template reads no render can satisfy: a name that is no variable, a key ``params`` and the metadata lack.

    The prompt and the tool's own metadata templates are read (an authority's
    serve tools with other params). ``args.KEY`` is checked when the merged
    ``params`` is an object schema listing ``properties``; ``meta.KEY``
    against every key the cascade sets. A read guarded with ``is defined``
    or ``| default`` is never reported.
    """
    sources: list[tuple[str, str, int | None, int]] = []
    if tool.prompt is not None and is_template(tool.prompt):
        sources.append(("the prompt", tool.prompt, tool.prompt_line, 1))
    for key, value in tool.metadata.items():
        if not str(key).startswith("$"):
            sources.extend((f"metadata key {key!r}", text, tool.lines.get(key), 0) for text in _strings(value))
    if not sources:
        return
    values = plan.raw.values
    params = values.get("params")
    declared: list[str] | None = None
    if isinstance(params, Mapping) and isinstance(params.get("properties"), Mapping) and not has_templates(params):
        if not any(key in params for key in _FREE_SCHEMA):
            declared = [str(key) for key in params["properties"]]
    variables: dict[str, Any] = dict.fromkeys(VARIABLES, ())
    variables |= {"args": declared or (), "meta": values}
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
            guess = meant(read.name, read.key, variables)
            hint = f"did you mean {guess!r}?" if guess else "declare it, or guard it (| default(...), is defined)"
            report.add(tool.path, line, f"{what}: every render of it fails; {hint}")


def _check_authority(
    manager: Manager, path: Path, root: Path | None, near: NearNames, report: _Report, run: Snapshot
) -> None:
    try:
        authority = load_authority(path, root, manager.limits)
        frontmatter = split_frontmatter(read_text(path, manager.limits), path, manager.limits)[0]
    except Exception as exc:
        report.error(exc, path)
        return
    _unknown_keys(frontmatter, AUTHORITY_KEYS, path, authority.lines, report)
    _check_templates(authority.metadata, path, authority.lines, report)
    _near_misses(manager, authority.metadata, path, authority.lines, near, report, run)
    try:
        make_level(
            authority.name, "authority", authority.metadata, hide_private=False, path=path, lines=authority.lines
        )
        manager.authorities.chain(authority, manager.paths, run)
    except Exception as exc:
        report.error(exc, path)


def _unknown_keys(
    frontmatter: Mapping[str, Any], known: Iterable[str], path: Path | None, lines: Mapping[str, int], report: _Report
) -> None:
    known = tuple(known)
    for key in frontmatter:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        report.warn(path, lines.get(key), f"unknown frontmatter key {key!r} is ignored{hint}")


def _check_templates(metadata: Mapping[str, Any], path: Path | None, lines: Mapping[str, int], report: _Report) -> None:
    for key, value in metadata.items():
        if str(key).startswith("$"):
            continue  # annotations are never interpolated (R-CAS-3)
        for source in _strings(value):
            for err in _syntax_errors(source):
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


def _syntax_errors(source: str) -> list[jinja2.TemplateSyntaxError]:
    try:
        compile_template(source)
    except jinja2.TemplateSyntaxError as err:
        return [err]
    return []


def _near_misses(
    manager: Manager,
    metadata: Mapping[str, Any],
    path: Path | None,
    lines: Mapping[str, int],
    near: NearNames,
    report: _Report,
    run: Snapshot,
) -> None:
    static = metadata.get("$static")
    deliberate = {static} if isinstance(static, str) else set(static) if isinstance(static, list) else set()
    for key in metadata:
        if not isinstance(key, str) or key.startswith("$") or key in deliberate or len(key) < MIN_TYPO_LENGTH:
            continue
        if manager.registry.exists(key, manager.paths, run):
            continue
        close = near.near(key)
        if close:
            report.warn(path, lines.get(key), f"metadata key {key!r} is not a tool; did you mean {close[0]!r}?")


def _check_schemas(tool: Tool, plan: Plan, merged: Merged, report: _Report) -> None:
    for key in SCHEMA_KEYS:
        schema = merged.values.get(key)
        if schema is None or has_templates(schema):
            continue  # a templated schema is only known once args are
        try:
            validator_for(schema, tool.name)
        except OrchestratorError as exc:
            # Reported where the value was set (an authority's schema is wrong once, in its own file).
            source = merged.sources[key].level
            level = next((lv for lv in reversed(plan.levels) if lv.name == source and key in lv.data), None)
            path, line = (level.path, level.lines.get(key)) if level is not None else (tool.path, tool.line_of(key))
            report.add(
                path, line, f"{key!r} is not a valid JSON schema: {exc.detail.removeprefix('invalid JSON schema: ')}"
            )


NAMED = ("$remove", "$static", "$dynamic", "$private", "$locked")


def _suggest(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_names(
    manager: Manager, tool: Tool, plan: Plan, names: frozenset[str], report: _Report, run: Snapshot
) -> None:
    """Names in annotations that match nothing: a typo there silently changes nothing."""
    keys = {key for level in plan.levels for key in level.data}
    # Built only when a suggestion is due: a union with every name per tool is quadratic over a catalog.
    known = _Known(keys, names)
    for entry, name in order_strays(plan.raw, lambda n: manager.registry.exists(n, manager.paths, run)):
        report.warn(
            *_where(tool, plan, "$order"),
            f"$order of {entry!r} names {name!r}, which is neither a key, a tool nor a phase "
            f"(the constraint is ignored){_suggest(name, known.all())}",
        )
    phases = set(plan.phases)
    for entry, spec in plan.raw.order.items():
        for field_ in ("before", "after"):
            value = spec.get(field_)
            for name in [value] if isinstance(value, str) else value or ():
                if isinstance(name, str) and name.startswith("$") and name not in phases:
                    report.warn(
                        *_where(tool, plan, "$order"),
                        f"$order of {entry!r} names the phase {name!r}, which is not one of this tool's phases "
                        f"({', '.join(plan.phases)}){_suggest(name, phases)}",
                    )
    for level in plan.levels:
        if level.kind == "authority":
            continue  # an authority declares keys for every tool it governs, set or not
        for note in NAMED:
            value = level.annotations.get(note)
            for name in [value] if isinstance(value, str) else value or ():
                if (
                    isinstance(name, str)
                    and not known.has(name)
                    and not manager.registry.exists(name, manager.paths, run)
                ):
                    report.warn(
                        level.path,
                        level.lines.get(note),
                        f"{note} names {name!r}, which is neither a key nor a tool{_suggest(name, known.all())}",
                    )


class _Known:
    """A tool's keys and every tool name: membership without copying the names, the union only on demand."""

    def __init__(self, keys: set[str], names: frozenset[str]) -> None:
        self.keys = keys
        self.names = names

    def has(self, name: str) -> bool:
        """True when ``name`` is one of the keys or a tool name."""
        return name in self.keys or name in self.names

    def all(self) -> set[str]:
        """The union, for a suggestion."""
        return self.keys | self.names


def _where(tool: Tool, plan: Plan, key: str) -> tuple[Path | None, int | None]:
    """The file and line of the nearest level that sets annotation ``key``."""
    for level in reversed(plan.levels):
        if key in level.annotations:
            return level.path, level.lines.get(key)
    return tool.path, tool.line_of(key)


def _check_middleware_args(
    manager: Manager,
    tool: Tool,
    plan: Plan,
    verdicts: Iterable[tuple[str, bool, str]],
    report: _Report,
    run: Snapshot,
) -> None:
    """A middleware key's value is that middleware's args: check it against the middleware's params, statically."""
    for key, middleware, _why in verdicts:
        value = plan.raw.values.get(key)
        if not middleware or has_templates(value):
            continue  # templated args are only known at run time
        try:
            _check_args(manager, key, value, run)
        except ValidationError as exc:
            path, line = _where_key(tool, plan, key)
            failures = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in exc.errors)
            found = manager.planner.target(key, manager.paths, run)
            report.add(
                path,
                line,
                f"{key!r} runs the middleware {found[1] if found else key} with args that fail its params: "
                f"{failures}; if {key!r} is meant as data, list it in $static",
            )
        except OrchestratorError:
            continue  # the middleware's own problems are reported on its own file


def _check_collisions(
    manager: Manager,
    tool: Tool,
    plan: Plan,
    verdicts: Iterable[tuple[str, bool, str]],
    report: _Report,
    run: Snapshot,
) -> None:
    """A key that runs a tool not written as middleware: most likely data that shares a tool's name (issue 25).

    Reported once, where the key is set (an authority's key once for all the
    tools it governs), naming the tool it runs and the fixes. Quiet for a
    tool declared ``role: middleware``, a built-in (a user tool in a
    built-in's place is reported on its own file), a registered function, a
    key listed in ``$dynamic``, and a python tool whose code uses
    ``ctx.target`` (middleware written before ``role`` was declared).
    """
    for key, middleware, _why in verdicts:
        if not middleware or key in plan.raw.dynamic:
            continue
        memo = ("attachable", key)  # the same few keys (the built-ins) in every tool: asked once per check
        attachable = run.values.get(memo)
        if attachable is None:
            attachable = run.values[memo] = manager.planner.attachable(key, manager.paths, run)
        if attachable:
            continue
        try:
            named = manager.registry.find(key, manager.paths, run)
        except OrchestratorError:
            continue  # its own problems are reported on its own file
        if named.path is None or named.kind == "function" or _uses_target(named):
            continue
        if manager.registry.exists(key, manager.paths[-1:], run):
            continue  # a tool in a built-in's place: _check_replaced reports it on its own file
        runs = report.shown(named.path)
        if named.kind == "python":
            what = "its code never uses ctx.target: it runs in place of each tool the key is set for"
        elif _model_of(manager, named, run) is None:
            what = "a markdown template: its text replaces the result of each tool the key is set for"
        else:
            what = "a model's answer replaces the result of each tool the key is set for"
        report.warn(
            *_where_key(tool, plan, key),
            f"{key!r} runs {runs} as middleware (the value as its args), but {runs} is not declared "
            f"role: middleware ({what}); if {key!r} is data, write $static: [{key}] beside it or rename it; "
            f"if {runs} is middleware, give it role: middleware; to make every such key data, "
            "set $attach: middleware in an AUTHORITY.md above",
        )


def _model_of(manager: Manager, tool: Tool, run: Snapshot) -> Any:
    """The merged ``model`` of ``tool`` (None when it has none, or its cascade fails: reported on its own file)."""
    try:
        return manager.planner.plan(tool, manager.paths, run).raw.values.get("model")
    except OrchestratorError:
        return None


def _uses_target(tool: Tool) -> bool:
    """True when a python tool's module mentions ``target`` (``ctx.target``, ``ctx_target``): written to wrap.

    Code objects of the module's functions are read (names, never run), nested
    functions included. A callable without code (an object) counts as using it:
    ``check`` says nothing it cannot see.
    """
    fn = tool.fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return tool.kind == "python"
    module = getattr(fn, "__globals__", {})
    codes = [code, *(v.__code__ for v in module.values() if isinstance(v, FunctionType) and v.__globals__ is module)]
    while codes:
        current = codes.pop()
        if "target" in current.co_names or "ctx_target" in current.co_names:
            return True
        codes.extend(c for c in current.co_consts if isinstance(c, CodeType))
    return False


def _check_replaced(manager: Manager, replacing: Iterable[tuple[str, Path]], report: _Report, run: Snapshot) -> None:
    """User tools named like a built-in: they run wherever the built-in would, for every tool (issue 25)."""
    default = manager.authorities.named("default", manager.paths, run)
    pipeline = {k for k in default.metadata if not str(k).startswith("$")} if default is not None else set()
    builtins = manager.registry.names(manager.paths[-1], (), run).refs
    for ref, path in replacing:
        builtin = builtins[ref][0].name
        if ref in pipeline:
            where = f"the default authority runs {ref!r} in every tool's pipeline, so every tool runs this file"
        else:
            where = f"every tool that runs {ref!r} (a metadata key naming it, or the engine) runs this file"
        report.warn(
            path,
            _name_line(path),
            f"this tool takes the place of the built-in {ref!r} (built-in {builtin}): {where} in its place; "
            "rename it, unless replacing the built-in is what you mean",
        )


def _check_args(manager: Manager, key: str, value: Any, run: Snapshot) -> None:
    """Check ``value`` against the params of the middleware ``key``: once per value object, not once per tool.

    An authority's middleware args are one object shared by every tool it
    governs (a catalog's 10,000 tools, 8 built-ins each): the verdict is
    remembered by the value's identity, the value held so the identity stays its own.

    Raises:
        ValidationError: the args fail the params (remembered, raised each time).
        OrchestratorError: the middleware cannot be found, loaded or resolved.
    """
    memo = ("args", key, id(value))
    known = run.values.get(memo)
    if known is not None and known[0] is value:
        if known[1] is not None:
            raise known[1].with_traceback(None)
        return
    params = _params_of(manager, key, run)
    failure = None
    if params is not None and not has_templates(params):
        try:
            check_schema(params, fill_defaults(params, value), ValidationError, key)
        except ValidationError as exc:
            failure = exc
    run.values[memo] = (value, failure)
    if failure is not None:
        raise failure


def _params_of(manager: Manager, key: str, run: Snapshot) -> Any:
    """The merged ``params`` of the middleware ``key`` names: described once per check, not once per tool using it.

    Raises:
        OrchestratorError: the middleware cannot be found, loaded or resolved (remembered, raised each time).
    """
    memo = ("params", key)
    known = run.values.get(memo, _NONE)
    if known is _NONE:
        try:
            known = manager.describe(key, checked=run).params
        except OrchestratorError as exc:
            known = exc
        run.values[memo] = known
    if isinstance(known, OrchestratorError):
        raise known.with_traceback(None)
    return known


_NONE = object()


def _where_key(tool: Tool, plan: Plan, key: str) -> tuple[Path | None, int | None]:
    source = plan.raw.sources.get(key)
    for level in reversed(plan.levels):
        if source is not None and level.name == source.level and key in level.data:
            return level.path, level.lines.get(key)
    return tool.path, tool.line_of(key)
