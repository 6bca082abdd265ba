"""What the host tools (``tools/Read.py``, ``Glob``, ``Grep``, ``LS``, ``Write``, ``Edit``, ``Bash``, ``WebFetch``) share.

Claude Code's own tools, as built-ins with Claude Code's input schemas, so a
subagent or command that lists ``tools: Read, Grep`` gets them for real.

- **Confinement.** Every path is inside the run's folder (``ctx.cwd``: the
  ``Manager(cwd=...)``, else the process's working folder, inherited by the
  tools an agent calls), the folder media args are confined to as well. A
  path is resolved (symlinks followed) before it is used; one that leaves
  the folder is a ``SecurityError`` naming the tool and the key, which the
  model hears as its tool call's error. A walk never follows a link out.
- **Bounds.** What a tool returns is bounded (``MAX_OUTPUT`` characters,
  ``MAX_LINE`` per line, ``MAX_MATCHES`` paths, ``MAX_FILE`` bytes read per
  file, ``MAX_WALK`` entries walked) and says when it stopped.
- **Grants.** Reading needs none. ``Write``/``Edit`` need ``write``, ``Bash``
  needs ``exec``, ``WebFetch`` needs ``web`` (and ``private-web`` to reach a
  loopback or private address, ``orchestrator.webpages``); a command's
  context injection (`` !`cmd` ``, ``@file``) needs ``context``
  (``orchestrator.formats.injection``), in the ``host-trust`` metadata of the agent that calls
  them (or of the tool itself when the program calls it directly), and only
  from a tool in a folder the program trusts: Claude Code and Copilot files
  never set it (their unknown fields are data). Each call then asks for
  approval, as the ``approval`` middleware does, unless ``host-trust`` says
  ``approval: false``.
- **Commands** run in the run's folder with only ``PASSED_ENV`` of the
  environment (``PATH``, ``HOME``, ``LANG``...): a model never reads a key
  through ``echo $OPENAI_API_KEY``. The process has its own session, killed
  whole at the call's ``timeout``.
- **Permission patterns.** ``Bash(git:*)`` in a file's ``tools`` narrows
  ``Bash`` as Claude Code's permission rules do: ``git:*`` (or ``git *``)
  allows a command whose words start with ``git``, ``npm test`` exactly
  that command. A narrowed command runs without a shell, so ``;``, ``&&``,
  pipes, redirections and substitutions are refused, not run.
  ``WebFetch(domain:example.com)`` narrows ``WebFetch`` to that host
  (``*.example.com``: its subdomains too).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .errors import ApprovalDenied, ArgsValidationError, ConfigurationError, SecurityError
from .schema import check

if TYPE_CHECKING:
    from .context import Context

GRANT = "host-trust"
"""The metadata key that grants ``write`` (Write, Edit), ``exec`` (Bash) and ``web`` (WebFetch): ``{write: true}``."""
RULES = "host-rules"
"""Metadata the formats write for a file's permission patterns: ``{Bash: ["git:*"]}``."""
FLAGS = ("write", "exec", "web", "private-web", "context", "approval")
READERS = ("Read", "Glob", "Grep", "LS")
WRITERS = ("Write", "Edit")
RUNNERS = ("Bash",)
FETCHERS = ("WebFetch",)
NARROWED = (*RUNNERS, *FETCHERS)
"""The tools a permission pattern narrows (``Bash(git:*)``, ``WebFetch(domain:example.com)``)."""
IMPLEMENTED_ORDER = (*READERS, *WRITERS, *RUNNERS, *FETCHERS)
IMPLEMENTED = frozenset(IMPLEMENTED_ORDER)
"""Claude Code's tools this project runs as built-ins; every other host tool name stays data."""

MAX_OUTPUT = 30_000
MAX_LINE = 2_000
MAX_LINES = 2_000
MAX_MATCHES = 100
MAX_FILE = 2_000_000
MAX_WALK = 20_000
MAX_SEARCHED = 200_000_000
"""Characters one search (Grep) reads in all before it stops and says so."""
PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "SHELL", "TZ")
"""The environment variables a command sees: none that could hold a key (``OPENAI_API_KEY`` stays with the program)."""
SKIPPED = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})
_RULE = re.compile(r"^([A-Za-z]\w*)\((.*)\)$", re.DOTALL)
_SHELL = re.compile(r"[;&|<>`\n]|\$\(")


# -- confinement ---------------------------------------------------------------------


def root(ctx: Context) -> Path:
    """The folder the host tools of this call are confined to: the run's ``ctx.cwd``, resolved."""
    return Path(ctx.cwd).resolve()


def confine(ctx: Context, value: Any, key: str, *, exists: bool = True) -> Path:
    """``value`` (absolute, or relative to the run's folder) resolved inside it.

    Raises:
        ArgsValidationError: not a path.
        SecurityError: it resolves outside the run's folder (symlinks followed).
        ConfigurationError: ``exists`` and there is nothing there.
    """
    tool = ctx.tool.name
    if not isinstance(value, str) or not value or "\0" in value:
        raise ArgsValidationError([(f"/{key}", f"must be a path (non-empty text), not {value!r:.60}")], tool=tool)
    base = root(ctx)
    try:
        path = (base / os.path.expanduser(value)).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ConfigurationError(f"{key}: {value[:200]!r} cannot be resolved: {exc}", tool=tool, key=key) from exc
    if not path.is_relative_to(base):
        raise SecurityError(
            f"{key}: {value[:200]!r} is outside the project folder {str(base)!r}; host tools read and write only "
            "inside it (symlinks are followed first)",
            tool=tool,
            key=key,
        )
    if exists and not path.exists():
        raise ConfigurationError(f"{key}: {value[:200]!r} does not exist in the project folder", tool=tool, key=key)
    return path


def shown(ctx: Context, path: Path) -> str:
    """``path`` as the model sees it: relative to the run's folder."""
    return path.relative_to(root(ctx)).as_posix() or "."


def walk(ctx: Context, top: Path) -> Iterator[Path]:
    """Every file under ``top`` (sorted, at most ``MAX_WALK`` entries), never through a link that leaves the folder.

    Version-control and dependency folders (``SKIPPED``) are left out, as Claude Code's ignore rules leave them.
    """
    base = root(ctx)
    seen = 0
    if top.is_file():
        yield top
        return
    for current, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not Path(current, d).is_symlink())
        for name in sorted(files):
            seen += 1
            if seen > MAX_WALK:
                return
            path = Path(current, name)
            try:
                inside = path.resolve().is_relative_to(base) and path.is_file()  # no FIFO, no link out
            except (OSError, RuntimeError):
                continue
            if inside:
                yield path


def modified(path: Path) -> float:
    """A file's modification time, 0 when it went away meanwhile."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def read_text(ctx: Context, path: Path, key: str) -> str:
    """A file's text (at most ``MAX_FILE`` bytes, undecodable bytes replaced).

    Raises:
        ConfigurationError: not a file, or unreadable.
    """
    if not path.is_file():
        raise ConfigurationError(f"{key}: {shown(ctx, path)!r} is not a file", tool=ctx.tool.name, key=key)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE + 1)
    except OSError as exc:
        raise ConfigurationError(
            f"{key}: cannot read {shown(ctx, path)!r}: {exc}", tool=ctx.tool.name, key=key
        ) from exc
    text = data[:MAX_FILE].decode("utf-8", errors="replace")
    return text + ("\n[truncated: the file is longer than 2,000,000 bytes]" if len(data) > MAX_FILE else "")


def bounded(text: str, limit: int = MAX_OUTPUT) -> str:
    """``text`` cut at ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: {len(text) - limit:,} more characters; narrow the request]"


# -- patterns ------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob (``*``, ``**``, ``?``, ``[...]``, ``{a,b}``) as a regular expression over ``/``-separated paths."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", index + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = pattern[index + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                index = end
        elif char == "{":
            end = pattern.find("}", index + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                out.append(
                    "(?:" + "|".join(glob_regex(p).pattern[4:-2] for p in pattern[index + 1 : end].split(",")) + ")"
                )
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("^(?:" + "".join(out) + ")$")


def matcher(glob: str) -> Callable[[str], bool]:
    """Whether a path relative to the search folder matches ``glob``; a glob without ``/`` matches a file's name."""
    regex = glob_regex(glob)
    if "/" in glob:
        return lambda relative: regex.match(relative) is not None
    return lambda relative: regex.match(relative.rsplit("/", 1)[-1]) is not None


# -- grants and approval ---------------------------------------------------------------


def caller(ctx: Context) -> Context | None:
    """The agent that offered this tool: the nearest caller whose ``tools`` list it, else None (the program)."""
    name = ctx.tool.name
    current = ctx.parent
    while current is not None:
        target = current.target
        listed = target.meta.get("tools")
        if target.tool is not ctx.tool and isinstance(listed, list) and name in listed:
            return target
        current = current.parent
    return None


def grant(ctx: Context) -> tuple[dict[str, Any], str]:
    """The ``host-trust`` that applies to this call, and who gave it (for messages).

    Raises:
        ConfigurationError: a malformed ``host-trust``.
    """
    holder = caller(ctx) or ctx
    value = holder.meta.get(GRANT)
    who = f"tool {holder.tool.name!r}"
    if value is None or not holder.tool.trusted:
        return {}, who
    if (
        not isinstance(value, Mapping)
        or set(value) - set(FLAGS)
        or not all(isinstance(v, bool) for v in value.values())
    ):
        raise ConfigurationError(
            f"{GRANT} must map {', '.join(FLAGS)} to true/false, not {value!r:.120}", tool=holder.tool.name, key=GRANT
        )
    return dict(value), who


async def permit(ctx: Context, flag: str, reason: str) -> None:
    """Refuse the call without the ``flag`` grant; with it, ask for approval (unless the grant turns it off).

    Raises:
        SecurityError: no grant, naming the tool and how to give one.
        ApprovalRequired: nobody can be asked (the run suspends).
        ApprovalDenied: the approver said no.
    """
    granted, who = grant(ctx)
    if granted.get(flag) is not True:
        raise SecurityError(
            f"{ctx.tool.name} needs the {flag!r} grant, which {who} does not have: a program or a file in a trusted "
            f"folder gives it with metadata {GRANT}: {{{flag}: true}} on the agent (e.g. "
            f"overrides={{'{GRANT}': {{'{flag}': True}}}}); each call then asks for approval",
            tool=ctx.tool.name,
            key=GRANT,
        )
    if granted.get("approval", True):
        await approve(ctx, reason)


async def approve(ctx: Context, reason: str) -> None:
    """Ask for approval of this call as the ``approval`` middleware asks (its request, its decisions).

    Raises:
        ApprovalRequired, ApprovalDenied, ApproverError, ArgsValidationError: as ``approval``.
    """
    from .approval import decide, plain  # the running layer's: the formats import this module to read names

    agent = caller(ctx)
    request: dict[str, Any] = {
        "kind": "call",
        "tool": ctx.tool.name,
        "args": plain(ctx.args),
        "reason": reason,
        "agent": agent.tool.name if agent is not None else None,
        "run": ctx.run.id,
        "description": ctx.tool.description,
    }
    decision = await decide(ctx, request)
    if decision.action == "deny":
        why = f": {decision.reason}" if decision.reason else ""
        raise ApprovalDenied(
            f"the call was denied by the approver{why}; it did not run, do not retry it unchanged",
            request=request,
            reason=decision.reason,
            tool=ctx.tool.name,
            key="approval",
        )
    if decision.action == "edit":
        edited = dict(decision.args or {})
        params = ctx.meta.get("params")
        if params is not None:
            check(params, edited, ArgsValidationError, ctx.tool.name)
        ctx.args = edited


# -- Bash permission patterns ----------------------------------------------------------


def offer(names: list[str]) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """A file's host tool names as (the built-ins offered, their permission patterns, the names that stay data).

    ``Bash(git:*)`` offers ``Bash`` narrowed to ``git:*`` (``WebFetch(domain:x.org)``
    ``WebFetch`` to that host); a plain name beside it offers it unnarrowed. A pattern on another tool
    (``Read(src/**)``) is not narrowed here, so that name stays data rather
    than be offered wider than written.
    """
    offered: list[str] = []
    patterns: dict[str, list[str]] = {}
    plain_names: set[str] = set()
    host: list[str] = []
    for name in names:
        tool, pattern = split_rule(name)
        if tool not in IMPLEMENTED or (pattern is not None and tool not in NARROWED):
            host.append(name)
            continue
        if tool not in offered:
            offered.append(tool)
        if pattern is None:
            plain_names.add(tool)
        else:
            patterns.setdefault(tool, []).append(pattern)
    return offered, {k: v for k, v in patterns.items() if k not in plain_names}, host


def domain_allowed(host: str, patterns: list[str]) -> bool:
    """Whether ``host`` matches one ``WebFetch`` pattern: ``domain:example.com`` exactly, ``domain:*.example.com``
    that domain and its subdomains."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        kind, _, domain = pattern.partition(":")
        domain = domain.strip().lower().rstrip(".")
        if kind.strip() != "domain" or not domain:
            continue
        if domain.startswith("*."):
            if host == domain[2:] or host.endswith(domain[1:]):
                return True
        elif host == domain:
            return True
    return False


def split_rule(name: str) -> tuple[str, str | None]:
    """``Bash(git:*)`` -> (``Bash``, ``git:*``); a plain name -> (name, None)."""
    found = _RULE.match(name.strip())
    if found is None:
        return name.strip(), None
    return found.group(1), found.group(2).strip()


def rules(ctx: Context, tool: str) -> list[str] | None:
    """The permission patterns narrowing ``tool`` for this call (None: not narrowed)."""
    agent = caller(ctx)
    value = (agent or ctx).meta.get(RULES)
    if not isinstance(value, Mapping):
        return None
    found = value.get(tool)
    if found is None:
        return None
    return [str(item) for item in found] if isinstance(found, list) else [str(found)]


def command_words(ctx: Context, command: str) -> list[str]:
    """A narrowed command's words, refusing what only a shell would read (``;``, ``&&``, ``|``, ``>``, ``$(``).

    Raises:
        SecurityError: shell syntax, or quoting that does not close.
    """
    if _SHELL.search(command):
        raise SecurityError(
            f"command {command[:200]!r} uses shell syntax (;, &&, |, redirection or substitution), which a command "
            "narrowed by a permission pattern may not: run one command",
            tool=ctx.tool.name,
            key="command",
        )
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise SecurityError(f"command {command[:200]!r}: {exc}", tool=ctx.tool.name, key="command") from exc


def allowed(words: list[str], pattern: str) -> bool:
    """Whether a command's words match one Claude Code pattern: ``git:*``/``git *`` by prefix, else exactly."""
    prefix = pattern.endswith(":*") or pattern.endswith(" *") or pattern == "*"
    text = pattern[:-2] if pattern.endswith((":*", " *")) else ("" if pattern == "*" else pattern)
    try:
        wanted = shlex.split(text)
    except ValueError:
        return False
    return words[: len(wanted)] == wanted if prefix else words == wanted


# -- running a command -----------------------------------------------------------------


async def run_command(command: str, words: list[str] | None, folder: Path, timeout: float) -> str:
    """Run ``command`` in ``folder`` (through the shell, or as ``words`` without one) and report its output.

    The process gets its own session, so a timeout kills everything it started.

    Raises:
        ConfigurationError: the program cannot be started (not found, not executable).
    """
    argv = words if words is not None else ["/bin/sh", "-c", command]
    try:
        process = await anyio.open_process(
            argv,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={name: os.environ[name] for name in PASSED_ENV if name in os.environ},
        )
    except OSError as exc:
        raise ConfigurationError(f"command {command[:200]!r} cannot start: {exc}", tool="Bash", key="command") from exc
    output = bytearray()
    async with process:
        with anyio.move_on_after(timeout) as scope:
            if process.stdout is not None:
                async for chunk in process.stdout:
                    if len(output) <= 2 * MAX_OUTPUT:
                        output += chunk
            await process.wait()
        timed_out = scope.cancelled_caught
        if timed_out:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
    text = bounded(output.decode("utf-8", errors="replace"))
    if timed_out:
        return f"{text}\n[killed after {timeout:g} s: the command did not finish]"
    return f"{text}\n[exit code {process.returncode}]" if process.returncode else text or "(no output)"
