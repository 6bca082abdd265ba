"""Inspection: what ``check`` does when no kept verdict answers: load, plan and check every file (SPEC section 8).

Nothing is invoked and no template is rendered: files are loaded, cascades
merged without args, chains built and sorted, and template strings compiled.
Every problem is collected, so one broken file never hides another. Warnings
point at likely typos: unknown frontmatter keys, and metadata keys that miss a
tool name by one edit (they silently become data instead of middleware).

Folders that tools add through ``paths:`` metadata and that the program does
not trust are read too: a tool there whose model's endpoint or key a file
from such a folder chose is reported at that file's line (an agent refuses
it at run time, ``orchestrator.agent.model.authorize_model``).

A module of its own so that a check answered by a kept verdict
(``orchestrator.verdicts``) imports none of the planner, the templates and
the schemas this needs.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .authorities import FOLDER_FILE, load_authority
from .cascade import make_level
from .collisions import check_collisions, check_middleware_args, check_replaced
from .errors import OrchestratorError, SecurityError, ToolNotFoundError
from .formats.rendering import leniency_note
from .frozen import TUPLE, answer_by_identity
from .interpolate import has_templates, is_template
from .loader import KNOWN_KEYS, read_text, split_frontmatter
from .ordering import build_chain
from .partials import problems as partial_problems
from .planner import order_names
from .problems import Report, name_line, where_key
from .registry import SearchPath, Snapshot
from .schema import schema_problems, validator_for
from .templates import check_reads, check_templates, holds_template, syntax_errors, templated_keys
from .tool import Tool
from .typos import NearNames, check_directives, did_you_mean, near_misses, suggest, unknown_keys
from .verdicts import walk

if TYPE_CHECKING:
    from .cascade import Level, Merged, Plan
    from .manager import Manager

AUTHORITY_KEYS = ("name", "description", "metadata", "phases", "inherit")
SCHEMA_KEYS = ("params", "returns")


def inspect_files(manager: Manager, run: Snapshot, looked: set[str]) -> Report:
    """The problems of every tool and authority file; ``looked`` gets the folders ``paths`` metadata names.

    ``run`` is the registry's snapshot the pass reads through (``Registry.snapshot()``).
    """
    report = Report(manager.cwd)
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
            _check_tool(manager, ref, path, names, near, report, run, reached, looked)
        except Exception as exc:  # a shape no step expected: still one problem, never a crash
            report.error(exc, path)
    _check_reached(manager, reached, report, run, looked)
    check_replaced(manager, replacing, report, run)
    for sp, ref, winner, loser, kind in manager.registry.clashes(user_paths):
        if kind == "name":
            report.add(
                loser,
                name_line(loser),
                f"the name {ref!r} is claimed by {report.shown(winner)} too, which wins (first in "
                f"{report.shown(sp.root)}); rename one of them",
            )
        else:
            report.warn(
                winner,
                name_line(winner),
                f"this tool's name {ref!r} hides {report.shown(loser)}, which no name reaches now; rename one",
            )
    for path, root in authority_files(manager):
        try:
            _check_authority(manager, path, root, near, report, run)
        except Exception as exc:
            report.error(exc, path)
    return report


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


def _check_tool(
    manager: Manager,
    ref: str,
    path: Path | None,
    names: frozenset[str],
    near: NearNames,
    report: Report,
    run: Snapshot,
    reached: dict[Path, tuple[SearchPath, ...]],
    looked: set[str],
) -> None:
    try:
        tool = manager.registry.find(ref, manager.paths, run)
    except Exception as exc:  # one broken file never stops the check
        report.error(exc, path)
        return
    unknown_keys(tool.frontmatter, KNOWN_KEYS, tool.path, tool.lines, report)
    if tool.format is not None:
        _check_adapted(manager, tool, names, report, run)
    templated = templated_keys(tool.metadata)  # walked once, for both template checks
    check_templates(tool.metadata, tool.path, tool.lines, report, templated)
    if tool.prompt is not None and is_template(tool.prompt):
        for err in syntax_errors(tool.prompt):
            line = tool.prompt_line + (err.lineno or 1) - 1
            report.add(tool.path, line, f"template syntax error in the prompt: {err.message or err}")
    for problem in partial_problems(tool, manager.paths):  # a missing partial (did you mean) or a refused name
        report.error(problem, tool.path)
    malformed = _check_shorthands(tool, report)
    near_misses(manager, tool.metadata, tool.path, tool.lines, near, report, run)
    try:
        plan = manager.planner.plan_once(tool, manager.paths, run)  # planned once per check: not kept
        merged = plan.raw
        verdicts = manager.planner.toolkeys(tool, merged, manager.paths, run)
        _check_chain(tool, merged, verdicts, plan.phases, run)
    except Exception as exc:
        report.error(exc, tool.path, tool.line_of("$order"))
        return
    _check_schemas(tool, plan, merged, report, malformed, templated)
    check_reads(tool, plan, report, templated)
    _check_agent_tools(manager, tool, plan, names, report, run)
    _check_model(tool, plan, report)
    check_directives(manager, tool, near, report, run)
    _check_names(manager, tool, plan, names, report, run)
    check_middleware_args(manager, tool, plan, verdicts, report, run, templated)
    check_collisions(manager, tool, plan, verdicts, report, run)
    for folder in _added_folders(tool, plan, looked):
        reached.setdefault(folder, ())


def _check_chain(
    tool: Tool, merged: Merged, verdicts: Iterable[tuple[str, bool, str]], phases: tuple[str, ...], run: Snapshot
) -> None:
    """Raise what building the tool's chain raises (a malformed ``$order``, a cycle): once per chain shape.

    The chain's order and its errors depend on its middleware keys, their
    ``$order`` values and the phases alone. A catalog's tools share them (one
    authority's ``$order`` objects), so a shape built without error is
    remembered for the run by those objects' identities (held, so no identity
    is reused); one that fails is built again for each tool, whose error names it.
    """
    keys = _middleware_keys(verdicts)
    specs = tuple(map(merged.order.get, keys))
    memo = ("chain", keys, tuple(map(id, specs)), phases)
    known = run.values.get(memo)
    if known is not None and all(map(operator.is_, known, specs)):
        return
    build_chain(tool, merged, verdicts, [], phases, {})
    run.values[memo] = specs


def _middleware_keys(verdicts: Iterable[tuple[str, bool, str]]) -> tuple[str, ...]:
    """The keys ``verdicts`` runs as middleware: by the verdicts' identity when shared (a key shape's usual ones,
    ``Planner.toolkeys``), so a catalog's tools pick them out once."""
    return answer_by_identity(  # type: ignore[no-any-return]
        _MIDDLEWARE_KEYS, verdicts, lambda v: tuple(key for key, middleware, _why in v if middleware), 1024, TUPLE
    )


_MIDDLEWARE_KEYS: dict[int, tuple[Any, Any]] = {}  # id(a tool's verdicts) -> (they, their middleware keys)


def _added_folders(tool: Tool, plan: Plan, looked: set[str] | None = None) -> list[Path]:
    """The folders a tool's (untemplated) ``paths`` metadata adds, resolved as the ``paths`` middleware does.

    ``looked`` gets each one named, there or not (a folder made later changes the check's verdict).
    """
    value = plan.raw.values.get("paths")
    if tool.path is None or value is None or has_templates(value):
        return []
    found = []
    for name in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        try:
            folder = (tool.path.parent / name).resolve()
            if looked is not None:
                looked.add(str(folder))
            if folder.is_dir():
                found.append(folder)
        except (OSError, TypeError, ValueError):
            continue  # not a folder: the paths middleware reports it when the tool runs
    return found


def _check_reached(
    manager: Manager, reached: dict[Path, tuple[SearchPath, ...]], report: Report, run: Snapshot, looked: set[str]
) -> None:
    """Tools in untrusted folders added by ``paths:``: a model whose endpoint or key an untrusted file chose.

    ``reached`` maps each folder to the untrusted search paths in front of it
    (a folder that a tool of an untrusted folder adds in turn).
    """
    if not reached:
        return
    from .agent.model import KEYLESS, route_line, route_setter, untrusted_roots  # the agent package: only when asked

    queue = list(reached.items())
    seen: set[Path] = set()
    while queue:
        folder, before = queue.pop(0)
        sp = manager.search_path(folder)
        if sp.trusted or folder in seen:
            continue
        seen.add(folder)
        looked.update(walk([str(folder)], manager.limits.folder_files) or ())  # its files, read without the registry
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
            _check_servers(tool, plan, paths, report)
            queue.extend((added, (sp, *before)) for added in _added_folders(tool, plan, looked))


def _check_servers(tool: Tool, plan: Plan, paths: tuple[SearchPath, ...], report: Report) -> None:
    """MCP servers a file from an untrusted folder declared: a call to one of their tools would be refused."""
    servers = plan.raw.values.get("mcp-servers")
    if not isinstance(servers, Mapping) or not servers:
        return
    from .remote import checked_server  # the MCP client's rules, only for a tool that declares servers

    for server, entry in servers.items():
        try:
            checked_server(str(server), entry, plan.levels, tool, paths)
        except SecurityError as exc:
            report.add(exc.path, exc.line, str(exc))
        except OrchestratorError:
            continue  # a malformed entry is reported where it is used


def _check_adapted(manager: Manager, tool: Tool, names: frozenset[str], report: Report, run: Snapshot) -> None:
    """A file of another format: what its adapter could not carry over, leniency, host tools, missing tools."""
    for line, message in tool.problems:
        report.warn(tool.path, line, f"{tool.format}: {message}")
    note = leniency_note(tool.metadata)
    if note is not None:
        report.warn(tool.path, None, f"{tool.format}: {note}")
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
                f"{did_you_mean(name, names)}",
            )


def _check_agent_tools(
    manager: Manager, tool: Tool, plan: Plan, names: frozenset[str], report: Report, run: Snapshot
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
            if "/" in name and _remote(manager, tool, name, paths, plan, report):
                continue
            report.add(
                *where_key(tool, plan, "tools"),
                f"tools names {name!r}, which is not a tool: an agent offered it fails on every run"
                f"{did_you_mean(name, names)}",
            )


def _remote(manager: Manager, tool: Tool, name: str, paths: tuple[SearchPath, ...], plan: Plan, report: Report) -> bool:
    """Whether ``name`` is an MCP server's tool (``NAME/TOOL``, ``NAME/*``), reporting what is wrong with its server.

    Nothing is started: the server must be declared and allowed where the
    agent runs (``orchestrator.remote.find_server``); ``check --remote``
    starts it to find the tool.
    """
    from .remote import find_server  # the MCP client's rules, only for a name with a folder that is no file

    try:
        return find_server(manager.registry, tool, name, paths) is not None
    except SecurityError as exc:
        report.error(exc, tool.path)  # at the file and line that declared the server
    except ToolNotFoundError as exc:  # no such server, but one close to it: did you mean
        report.add(*where_key(tool, plan, "tools"), exc.detail)
    except OrchestratorError as exc:
        report.add(*where_key(tool, plan, "tools"), f"tools names {name!r}: {exc.detail}")
    return True


def _check_model(tool: Tool, plan: Plan, report: Report) -> None:
    """A ``model`` that names no model (``model: fable``): every run fails, so say which aliases there are.

    Another format's file is warned of by its adapter (``orchestrator.formats.unknown_model``).
    """
    value = plan.raw.values.get("model")
    if tool.format is not None or not isinstance(value, (str, Mapping)) or has_templates(value):
        return
    from .agent.model import parse_model  # the agent package (hundreds of ms to import): only for a tool with a model

    try:
        parse_model(value, tool=tool.name, aliases=plan.raw.values.get("model-aliases"))
    except OrchestratorError as exc:
        what = f"model {value!r} names no model" if isinstance(value, str) else "model is not one a run can use"
        report.warn(*where_key(tool, plan, "model"), f"{what}, so a run fails: {exc.detail}")


def _check_authority(
    manager: Manager, path: Path, root: Path | None, near: NearNames, report: Report, run: Snapshot
) -> None:
    try:
        authority = load_authority(path, root, manager.limits)
        frontmatter = split_frontmatter(read_text(path, manager.limits), path, manager.limits)[0]
    except Exception as exc:
        report.error(exc, path)
        return
    unknown_keys(frontmatter, AUTHORITY_KEYS, path, authority.lines, report)
    check_templates(authority.metadata, path, authority.lines, report)
    near_misses(manager, authority.metadata, path, authority.lines, near, report, run)
    try:
        make_level(
            authority.name, "authority", authority.metadata, hide_private=False, path=path, lines=authority.lines
        )
        manager.authorities.chain(authority, manager.paths, run)
    except Exception as exc:
        report.error(exc, path)


def _check_shorthands(tool: Tool, report: Report) -> set[str]:
    """Each malformed Picoschema shorthand in the tool's own ``params``/``returns``, at its bad part's line.

    Returns the keys reported, which ``_check_schemas`` then leaves alone (one problem, at the precise line).
    """
    keys = set()
    for problem in schema_problems(tool):
        report.error(problem, tool.path)
        keys.add(str(problem.key).partition(".")[0])
    return keys


def _check_schemas(
    tool: Tool, plan: Plan, merged: Merged, report: Report, malformed: set[str], templated: list[str]
) -> None:
    for key in SCHEMA_KEYS:
        schema = merged.values.get(key)
        if schema is None or key in malformed or holds_template(tool, templated, key, schema):
            continue  # a templated schema is only known once args are
        try:
            validator_for(schema, tool.name, key)
        except OrchestratorError as exc:
            # Reported where the value was set (an authority's schema is wrong once, in its own file).
            source = merged.sources[key].level
            level = next((lv for lv in reversed(plan.levels) if lv.name == source and key in lv.data), None)
            path, line = (level.path, level.lines.get(key)) if level is not None else (tool.path, tool.line_of(key))
            report.add(
                path, line, f"{key!r} is not a valid JSON schema: {exc.detail.removeprefix('invalid JSON schema: ')}"
            )


NAMED = ("$remove", "$static", "$dynamic", "$private", "$locked")


def _check_names(
    manager: Manager, tool: Tool, plan: Plan, names: frozenset[str], report: Report, run: Snapshot
) -> None:
    """Names in annotations that match nothing: a typo there silently changes nothing."""
    # Built only when asked: most tools name nothing to look up, and a union with every name per tool is
    # quadratic over a catalog.
    known = _Known(plan.levels, names)
    for entry, name in plan.strays:  # found when the plan was made (``order_strays``)
        report.warn(
            *_where(tool, plan, "$order"),
            f"$order of {entry!r} names {name!r}, which is neither a key, a tool nor a phase "
            f"(the constraint is ignored){suggest(name, known.all())}",
        )
    phases = set(plan.phases)
    for entry, name in order_names(plan.raw.order)[1]:
        if name not in phases:
            report.warn(
                *_where(tool, plan, "$order"),
                f"$order of {entry!r} names the phase {name!r}, which is not one of this tool's phases "
                f"({', '.join(plan.phases)}){suggest(name, phases)}",
            )
    for level in plan.levels:
        if level.kind == "authority" or not level.annotations:
            continue  # an authority declares keys for every tool it governs, set or not; no annotation names none
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
                        f"{note} names {name!r}, which is neither a key nor a tool{suggest(name, known.all())}",
                    )


class _Known:
    """A tool's keys (those of its levels) and every tool name: the keys gathered and the union made on demand."""

    def __init__(self, levels: Iterable[Level], names: frozenset[str]) -> None:
        self.levels = levels
        self.names = names
        self._keys: set[str] | None = None

    @property
    def keys(self) -> set[str]:
        """Every key a level of the tool sets."""
        if self._keys is None:
            self._keys = {key for level in self.levels for key in level.data}
        return self._keys

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
