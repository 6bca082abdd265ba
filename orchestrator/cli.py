"""The toolcascade command line: parse, build a Manager, print (SPEC section 8).

Every command takes ``--path DIR`` (repeatable; default ``./tools`` when it
exists; the built-in tools are always searched last). Failures print one
line, ``error: <ErrorType>: <message>``, on stderr and exit 1; ``--debug``
adds the traceback. rich is imported only by the commands that draw with it.

Exit status: 0 done; 1 an error; 2 a usage error; ``SUSPENDED`` (3) a run
paused for a decision (what is held and the ``resume`` command go to
stderr); ``INTERRUPTED`` (130) after Ctrl-C. Results and reports go to
stdout, diagnostics to stderr. Once the status is known the process ends,
even when a thread is still stuck in a sync tool (Python cannot stop it).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import click

from .collector import paused
from .display import Usage, display, explanation_view, progress
from .errors import InterpolationError
from .exits import INTERRUPTED as INTERRUPTED
from .exits import SUSPENDED as SUSPENDED
from .exits import ending_within, fail, leave, reporting, resume_options, skip_final_collection, warnings_as_written
from .flags import chosen_formats, debug_option, json_option, parse_args, path_option, search_paths, set_option
from .manager import Manager
from .outputs import output_option, show_result
from .planner import replaced_builtin
from .registry import builtin_folder
from .rows import json_rows, mcp_column, once_per_file
from .screen import Screen as Screen
from .screen import answers_in_json, say_stopped
from .screen import echo_result as echo_result
from .tables import print_tools
from .version import __version__

MCP_MISSING = (
    "error: toolcascade serve needs the MCP SDK: pip install 'mcp>=2,<3' (or install toolcascade with its mcp extra)"
)


def command_manager(paths: Sequence[Path], **options: Any) -> Manager:
    """The Manager of a command that takes ``path_option``: its ``--path`` folders and ``--format`` choice."""
    return Manager(search_paths(paths), formats=chosen_formats(), **options)


store_option = click.option(
    "--store",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The session store (default: $TOOLCASCADE_SESSIONS, else ~/.local/state/toolcascade/sessions.db).",
)
"""``--store FILE``: the SQLite session store a command's agents keep their conversations in (``run``, ``batch``)."""


# -- commands: those that live in their own modules, imported only when used (``toolcascade run`` stays quick).
LAZY = {
    "chat": "orchestrator.chat:chat",
    "sessions": "orchestrator.chat:sessions",
    "resume": "orchestrator.chat:resume",
    "batch": "orchestrator.batch:batch",
    "export": "orchestrator.export:export",
    "init": "orchestrator.scaffold:init",
    "logs": "orchestrator.logs:logs",
    "eval": "orchestrator.evals:eval_",
}

LAZY_HELP = {
    "chat": "Talk with an agent on the terminal; the session keeps the conversation.",
    "sessions": "List, show or delete stored conversations.",
    "resume": "Continue a run that paused for approval or a question.",
    "batch": "Run a tool over every line of a JSON Lines file.",
    "export": "Write a tool as a Prompty file or a Claude Code subagent.",
    "init": "Create a starter folder: a tool, a middleware, an authority.",
    "logs": "List, show or export the runs in the run log.",
    "eval": "Score a tool on a dataset, under variants side by side.",
}
"""Each lazy command's ``short_help``, so ``toolcascade --help`` imports none of their modules (a test keeps them equal)."""


class Commands(click.Group):
    """A group that lists its commands in the order they are defined (run first), then the lazy ones."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.commands, *(name for name in LAZY if name not in self.commands)]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help``: a lazy command is described by ``LAZY_HELP``, its module not imported."""
        shown = Commands(commands=list(self.commands.values()))  # in this order, run first
        for name in LAZY:
            if name not in self.commands:
                shown.add_command(click.Command(name, short_help=LAZY_HELP[name]))
        click.Group.format_commands(shown, ctx, formatter)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in LAZY:
            return super().get_command(ctx, cmd_name)
        module, _, attr = LAZY[cmd_name].partition(":")
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            return None
        command = getattr(loaded, attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; Ctrl-C ends it with ``INTERRUPTED`` (130), as shells expect, not as an error."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            pass
        except click.exceptions.Abort as exc:
            if not isinstance(exc.__context__, KeyboardInterrupt):  # click's prompts turn Ctrl-C into Abort
                raise
        click.echo("\ninterrupted", err=True)
        raise click.exceptions.Exit(INTERRUPTED)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="toolcascade")
def cli() -> None:
    """Run, list, explain, check and serve tools written as Markdown (or Python) files.

    \b
    A tool is tools/NAME.md (YAML frontmatter + a prompt) or tools/NAME.py.
    Every command searches --path DIR (default: ./tools) and then the
    built-in tools.

    \b
    Exit status: 0 done, 1 an error, 2 a usage error, 3 a run paused for
    a decision (continue it with toolcascade resume), 130 Ctrl-C.

    \b
    Examples:
      toolcascade run greet '{"name": "Ada"}'
      toolcascade list --path tools
      toolcascade show greet
      toolcascade check
    """


@cli.command(short_help="Invoke a tool and print its result.")
@click.argument("tool")
@click.argument("args", required=False, metavar="[ARGS]")
@path_option
@set_option
@click.option(
    "--session",
    metavar="ID",
    help="Continue conversation ID: an agent loads and saves its messages in the session store.",
)
@store_option
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Print on stderr the run's token usage at the end (also when it fails or pauses) "
    "and each middleware that ended a chain without calling next().",
)
@click.option(
    "--executor",
    "executor_spec",
    metavar="inprocess|process|ray[=ADDRESS]",
    help="Run the whole invocation as one unit on this executor (process: worker processes on this machine; "
    "ray: a local Ray, or the cluster at ADDRESS); it is also the default engine of `delegate: {}`.",
)
@click.option("--no-log", is_flag=True, help="Keep this run out of the run log (see toolcascade logs).")
@output_option
@debug_option
def run(
    tool: str,
    args: str | None,
    paths: Sequence[Path],
    overrides: dict[str, Any],
    session: str | None,
    store: Path | None,
    verbose: bool,
    executor_spec: str | None,
    no_log: bool,
    output: Path | None,
    debug: bool,
) -> None:
    """Invoke TOOL with ARGS (JSON; '-' reads JSON from stdin; default {}).

    A string result prints as it is, media as a line saying what it is (-o), anything else as JSON. On a
    terminal an agent's answer streams as it arrives and its tool calls show
    on stderr; piped, stdout carries only the result. An answer with
    returns prints once, as JSON. Errors print one line on stderr and exit 1;
    a call held for approval with nobody to ask prints what is held and the
    resume command on stderr and exits 3. The run is recorded in the run log
    (toolcascade logs) unless --no-log or TOOLCASCADE_RUNLOG=off.

    \b
    Examples:
      toolcascade run greet '{"name": "Ada"}'
      echo '{"name": "Ada"}' | toolcascade run greet -
      toolcascade run greet '{"name": "Ada"}' --set 'shout={times: 5}'
      toolcascade run team/summarize --path ~/prompts '"some text"'
      toolcascade run report '{"topic": "q3"}' --executor ray=ray://head:10001
    """
    value = parse_args(args)
    usage = Usage() if verbose else None
    try:
        again = resume_options(paths, store)
        result, screen = running(
            tool, value, paths, overrides, session, store, usage, executor_spec, debug, again, no_log
        )
        show_result(result, screen, output)
    finally:  # a failed or paused run says what it used too
        if usage is not None:
            click.echo(usage.line(), err=True)


def running(
    tool: str,
    value: Any,
    paths: Sequence[Path],
    overrides: dict[str, Any],
    session: str | None,
    store: Path | None,
    usage: Usage | None,
    executor_spec: str | None,
    debug: bool,
    again: Sequence[str],
    no_log: bool = False,
) -> tuple[Any, Screen | None]:
    """Invoke ``tool`` as ``run`` does; its result and, on a terminal, what was shown of it.

    The run goes to the run log (``Manager(runlog=True)``) unless ``no_log``;
    what is pending is written before the command ends.
    """
    with reporting(debug, again), progress(tool) as live:
        executor = None
        if executor_spec is not None and session:
            raise click.UsageError("--session keeps the conversation in a local store: it cannot go with --executor")
        if executor_spec is not None:
            from .executor import executor_for

            executor = executor_for(executor_spec)
        asker = None
        if sys.stdin.isatty() and sys.stderr.isatty():  # a held call is asked about on the terminal
            from .approval import terminal

            asker = terminal()
        manager = command_manager(paths, executor=executor, approver=asker, sessions=store, runlog=not no_log)
        screen = None
        if live is not None:
            screen = Screen(live, lambda _name: answers_in_json(manager, tool, overrides))
            manager.events.listeners.append(screen)
        context = {"session": session} if session else None
        if usage is not None:
            manager.events.listeners.extend([usage, say_stopped])
        try:
            if executor is None:
                result = manager.invoke_sync(tool, value, overrides=overrides or None, context=context)
            else:
                from .executor import invoke_on
                from .recorder import recorded

                call = partial(invoke_on, executor, manager, tool, value, overrides=overrides or None)
                result = anyio.run(recorded, manager, tool, value, call)
        finally:
            if manager.recorder is not None:
                manager.recorder.close()  # the process may end at once: what is pending is written now
    return result, screen


def remote_options(what: str) -> Any:
    """``--remote`` (help: ``what``) and its ``--timeout``: start the declared MCP servers (``orchestrator.servers``)."""

    def apply(command: Any) -> Any:
        command = click.option(
            "--timeout",
            "remote_timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=15.0,
            show_default=True,
            metavar="SECONDS",
            help="With --remote: how long each server has to start and list its tools (an entry's smaller "
            "timeout wins).",
        )(command)
        return click.option("--remote", is_flag=True, help=what)(command)

    return apply


@cli.command(name="list", short_help="List the tools: name, kind, description.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Include hidden tools (visibility: hidden), like the built-ins, and a NAME/* row per declared MCP server "
    "(not started: --remote lists its tools).",
)
@click.option(
    "--mcp", "show_mcp", is_flag=True, help="Add how serve offers each tool over MCP: tool, prompt, both or neither."
)
@remote_options(
    "Also start each declared MCP server (mcp-servers) and list its tools as NAME/TOOL, kind remote; "
    "a server that fails is one error row. The servers stop at the end."
)
@json_option
@path_option
@debug_option
def list_(
    show_all: bool,
    show_mcp: bool,
    remote: bool,
    remote_timeout: float,
    as_json: bool,
    paths: Sequence[Path],
    debug: bool,
) -> None:
    """List the tools in the search paths: name, kind and description.

    A tool that fails to load is listed with its error. Listing starts no
    program: --all shows each declared MCP server as one NAME/* row, and
    its tools are listed only with --remote.

    \b
    Examples:
      toolcascade list
      toolcascade list --all --path tools --path ~/shared-tools
      toolcascade list --json
      toolcascade list --remote --timeout 30
    """
    with reporting(debug), paused():  # a listing's heap is kept, not freed (orchestrator.collector)
        manager = command_manager(paths)
        infos = once_per_file(manager.list_tools(hidden=show_all))
    mcp = mcp_column(manager, infos) if show_mcp else {}
    if remote:  # the declared MCP servers' tools: started, listed, stopped
        from .servers import remote_rows

        with reporting(debug):
            infos += remote_rows(manager, infos, remote_timeout, partial(click.echo, err=True))
    elif show_all:  # the declared servers themselves, started by nobody
        from .servers import declared_rows

        infos += declared_rows(manager)
    builtins = {path.stem for path in builtin_folder("tools").iterdir()}
    replacing = {}  # ref -> the built-in file a user tool takes the place of
    for info in infos:
        if info.ref in builtins and (found := replaced_builtin(info.ref, info.path)) is not None:
            replacing[info.ref] = found.name

    if as_json:
        rows = json_rows(infos, replacing, mcp if show_mcp else None)
        click.echo(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
    elif infos:
        print_tools(infos, replacing, show_all, mcp if show_mcp else None)
    else:
        hint = "" if paths or Path("tools").is_dir() else " (no ./tools here; use --path DIR)"
        click.echo(f"no tools found{hint}", err=True)


@cli.command(short_help="Explain a tool's metadata cascade and chain.")
@click.argument("tool")
@click.argument("args", required=False, metavar="[ARGS]")
@json_option
@click.option(
    "--brief", is_flag=True, help="Only the keys the tool's own files set and what each chain entry does (no --json)."
)
@path_option
@set_option
@debug_option
def show(
    tool: str,
    args: str | None,
    as_json: bool,
    brief: bool,
    paths: Sequence[Path],
    overrides: dict[str, Any],
    debug: bool,
) -> None:
    """Explain TOOL: its frontmatter, every merged key and the sorted chain.

    For each key: its value, the level that set it, the merge policy, and
    whether it runs as middleware or is data (and why). For each chain entry:
    its phase, constraints, origin and whether it is locked. Then the prompt,
    rendered when ARGS (JSON, as for run) are given. ARGS are needed only when
    templates in the metadata use them. An $order cycle is shown with the
    entries unsorted, and exits 1.

    \b
    Examples:
      toolcascade show greet
      toolcascade show greet '{"name": "Ada"}' --set 'shout={times: 5}'
      toolcascade show greet --brief
      toolcascade show greet --json | jq '.chain[].name'
    """
    if brief and as_json:
        raise click.UsageError("--brief shortens the table; --json is always the whole explanation")
    value = parse_args(args)
    with reporting(debug):
        manager = command_manager(paths)
        try:
            explanation = manager.explain(tool, value, overrides=overrides or None)
        except InterpolationError:
            if args is not None:
                raise
            # Templates that need args: show them as written rather than fail.
            explanation = manager.explain(tool, value, overrides=overrides or None, render=False)
            click.echo("note: metadata templates are shown unrendered; pass ARGS to render them", err=True)
    data = explanation.to_dict()
    from .annotations import described  # here: only show reads it

    data["mcp"] = described(data)
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        display(*explanation_view(data, brief=brief))
    if explanation.cycle:
        loop = " -> ".join([*explanation.cycle, explanation.cycle[0]])
        fail(f"OrderCycleError: $order constraints form a cycle: {loop} (tool {explanation.tool!r})")


@cli.command(name="check", short_help="Report every problem in the tool and authority files.")
@remote_options(
    "Also start each MCP server that an agent's tools names (NAME/TOOL) and check that it lists the tool. "
    "The servers stop at the end."
)
@path_option
def check_(remote: bool, remote_timeout: float, paths: Sequence[Path]) -> None:
    """Check every tool and authority in the search paths; print each problem as path:line: message.

    Loads every file, resolves every cascade and chain (templates are
    compiled, not rendered), and warns about likely typos: unknown frontmatter
    keys and metadata keys one edit away from a tool name. Starts no program:
    a NAME/TOOL in tools needs a server NAME declared (mcp-servers) and
    allowed where the agent runs; --remote starts it to find TOOL. Exits 1
    when there is an error; warnings alone do not fail.

    \b
    Examples:
      toolcascade check
      toolcascade check --path tools --path ~/shared-tools
      toolcascade check --remote
    """
    from .check import check

    folders = search_paths(paths)
    manager = command_manager(paths)
    quiet = logging.getLogger("orchestrator")
    level, quiet.level = quiet.level, logging.ERROR  # check reports what the engine would log, once, with lines
    try:
        with reporting(False):  # a search path past Limits.folder_files: one error line, as list says it
            problems = check(manager)
            if remote:
                from .servers import merged, remote_problems

                problems = merged(problems, remote_problems(manager, remote_timeout, partial(click.echo, err=True)))
    finally:
        quiet.setLevel(level)
    for problem in problems:  # the report, summary included, is the command's output: stdout
        click.echo(str(problem))
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    from .folders import real_paths  # each folder resolved once, not every file's whole path

    found = list(manager.registry.discover(manager.paths[:-1]))
    wheres = real_paths([path for _ref, path, _sp in found])
    tools = len({where or ref for (ref, _path, _sp), where in zip(found, wheres, strict=True)})
    where = ", ".join(str(f) for f in folders) or "no folder (use --path DIR)"
    counts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n]
    click.echo(f"checked {tools} tool{'s' if tools != 1 else ''} in {where}: {', '.join(counts) or 'ok'}")
    sys.exit(1 if errors else 0)


@cli.command(short_help="Serve the tools over MCP (stdio or HTTP).")
@path_option
@click.option(
    "--http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP on HOST:PORT (e.g. 127.0.0.1:8000) instead of stdio.",
)
@click.option("--allow-overrides", is_flag=True, help="Honour $overrides sent by MCP callers (refused by default).")
@click.option(
    "--allow-sessions",
    is_flag=True,
    help="Let MCP callers continue stored conversations with $context.session (refused by default: "
    "session ids are names, not secrets).",
)
@click.option(
    "--stateful",
    is_flag=True,
    help="Keep HTTP sessions (Mcp-Session-Id) for a single process; by default HTTP is stateless, "
    "so replicas behind a balancer can answer any request.",
)
@click.option(
    "--max-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Cap on the $timeout a caller may ask for; also the timeout of calls that set none.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="After SIGTERM or Ctrl-C, how long calls in flight may take to finish before the process ends anyway "
    "(exit status 128 + the signal's number).",
)
@click.option(
    "--auth-token-env",
    metavar="VAR",
    default=None,
    help="With --http: require 'Authorization: Bearer <token>', the token read from environment variable VAR "
    "(default: TOOLCASCADE_MCP_TOKEN when it is set); other requests get 401.",
)
@click.option("--log", "record", is_flag=True, help="Record every call in the run log (see toolcascade logs).")
@debug_option
def serve(
    paths: Sequence[Path],
    http: str | None,
    allow_overrides: bool,
    allow_sessions: bool,
    stateful: bool,
    max_timeout: float,
    grace: float,
    auth_token_env: str | None,
    record: bool,
    debug: bool,
) -> None:
    """Serve the non-hidden tools over MCP (stdio by default), params as input schemas.

    Needs the MCP SDK (toolcascade's mcp extra, or pip install 'mcp>=2,<3').

    \b
    Examples:
      toolcascade serve --path tools
      toolcascade serve --http 127.0.0.1:8000 --max-timeout 120
      claude mcp add tools -- toolcascade serve --path /abs/path/to/tools
    """
    if http is not None:
        host, sep, port = http.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise click.BadParameter(f"{http!r} is not HOST:PORT", param_hint="'--http'")
    elif auth_token_env is not None:
        raise click.BadParameter("applies to --http only", param_hint="'--auth-token-env'")
    from .authorization import token_from_env  # here: only serve reads it

    with reporting(debug):  # an unset token variable is refused at once: before the SDK is imported, tools listed
        token = token_from_env(auth_token_env) if http is not None else None
    try:
        if importlib.util.find_spec("mcp") is None:  # orchestrator.mcp imports the SDK only when it serves
            raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
        from .mcp import serve as serve_mcp
    except ModuleNotFoundError as exc:
        if exc.name == "mcp" or (exc.name or "").startswith("mcp."):
            click.echo(MCP_MISSING, err=True)
            sys.exit(1)
        raise
    folders = search_paths(paths)
    manager = command_manager(paths, runlog=record)
    if not any(info.error is None for info in manager.list_tools()):
        where = ", ".join(str(f.resolve()) for f in folders) or f"no folder: there is no ./tools in {Path.cwd()}"
        click.echo(f"warning: serving no tools (looked in {where}); pass --path /abs/path/to/tools", err=True)
    try:
        with reporting(debug), ending_within(grace):
            serve_mcp(
                manager,
                http=http,
                token=token,
                allow_overrides=allow_overrides,
                allow_sessions=allow_sessions,
                max_timeout=max_timeout,
                stateless=not stateful,
            )
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a server is stopped
    finally:
        manager.close()  # the run log's pending rows are written, the MCP servers remote tools started stop


def main() -> None:
    """The ``toolcascade`` console script."""
    warnings_as_written()  # the engine's warnings name files as check does, not by absolute path
    try:
        cli(prog_name="toolcascade")
    except SystemExit as ending:
        skip_final_collection()
        leave(ending.code)
        raise
