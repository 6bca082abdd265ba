"""The toolcascade command line: parse, build a Manager, print (SPEC section 8).

Every command takes ``--path DIR`` (repeatable; default ``./tools`` when it
exists; the built-in tools are always searched last). Failures print one
line, ``error: <ErrorType>: <message>``, on stderr and exit 1; ``--debug``
adds the traceback. rich is imported only by the commands that draw with it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from . import __version__
from .errors import OrchestratorError
from .manager import Manager
from .ordering import DEFAULT_AFTER, DEFAULT_BEFORE
from .registry import builtin_folder

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

    from .events import Event

F = TypeVar("F", bound=Callable[..., Any])

MCP_MISSING = "error: toolcascade serve needs the MCP extra: pip install 'toolcascade[mcp]'"


# -- shared options -------------------------------------------------------------


def path_option(fn: F) -> F:
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


def search_paths(paths: Sequence[Path]) -> list[Path]:
    if paths:
        return list(paths)
    default = Path("tools")
    return [default] if default.is_dir() else []


# -- errors -------------------------------------------------------------------


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@contextmanager
def reporting(debug: bool) -> Iterator[None]:
    """Turn any error into one ``error: Type: message`` line and exit 1 (plus the traceback with --debug)."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except Exception as exc:
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]  # type: ignore[assignment]  # anyio task groups wrap a lone error
        if debug:
            traceback.print_exception(exc)
        text = " ".join(str(leaf).split("\n"))
        hint = "" if debug or isinstance(leaf, OrchestratorError) else " (run with --debug for the traceback)"
        fail(f"{type(leaf).__name__}: {text}{hint}")


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


def console(stderr: bool = False) -> Console:
    """A rich console; piped output gets a wide fixed width so rows are not wrapped at 80 columns."""
    from rich.console import Console

    found = Console(stderr=stderr)
    if not found.is_terminal and found.width == 80:
        found = Console(stderr=stderr, width=160)
    return found


def display(*renderables: Any) -> None:
    """Print rich renderables on stdout; piped, as plain lines without the padding tables add."""
    out = console()
    if out.is_terminal:
        for renderable in renderables:
            out.print(renderable)
        return
    with out.capture() as captured:
        for renderable in renderables:
            out.print(renderable)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


# -- progress -----------------------------------------------------------------


class Progress:
    """Names what runs now on a rich status line, fed by manager events.

    Built-in middleware below the top-level tool (hidden, and quick) is left
    out so the line does not flicker through the default pipeline.
    """

    def __init__(self, status: Status) -> None:
        self.status = status
        self.quiet = frozenset(p.stem for p in builtin_folder("tools").iterdir() if p.suffix in (".md", ".py"))
        self.running: dict[int, str] = {}

    def __call__(self, event: Event) -> None:
        self.status.update(self.describe(event))

    def describe(self, event: Event) -> str:
        """The status line after ``event``: each visible running tool, outermost first, with what it does."""
        if event.kind == "invoke.end":
            self.running = {d: t for d, t in self.running.items() if d < event.depth}
        elif event.depth == 0 or event.tool not in self.quiet:
            self.running = {d: t for d, t in self.running.items() if d < event.depth}
            self.running[event.depth] = event.tool + doing(event)
        return "running " + (" › ".join(self.running[d] for d in sorted(self.running)) or event.tool)


def doing(event: Event) -> str:
    """What a model or tool event says a tool is doing (nothing for invoke events)."""
    detail = f" · iteration {event.iteration}" if event.iteration is not None else ""
    if event.kind == "model.request":
        detail += " · asking the model"
    elif event.kind == "tool.start" and event.data.get("call"):
        detail += f" · calling {event.data['call']}"
    return detail


@contextmanager
def progress(label: str) -> Iterator[Callable[[Event], None] | None]:
    """A spinner on stderr while the body runs, when stderr is a terminal; yields the event listener."""
    if not sys.stderr.isatty():
        yield None
        return
    status = console(stderr=True).status(f"running {label}", spinner="dots")
    with status:
        yield Progress(status)


# -- show ---------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def explanation_view(data: dict[str, Any]) -> list[Any]:
    """What ``show`` prints for an ``Explanation.to_dict()``: header, frontmatter, keys, chain."""
    import yaml
    from rich import box
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    view: list[Any] = []
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("tool", Text(f"{data['tool']} ({data['kind']})"))
    head.add_row("uri", Text(data["uri"]))
    # From the levels: with `$inherit: false` the authorities are found but contribute nothing.
    authorities = [name for name, kind in data["levels"] if kind == "authority"]
    head.add_row("authorities", Text(" → ".join(authorities) or "none ($inherit: false)"))
    head.add_row("levels", Text(" → ".join(f"{name} ({kind})" for name, kind in data["levels"])))
    head.add_row("phases", Text(" → ".join(data["phases"])))
    for note in ("$static", "$dynamic", "$locked"):
        if data["annotations"][note]:
            head.add_row(note, Text(", ".join(data["annotations"][note])))
    view.append(head)
    view.append("")
    frontmatter = yaml.safe_dump(data["frontmatter"], sort_keys=False, allow_unicode=True).rstrip()
    view.append(Panel(Text(frontmatter), title="frontmatter", title_align="left", box=box.ROUNDED, expand=False))

    keys = Table(title="merged metadata", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("KEY", "VALUE", "LEVEL", "POLICY", "VERDICT", "WHY"):
        keys.add_column(column, no_wrap=column in ("KEY", "VERDICT"))
    for item in data["keys"]:
        level = f"{item['level']} ({item['level_kind']})"
        if len(item["levels"]) > 1:
            level += "\nmerged over " + ", ".join(item["levels"][:-1])
        verdict = Text(item["verdict"], style="cyan" if item["verdict"] == "middleware" else "dim")
        keys.add_row(
            Text(item["key"], style="bold"),
            Text(compact(item["value"])),
            Text(level),
            Text(item["policy"]),
            verdict,
            Text(item["reason"]),
        )
    for key, level in data["removed"].items():
        keys.add_row(
            Text(key, style="bold"),
            Text("(removed)"),
            Text(f"{level} ($remove)"),
            Text(""),
            Text("-"),
            Text("removed by $remove"),
        )
    view.append("")
    view.append(keys)
    view.append("")

    chain = Table(title="chain (run order)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("#", "ENTRY", "PHASE", "AFTER", "BEFORE", "ORIGIN", "LOCKED"):
        chain.add_column(column, no_wrap=column != "AFTER" and column != "BEFORE")
    for index, entry in enumerate(data["chain"], 1):
        if entry["before"] or entry["after"]:
            after, before = ", ".join(entry["after"]), ", ".join(entry["before"])
        else:
            after, before = (f"{', '.join(names)} (default)" for names in (DEFAULT_AFTER, DEFAULT_BEFORE))
        chain.add_row(
            Text(str(index)),
            Text(entry["name"], style="bold"),
            Text(entry["phase"]),
            Text(after),
            Text(before),
            Text(entry["origin"]),
            Text("locked" if entry["locked"] else "", style="yellow"),
        )
    view.append(chain if data["chain"] else Text("chain: empty (the body runs on its own)"))
    return view


# -- commands -------------------------------------------------------------------


class Commands(click.Group):
    """A group that lists its commands in the order they are defined (run first), not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="toolcascade")
def cli() -> None:
    """Run, list, explain, check and serve tools written as Markdown (or Python) files.

    \b
    A tool is tools/NAME.md (YAML frontmatter + a prompt) or tools/NAME.py.
    Every command searches --path DIR (default: ./tools) and then the
    built-in tools.

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
@debug_option
def run(tool: str, args: str | None, paths: Sequence[Path], overrides: dict[str, Any], debug: bool) -> None:
    """Invoke TOOL with ARGS (JSON; '-' reads JSON from stdin; default {}).

    A string result is printed as it is, anything else as JSON. Errors print
    one line on stderr and exit 1.

    \b
    Examples:
      toolcascade run greet '{"name": "Ada"}'
      echo '{"name": "Ada"}' | toolcascade run greet -
      toolcascade run greet '{"name": "Ada"}' --set 'shout={times: 5}'
      toolcascade run team/summarize --path ~/prompts '"some text"'
    """
    value = parse_args(args)
    with reporting(debug), progress(tool) as listener:
        manager = Manager(search_paths(paths), on_event=listener)
        result = manager.invoke_sync(tool, value, overrides=overrides or None)
    if isinstance(result, str):
        click.echo(result, nl=not result.endswith("\n"))
    else:
        click.echo(json.dumps(result, indent=2, default=str, ensure_ascii=False))


@cli.command(name="list", short_help="List the tools: name, kind, description.")
@click.option("--all", "show_all", is_flag=True, help="Include hidden tools (visibility: hidden), like the built-ins.")
@json_option
@path_option
@debug_option
def list_(show_all: bool, as_json: bool, paths: Sequence[Path], debug: bool) -> None:
    """List the tools in the search paths: name, kind and description.

    A tool that fails to load is listed with its error.

    \b
    Examples:
      toolcascade list
      toolcascade list --all --path tools --path ~/shared-tools
      toolcascade list --json
    """
    with reporting(debug):
        infos = Manager(search_paths(paths)).list_tools(hidden=show_all)
    if as_json:
        rows = [
            {
                "name": info.name,
                "ref": info.ref,
                "kind": info.kind,
                "description": info.description,
                "hidden": info.hidden,
                "params": info.params,
                "path": str(info.path) if info.path is not None else None,
                "error": str(info.error) if info.error is not None else None,
            }
            for info in infos
        ]
        click.echo(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("NAME", style="bold", no_wrap=True)
    table.add_column("KIND")
    if show_all:
        table.add_column("HIDDEN")
    table.add_column("DESCRIPTION")
    for info in infos:
        row = [Text(info.ref), Text("error", style="red") if info.error else Text(info.kind)]
        if show_all:
            row.append(Text("hidden" if info.hidden else ""))
        row.append(Text(str(info.error), style="red") if info.error else Text(info.description or ""))
        table.add_row(*row, style="dim" if info.hidden else None)
    if infos:
        display(table)
    else:
        hint = "" if paths or Path("tools").is_dir() else " (no ./tools here; use --path DIR)"
        click.echo(f"no tools found{hint}", err=True)


@cli.command(short_help="Explain a tool's metadata cascade and chain.")
@click.argument("tool")
@click.argument("args", required=False, metavar="[ARGS]")
@json_option
@path_option
@set_option
@debug_option
def show(
    tool: str, args: str | None, as_json: bool, paths: Sequence[Path], overrides: dict[str, Any], debug: bool
) -> None:
    """Explain TOOL: its frontmatter, every merged key and the sorted chain.

    For each key: its value, the level that set it, the merge policy, and
    whether it runs as middleware or is data (and why). For each chain entry:
    its phase, constraints, origin and whether it is locked. ARGS (JSON, as
    for run) is needed only when templates in the metadata use args.

    \b
    Examples:
      toolcascade show greet
      toolcascade show greet '{"name": "Ada"}' --set 'shout={times: 5}'
      toolcascade show greet --json | jq '.chain[].name'
    """
    value = parse_args(args)
    with reporting(debug):
        explanation = Manager(search_paths(paths)).explain(tool, value, overrides=overrides or None)
    data = explanation.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    display(*explanation_view(data))


@cli.command(name="check", short_help="Report every problem in the tool and authority files.")
@path_option
def check_(paths: Sequence[Path]) -> None:
    """Check every tool and authority in the search paths; print each problem as path:line: message.

    Loads every file, resolves every cascade and chain (templates are
    compiled, not rendered), and warns about likely typos: unknown frontmatter
    keys and metadata keys one edit away from a tool name. Exits 1 when there
    is an error; warnings alone do not fail.

    \b
    Examples:
      toolcascade check
      toolcascade check --path tools --path ~/shared-tools
    """
    from .check import check

    folders = search_paths(paths)
    manager = Manager(folders)
    problems = check(manager)
    for problem in problems:
        click.echo(str(problem))
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    tools = sum(1 for _ in manager.registry.discover(manager.paths[:-1]))
    where = ", ".join(str(f) for f in folders) or "no folder (use --path DIR)"
    counts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((errors, "error"), (warnings, "warning")) if n]
    click.echo(f"checked {tools} tool{'s' if tools != 1 else ''} in {where}: {', '.join(counts) or 'ok'}", err=True)
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
    "--max-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Cap on the $timeout a caller may ask for; also the timeout of calls that set none.",
)
@debug_option
def serve(paths: Sequence[Path], http: str | None, allow_overrides: bool, max_timeout: float, debug: bool) -> None:
    """Serve the non-hidden tools over MCP (stdio by default), params as input schemas.

    Needs the MCP extra: pip install 'toolcascade[mcp]'.

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
    if importlib.util.find_spec("mcp") is None:
        click.echo(MCP_MISSING, err=True)
        sys.exit(1)
    try:
        from .mcp import serve as serve_mcp
    except ModuleNotFoundError as exc:
        if exc.name == "mcp" or (exc.name or "").startswith("mcp."):
            click.echo(MCP_MISSING, err=True)
            sys.exit(1)
        raise
    manager = Manager(search_paths(paths))
    try:
        with reporting(debug):
            serve_mcp(manager, http=http, allow_overrides=allow_overrides, max_timeout=max_timeout)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a server is stopped


def main() -> None:
    """The ``toolcascade`` console script."""
    cli(prog_name="toolcascade")
