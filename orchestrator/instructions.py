"""Instruction files beside the code, added to an agent's system prompt when they apply.

The files developers keep for their coding agents, read as their hosts read
them (the host names are what ``instructions: {hosts: [...]}`` takes):

- ``agents``: ``AGENTS.md`` in the working folder and each folder above it
  up to the project root; ``claude``: ``CLAUDE.md``, ``.claude/CLAUDE.md``
  and ``CLAUDE.local.md`` the same way. Always
  applied, the root's first and the working folder's last (the nearest
  wins when they disagree, as both hosts say).
- ``copilot``: ``.github/copilot-instructions.md`` (always) and
  ``.github/instructions/*.instructions.md``, applied when a file matches
  their ``applyTo`` globs (a string, comma-separated, or a list).
- ``cursor``: ``.cursor/rules/*.mdc``: ``alwaysApply: true`` always, else by
  ``globs``. A rule with only a ``description`` is one Cursor's model asks
  for; toolcascade does not, and says so.
- ``toolcascade``: ``.toolcascade/instructions/*.md``, our own, whose
  frontmatter may say ``applies-to-tools: [bash]`` (added to the
  conversation right after the agent's first call to one of those tools)
  and ``globs``; with neither it always applies.

The project root is the nearest folder, from the working folder
(``ctx.cwd``) up, that holds ``.git`` (a folder, or a worktree's file); with
none, the outermost search path holding the working folder; else the
working folder itself. The ``.github``, ``.cursor`` and ``.toolcascade``
folders are read at the root.

Globs (wcmatch: ``**``, ``{a,b}``; a pattern without ``/`` matches a file's
name in any folder, ``applyTo: "**"`` matches always) are matched against
the files a call names: every string in its args (nested too) that is a
path inside the project, an existing file or folder or a new file in an
existing folder, relative to the root. A glob that matches none of the
call's files may still match one a tool call of the agent names: the
instruction is then added after that turn, as a tool trigger is.

Reading them is opt-in per folder through the merged metadata:
``instructions: true`` (every host), ``{hosts: [agents, cursor]}`` or
``false`` (the default: an agent's prompt does not change with the folder
it runs in). Bodies are text, never templates. A file whose frontmatter
its host would ignore is not applied, and ``instruction_problems`` reports
it for ``check``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, ToolDefinitionError
from .limits import DEFAULT_LIMITS, Limits
from .loader import cut_frontmatter, load_yaml, read_text
from .problems import Problem

if TYPE_CHECKING:
    pass

HOSTS = ("agents", "claude", "copilot", "cursor", "toolcascade")
"""The hosts whose instruction files can be read, as ``instructions.hosts`` names them."""
EVENT = "agent.instructions"
"""The event an agent emits with ``files``: each instruction file's verdict (``Verdict`` as a dict)."""
MAX_STRINGS = 1_000
"""Strings of a call's args looked at as paths, at most (each costs a stat)."""

_KEYS = {
    "copilot": ("applyTo", "description", "name", "excludeAgent"),
    "cursor": ("alwaysApply", "globs", "description"),
    "toolcascade": ("applies-to-tools", "globs", "description"),
}
_NEAREST = (
    ("agents", "AGENTS.md"),
    ("claude", "CLAUDE.md"),
    ("claude", ".claude/CLAUDE.md"),
    ("claude", "CLAUDE.local.md"),  # a person's own, untracked
)
_ALWAYS = frozenset({"**", "**/*"})
_KEY_LINE = re.compile(r"^([A-Za-z][\w-]*):[ \t]*(.*?)[ \t]*$")


@dataclass(frozen=True, slots=True)
class Instruction:
    """One instruction file as read: where it is, its text, and when its host applies it.

    ``problem`` (at ``line``) says why its host would ignore it; such a file
    is never applied. ``notes`` are keys its host skips (a misspelt
    ``alwaysApply``): the file is read as the host reads it, without them.
    """

    path: Path
    file: str  # relative to the project root, with /
    host: str
    text: str
    always: bool = False
    globs: tuple[str, ...] = ()
    glob_key: str = "globs"
    tools: tuple[str, ...] = ()
    description: str | None = None
    problem: str | None = None
    line: int | None = None
    severity: str = "error"
    notes: tuple[tuple[int, str, str], ...] = ()  # (line, message, severity): keys its host skips, file still read


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether one instruction file applies to a call, and why: what ``show`` and ``run --verbose`` print.

    ``when`` is ``start`` (in the system prompt from the first request),
    ``after-call`` (added once a tool call brings it in) or ``never``.
    """

    file: str
    host: str
    applied: bool
    reason: str
    when: str

    def __str__(self) -> str:
        """One line for a person: ``AGENTS.md (agents): applied: always applied: ...``."""
        return f"{self.file} ({self.host}): {'applied: ' if self.applied else ''}{self.reason}"


def project_root(cwd: Path, paths: Iterable[Path] = ()) -> Path:
    """The root instruction files are read up to: the nearest folder holding ``.git``, else a search path, else cwd."""
    cwd = Path(cwd).resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    holding = [Path(p).resolve() for p in paths if cwd.is_relative_to(Path(p).resolve())]
    return min(holding, key=lambda p: len(p.parts)) if holding else cwd


def chosen_hosts(meta: Mapping[str, Any], tool: str | None = None) -> tuple[str, ...]:
    """The hosts whose files an agent reads, from its ``instructions`` metadata (none by default).

    Raises:
        ConfigurationError: ``instructions`` is not a boolean or ``{hosts: [...]}`` of known hosts.
    """
    value = meta.get("instructions")
    if value is None or value is False:
        return ()
    if value is True:
        return HOSTS
    wrong = f"instructions must be true, false or {{hosts: [{', '.join(HOSTS)}], tools: {{TOOL: text}}}}, not {value!r}"
    if not isinstance(value, Mapping) or set(value) - {"hosts", "tools"}:
        raise ConfigurationError(wrong[:300], tool=tool, key="instructions")
    hosts = value.get("hosts", [] if "tools" in value else list(HOSTS))  # only tools: no host's files
    if isinstance(hosts, str) or not isinstance(hosts, Sequence):
        raise ConfigurationError(wrong, tool=tool, key="instructions.hosts")
    for host in hosts:
        if host not in HOSTS:
            near = get_close_matches(str(host), HOSTS, 1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; the hosts are {', '.join(HOSTS)}"
            raise ConfigurationError(f"unknown instruction host {host!r}{hint}", tool=tool, key="instructions.hosts")
    return tuple(h for h in HOSTS if h in hosts)


def tool_instructions(meta: Mapping[str, Any], tool: str | None = None, path: Path | None = None) -> list[Instruction]:
    """The instructions ``instructions.tools`` in metadata gives, each added after the agent calls its tool.

    ``instructions: {tools: {Bash: "Quote every path."}}`` (set by an
    authority for its folder's agents, or by the agent itself).

    Raises:
        ConfigurationError: ``tools`` is not a mapping of tool names to text.
    """
    value = meta.get("instructions")
    given = value.get("tools") if isinstance(value, Mapping) else None
    if given is None:
        return []
    if not isinstance(given, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
        raise ConfigurationError(
            f"instructions.tools must map tool names to text, not {given!r}"[:300], tool=tool, key="instructions.tools"
        )
    return [
        Instruction(path or Path(), f"instructions.tools.{name}", "metadata", text.strip(), tools=(name,))
        for name, text in given.items()
    ]


def discover(cwd: Path, root: Path) -> list[tuple[str, Path]]:
    """Every instruction file of every host, as (host, path), in the order they go into a prompt."""
    cwd = Path(cwd).resolve()
    chain = [cwd, *(p for p in cwd.parents if p.is_relative_to(root))] if cwd.is_relative_to(root) else [cwd]
    found: list[tuple[str, Path]] = []
    for folder in reversed(chain):
        found += [(host, folder / name) for host, name in _NEAREST]
    found.append(("copilot", root / ".github" / "copilot-instructions.md"))
    for host, folder, pattern in (
        ("copilot", root / ".github" / "instructions", "*"),
        ("cursor", root / ".cursor" / "rules", "*.mdc"),
        ("toolcascade", root / ".toolcascade" / "instructions", "*.md"),
    ):
        if folder.is_dir():
            found += [(host, p) for p in sorted(folder.glob(pattern))]
    return [(host, path) for host, path in found if path.is_file()]


def read_instruction(host: str, path: Path, root: Path, limits: Limits = DEFAULT_LIMITS) -> Instruction:
    """One instruction file: its body and when its host applies it (a frontmatter it would ignore: ``problem``).

    Raises:
        ToolDefinitionError: the file cannot be read as text.
    """
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    text = read_text(path, limits)
    if host == "copilot" and path.parent.name == "instructions":
        if not path.name.endswith(".instructions.md"):
            problem = "Copilot reads only files named *.instructions.md here: rename it"
            return Instruction(path, rel, host, "", problem=problem, line=1, severity="warning")
    elif host in ("agents", "claude", "copilot"):
        return Instruction(path, rel, host, text.strip(), always=True)
    try:
        block, first, body, _body_line = cut_frontmatter(text, path)
        data, lines = _frontmatter(host, block, path, first, limits)
    except ToolDefinitionError as exc:
        return Instruction(path, rel, host, "", problem=f"unparseable frontmatter: {exc.detail}", line=exc.line or 1)
    head = Instruction(path, rel, host, body)
    return _shaped(head, data, lines, first)


def _frontmatter(
    host: str, block: str | None, path: Path, first: int, limits: Limits
) -> tuple[dict[str, Any], dict[str, int]]:
    """The frontmatter as a mapping and its keys' lines; Cursor's own ``globs: *.ts`` (not YAML) too.

    Raises:
        ToolDefinitionError: neither YAML nor Cursor's ``key: value`` lines.
    """
    if block is None:
        return {}, {}
    try:
        return load_yaml(block, path, first, limits)
    except ToolDefinitionError:
        if host != "cursor":
            raise
        data: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for offset, row in enumerate(block.splitlines()):
            if not row.strip() or row.lstrip().startswith("#"):
                continue
            match = _KEY_LINE.match(row)
            if match is None:
                raise ToolDefinitionError(
                    f"{row.strip()[:60]!r} is neither YAML nor Cursor's `key: value`", path=path, line=first + offset
                ) from None
            key, value = match.groups()
            lines[key] = first + offset
            data[key] = {"true": True, "false": False, "": None}.get(value, value)
        return data, lines


def _shaped(head: Instruction, data: dict[str, Any], lines: dict[str, int], first: int) -> Instruction:
    """``head`` with what its frontmatter says, or the first thing in it its host would ignore."""
    host, data = head.host, dict(data)

    def bad(message: str, key: str | None = None, severity: str = "error") -> Instruction:
        line = lines.get(key, first) if key else 1  # no key to point at: the frontmatter's opening line
        return replace(head, problem=message, line=line, severity=severity)

    notes = []
    for key in [k for k in data if k not in _KEYS[host]]:
        near = get_close_matches(key, _KEYS[host], 1)
        hint = f"did you mean {near[0]!r}?" if near else f"it reads {', '.join(_KEYS[host])}"
        notes.append(
            (lines.get(key, first), f"{_label(host)} ignores the key {key!r}: {hint}", "error" if near else "warning")
        )
        del data[key]
    head = replace(head, notes=tuple(notes))
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        return bad(f"description must be text, not {type(description).__name__}", "description")
    glob_key = "applyTo" if host == "copilot" else "globs"
    globs = _patterns(data.get(glob_key))
    if globs is None:
        return bad(
            f"{glob_key} must be a glob, comma-separated globs or a list of globs, not {data[glob_key]!r}", glob_key
        )
    if host == "cursor":
        always = data.get("alwaysApply", False)
        if always is None:
            always = False
        if not isinstance(always, bool):
            return bad(f"alwaysApply must be true or false, not {always!r}: Cursor ignores it", "alwaysApply")
        if not always and not globs and not description:
            return bad("no alwaysApply, globs or description: Cursor applies it only when mentioned", None, "warning")
        return replace(head, always=always, globs=globs, description=description)
    if host == "copilot":
        if not globs:
            return bad("no applyTo: Copilot attaches it only by hand", None, "warning")
        return replace(head, globs=globs, glob_key=glob_key, description=description)
    tools = _patterns(data.get("applies-to-tools"), split=False)
    if tools is None:
        return bad(
            f"applies-to-tools must be a list of tool names, not {data['applies-to-tools']!r}", "applies-to-tools"
        )
    return replace(head, always=not globs and not tools, globs=globs, tools=tools, description=description)


def _label(host: str) -> str:
    return {"copilot": "Copilot", "cursor": "Cursor", "toolcascade": "toolcascade"}.get(host, host)


def _patterns(value: Any, *, split: bool = True) -> tuple[str, ...] | None:
    """Globs (or names) from a string, comma-separated outside braces, or a list of strings; None when neither."""
    if value is None:
        return ()
    if isinstance(value, str):
        items = _split(value) if split else [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [part for v in value for part in (_split(v) if split else [v])]
    else:
        return None
    return tuple(item.strip() for item in items if item.strip())


def _split(text: str) -> list[str]:
    """``"**/*.ts, src/{a,b}/**"`` -> ``["**/*.ts", "src/{a,b}/**"]``: commas inside braces stay."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth <= 0:
            parts.append(text[start:index])
            start = index + 1
    return [*parts, text[start:]]


def named_files(value: Any, cwd: Path, root: Path) -> list[str]:
    """The files a call's args name: strings that are paths inside ``root``, relative to it with /."""
    found: dict[str, None] = {}
    strings: list[str] = []
    stack = [value]
    while stack and len(strings) < MAX_STRINGS:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    for text in strings:
        if not text.strip() or len(text) > 1024 or any(c in text for c in "\n\r\x00"):
            continue
        try:
            path = (cwd / text).resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        if path.is_relative_to(root) and path != root and (path.exists() or path.parent.is_dir()):
            found.setdefault(path.relative_to(root).as_posix())
    return list(found)


def matching(globs: Sequence[str], files: Sequence[str]) -> tuple[str, str] | None:
    """The first (glob, file) that matches, wcmatch-style; None when none does.

    Raises:
        ConfigurationError: wcmatch is not installed.
    """
    try:
        from wcmatch import glob
    except ImportError as exc:  # an optional dependency, needed only once a glob is matched
        raise ConfigurationError(
            "matching instruction globs needs wcmatch: pip install 'toolcascade[instructions]'", key="instructions"
        ) from exc
    flags = glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB
    for pattern in globs:
        for file in files:
            if glob.globmatch(file, pattern, flags=flags | (0 if "/" in pattern else glob.MATCHBASE)):
                return pattern, file
    return None


def judge(instruction: Instruction, files: Sequence[str]) -> Verdict:
    """Whether ``instruction`` goes into the system prompt of a call naming ``files``, and why."""
    i = instruction

    def verdict(applied: bool, reason: str, when: str | None = None) -> Verdict:
        skipped = "".join(f"; {message} (line {line})" for line, message, _severity in i.notes)
        return Verdict(i.file, i.host, applied, reason + skipped, when or ("start" if applied else "never"))

    if i.problem is not None:
        return verdict(False, f"not applied: {i.problem} (line {i.line})")
    if not i.text:
        return verdict(False, "not applied: the file has no text")
    if i.always:
        said = {"cursor": "alwaysApply: true", "toolcascade": "no applies-to-tools or globs: always applied"}
        return verdict(True, said.get(i.host, "always applied: its host reads it for every request"))
    if set(i.globs) & _ALWAYS:
        return verdict(True, f"{i.glob_key} {'**'!r} matches every file: always applied")
    hit = matching(i.globs, files) if i.globs and files else None
    if hit is not None:
        return verdict(True, f"{i.glob_key} {hit[0]!r} matched {hit[1]}")
    later = []
    if i.tools:
        later.append(f"added after the agent calls {' or '.join(i.tools)}")
    if i.globs:
        shown = ", ".join(repr(g) for g in i.globs)
        named = (
            f"matched none of the files the call names ({', '.join(files)})"
            if files
            else "the call names no file inside the project"
        )
        later.append(f"{i.glob_key} {shown}: {named}; added after a tool call naming a matching file")
    if later:
        return verdict(False, "not applied yet: " + "; ".join(later), "after-call")
    return verdict(
        False,
        "not applied: a rule with only a description, which Cursor's model asks for; "
        "toolcascade applies a rule by alwaysApply or globs",
    )


def explain_instructions(
    meta: Mapping[str, Any],
    args: Any,
    cwd: Path,
    *,
    tool: str | None = None,
    paths: Iterable[Path] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> list[Verdict]:
    """Each instruction file for an agent with merged metadata ``meta`` called with ``args``: applied or not, and why.

    Files of hosts ``instructions`` leaves out are listed too, as not read.
    ``paths`` are the search paths (for the project root when there is no
    ``.git``). ``show AGENT ARGS`` prints these; a run emits the same
    records in its ``agent.instructions`` events.

    Raises:
        ConfigurationError: a malformed ``instructions`` key.
    """
    hosts = chosen_hosts(meta, tool)
    root = project_root(cwd, paths)
    files = named_files(args, Path(cwd), root)
    verdicts = []
    for host, path in discover(cwd, root):
        if host not in hosts:
            rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
            why = (
                "instructions is off for this agent (instructions: true reads them)"
                if not hosts
                else f"instructions.hosts leaves out {host}"
            )
            verdicts.append(Verdict(rel, host, False, f"not read: {why}", "never"))
            continue
        verdicts.append(judge(load_instruction(host, path, root, limits), files))
    return verdicts + [judge(given, files) for given in tool_instructions(meta, tool)]


def load_instruction(host: str, path: Path, root: Path, limits: Limits) -> Instruction:
    """``read_instruction``, with an unreadable file, or a link out of the project, as one never applied."""
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    if not path.resolve().is_relative_to(root):  # a checkout's AGENTS.md -> ~/.ssh/id_rsa never reaches a model
        return Instruction(path, rel, host, "", problem="it links to a file outside the project: never read", line=1)
    try:
        return read_instruction(host, path, root, limits)
    except ToolDefinitionError as exc:
        return Instruction(path, rel, host, "", problem=exc.detail, line=exc.line or 1)


def instruction_problems(cwd: Path, paths: Iterable[Path] = (), limits: Limits = DEFAULT_LIMITS) -> list[Problem]:
    """For ``check``: each instruction file whose host would ignore it, at its file and line (every host's)."""
    root = project_root(cwd, paths)
    found = []
    for host, path in discover(cwd, root):
        instruction = load_instruction(host, path, root, limits)
        if instruction.problem is not None:
            found.append(Problem(str(path), instruction.line, instruction.problem, instruction.severity))
        found += [Problem(str(path), line, message, severity) for line, message, severity in instruction.notes]
    return found
