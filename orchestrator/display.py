"""What the command line draws: rich tables for show and list, and the progress spinner.

rich is imported inside the functions that draw, so ``toolcascade run``
with piped output never pays for it. ``list`` into a pipe prints plain
tab-separated rows instead of a table (``plain_rows``), as ``gh`` and ``ls`` do:
drawing a table of 10,000 tools took longer than listing them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from . import panels
from .explain import when_words
from .frozen import thaw
from .ordering import DEFAULT_AFTER, DEFAULT_BEFORE
from .placing import marked
from .registry import builtin_folder

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.status import Status

    from .events import Event


def console(stderr: bool = False) -> Console:
    """A rich console; piped output gets a wide fixed width so rows are not wrapped at 80 columns,
    unless ``COLUMNS`` asks for a width."""
    from rich.console import Console

    found = Console(stderr=stderr)
    if not found.is_terminal and found.width == 80 and "COLUMNS" not in os.environ:
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


def terminal() -> bool:
    """True when stdout is a terminal (a person reads it); False for a pipe or a file."""
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except ValueError:  # closed
        return False


def plain_rows(rows: Iterable[Sequence[str]]) -> str:
    """Rows as lines of tab-separated fields, each field on one line (tabs and line breaks become spaces)."""
    return "\n".join("\t".join(" ".join(field.split()) for field in row) for row in rows)


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


class Live:
    """What ``run`` shows on a terminal while a tool runs: a spinner until the model's answer streams,
    the answer's text on stdout as it arrives, and each tool call on stderr as it starts and ends.

    Only the top-level tool's answer streams (nested agents would interleave);
    a retry after a partial answer says on stderr that the text above was
    discarded. ``streamed`` is the text shown, so ``run`` does not print it twice.
    """

    def __init__(self, status: Status) -> None:
        self.status = status
        self.progress = Progress(status)
        self.spinning = True
        self.streamed: list[str] = []

    def __call__(self, event: Event) -> None:
        kind, data = event.kind, event.data
        if kind in ("approval.request", "input.request"):
            self._stop()  # the terminal asks on stderr now: no spinner over the question
        if kind == "model.delta" and event.depth == 0 and data.get("text"):
            self._stop()
            self.streamed.append(data["text"])
            sys.stdout.write(data["text"])
            sys.stdout.flush()
        elif kind == "model.discarded" and event.depth == 0 and self.streamed:
            self.streamed.clear()
            sys.stdout.write("\n")
            sys.stdout.flush()
            click.echo(f"[the partial answer above was discarded: {data.get('why', 'the request failed')}]", err=True)
        elif kind in ("tool.start", "tool.end") and data.get("call"):
            call = data["call"]
            if kind == "tool.start":
                line = f"→ {call} {compact(data.get('arguments'))}"
            else:
                outcome = "ok" if data.get("error") is None else str(data["error"])
                line = f"← {call} " + ("held for approval" if data.get("held") else outcome)
            if self.spinning:
                self.status.console.print(line, markup=False, highlight=False)
            else:
                click.echo(line, err=True)
        if self.spinning:
            self.progress(event)

    def _stop(self) -> None:
        if self.spinning:
            self.spinning = False
            self.status.stop()


class Usage:
    """Token usage of a run, from its last model response (``run --verbose``)."""

    def __init__(self) -> None:
        self.total: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        if event.kind == "model.response" and isinstance(event.data.get("run_usage"), dict):
            self.total = event.data["run_usage"]

    def line(self) -> str:
        """``usage: 120 prompt + 34 completion = 154 tokens in 2 model calls`` (or that none were made)."""
        if not self.total:
            return "usage: no model calls"
        prompt, completion = self.total.get("prompt_tokens", 0), self.total.get("completion_tokens", 0)
        total = self.total.get("total_tokens", prompt + completion)
        calls = self.total.get("calls", 0)
        return f"usage: {prompt} prompt + {completion} completion = {total} tokens in {calls} model call(s)"


@contextmanager
def progress(label: str) -> Iterator[Live | None]:
    """On a terminal, a spinner on stderr and the streamed answer on stdout while the body runs.

    Nothing is drawn when stdout or stderr is piped: a pipeline sees only the result.
    """
    if not (sys.stderr.isatty() and sys.stdout.isatty()):
        yield None
        return
    status = console(stderr=True).status(f"running {label}", spinner="dots")
    with status:
        yield Live(status)


# -- show ---------------------------------------------------------------------

WIDE = 150  # from this many columns on, show draws tables; below it, one block per key and per entry
CONSTRAINTS = 24  # the chain table's AFTER and BEFORE columns wrap at this width
KEY_WIDTH = 24  # the narrow layout's key column: a longer key folds onto more lines


def runs(entry: dict[str, Any], kind: str | None = None) -> Any:
    """The RUNS words for a chain entry: what it does (its tool's description), or why it is skipped.

    An entry with a ``when`` runs only when all of its conditions hold.
    ``kind``, the explained tool's kind, rules out the conditions on kind
    that hold, so a skip names the one that does not.
    """
    from rich.text import Text

    does = (entry.get("description") or "").strip().rstrip(".")
    when = entry.get("when")
    if when is None:
        return Text(f"{does}." if does else "runs")
    if not entry.get("needed", True):
        return Text(f"skipped: {when_words(when, False, kind)}", style="dim")
    because = when_words(when, True, kind)
    return Text(f"{does} ({because})." if does else f"runs ({because})")


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


class ByWidth:
    """A renderable drawn by ``wide()`` on a console at least ``WIDE`` columns wide, by ``narrow()`` below."""

    def __init__(self, narrow: Callable[[], Any], wide: Callable[[], Any]) -> None:
        self.narrow = narrow
        self.wide = wide

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        yield self.wide() if options.max_width >= WIDE else self.narrow()


def nearest_first(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The keys as a person looks for them: the caller's overrides, the tool's own, then its
    authorities nearest first, the default authority's last; merged order within a level."""
    levels = [tuple(level) for level in reversed(data["levels"])]
    rank = {level: index for index, level in enumerate(levels)}
    return sorted(
        data["keys"], key=lambda k: -1 if k["level_kind"] == "override" else rank.get((k["level"], k["level_kind"]), 0)
    )


def users(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The keys the user set: all but those only the built-in default authority sets."""
    return [
        k for k in nearest_first(data) if not (k["level"] == "default" and k["level_kind"] in ("authority", "inherit"))
    ]


def explanation_view(data: dict[str, Any], *, brief: bool = False) -> list[Any]:
    """What ``show`` prints for an ``Explanation.to_dict()``: header, frontmatter, keys, chain, prompt.

    Each part fits the console it is printed on: tables from ``WIDE``
    columns on, one block per key and per chain entry below it. Values wrap,
    never cut. ``brief``: the tool, the keys the user set (without the default
    authority's) and the chain's entries with what each does; no provenance.
    """
    if brief:
        return brief_view(data)
    import yaml
    from rich import box
    from rich.panel import Panel
    from rich.text import Text

    view: list[Any] = [header(data), ""]
    if data.get("format"):
        view += [mapping_view(data), ""]
    frontmatter = yaml.safe_dump(thaw(data["frontmatter"]), sort_keys=False, allow_unicode=True).rstrip()
    view.append(Panel(Text(frontmatter), title="frontmatter", title_align="left", box=box.ROUNDED, expand=False))
    view += ["", ByWidth(lambda: keys_blocks(data), lambda: keys_table(data)), ""]
    if data["chain"]:
        view.append(ByWidth(lambda: chain_blocks(data), lambda: chain_table(data)))
    else:
        view.append(Text("chain: empty (the body runs on its own)"))
    if data.get("mcp"):
        view += ["", panels.mcp_view(data["mcp"])]
    composed = panels.composed_view(data)
    if composed is not None:
        view += ["", composed]
    answers = panels.returns_view(data)
    if answers is not None:
        view += ["", answers]
    if data.get("prompt"):
        title = "prompt (rendered with ARGS)" if data.get("rendered") else "prompt (as written)"
        # As written, each expression that places media is marked: [media: {{ media(args.photo) }}].
        prompt = data["prompt"] if data.get("rendered") else marked(data["prompt"])
        view.append("")
        view.append(Panel(Text(prompt), title=title, title_align="left", box=box.ROUNDED, expand=False))
    return view


def header(data: dict[str, Any]) -> Any:
    """The tool, its file, its authorities, levels and phases, and the annotations that apply."""
    from rich.table import Table
    from rich.text import Text

    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    head.add_row("tool", Text(f"{data['tool']} ({data['kind']})"))
    head.add_row("uri", Text(data["uri"]))
    # From the levels: with `$inherit: false` the authorities are found but contribute nothing.
    authorities = [name for name, kind in data["levels"] if kind == "authority"]
    head.add_row("authorities", Text(" → ".join(authorities) or "none ($inherit: false)"))
    head.add_row("levels", Text(" → ".join(f"{name} ({kind})" for name, kind in data["levels"])))
    files = data.get("files") or {}
    for name, kind in data["levels"]:  # the levels found by where they live say where that is
        if (kind == "managed" or name == "user" or name.endswith("(local)")) and name in files:
            head.add_row(f"  {name}", Text(files[name]))
    head.add_row("phases", Text(" → ".join(data["phases"])))
    for note in ("$static", "$dynamic", "$locked", "$private"):
        names = data["annotations"].get(note)
        if not names:
            continue
        if note == "$static":  # most are the default authority's engine settings: name those this tool sets
            keys = {item["key"] for item in data["keys"]}
            here = [name for name in names if name in keys]
            rest = len(names) - len(here)
            more = f"{rest} more, not set on this tool (--json lists them)" if rest else ""
            head.add_row(note, Text(", ".join([*here, more] if more else here)))
            continue
        head.add_row(note, Text(", ".join(names)))
    if data["annotations"].get("$attach"):
        head.add_row("$attach", Text(str(data["annotations"]["$attach"])))
    for row in notices(data):
        head.add_row(*row)
    return head


def notices(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """The header rows brief keeps too: a built-in this tool replaces, its format, its host's tools."""
    from rich.text import Text

    rows: list[tuple[str, Any]] = []
    if data.get("replaces"):
        rows.append(("replaces", Text(f"{data['replaces']}: wherever it would run, this tool runs instead")))
    if data.get("format"):
        rows.append(("format", Text(f"{data['format']} (read through its adapter; mapping below)")))
    if data.get("host_tools"):
        names = ", ".join(data["host_tools"])
        rows.append(("host tools", Text(f"{names} (kept as data: never offered, never run)")))
    return rows


def provenance(item: dict[str, Any]) -> tuple[str, str]:
    """Where a key's value comes from (``tone (tool)``, with what it merged over) and its policy."""
    level = f"{item['level']} ({item['level_kind']})"
    if len(item["levels"]) > 1:
        level += "\nmerged over " + ", ".join(item["levels"][:-1])
    return level, item["policy"]


def keys_table(data: dict[str, Any]) -> Any:
    """The merged keys as a table, nearest level first: value, level, policy, verdict and why."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    keys = Table(
        title="merged metadata",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for column in ("KEY", "VALUE", "LEVEL", "POLICY", "VERDICT", "WHY"):
        keys.add_column(column, overflow="fold", no_wrap=column in ("KEY", "VERDICT"))
    for item in nearest_first(data):
        level, policy = provenance(item)
        verdict = Text(item["verdict"], style="cyan" if item["verdict"] == "middleware" else "dim")
        keys.add_row(
            Text(item["key"], style="bold"),
            Text(compact(item["value"])),
            Text(level),
            Text(policy),
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
    return keys


def beside(rows: Iterable[tuple[str, str]]) -> list[Any]:
    """Keys in bold with their values beside them, aligned, each value wrapped under itself; a key
    longer than ``KEY_WIDTH`` has its value under it instead."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    blocks: list[Any] = []
    grid = None
    for key, value in rows:
        if len(key) > KEY_WIDTH:
            blocks += [Text(key, style="bold"), Padding(Text(value), (0, 0, 0, 2))]
            grid = None
            continue
        if grid is None:
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column(overflow="fold")
            blocks.append(grid)
        grid.add_row(Text(key), Text(value))
    return blocks


def keys_blocks(data: dict[str, Any]) -> Any:
    """The merged keys for a narrow console, nearest level first: one block per key, its value
    wrapped beside it, then its verdict, level (and policy when not the default) and why."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    blocks: list[Any] = [Text("merged metadata (nearest level first)", style="italic")]
    for item in nearest_first(data):
        level, policy = provenance(item)
        said = [item["verdict"], level.replace("\n", ", ")]
        if policy != "default":
            said.append(f"policy {policy}")
        said.append(item["reason"])
        blocks += [
            *beside([(item["key"], compact(item["value"]))]),
            Padding(Text(" · ".join(said), style="dim"), (0, 0, 0, 2)),
        ]
    for key, level in data["removed"].items():
        blocks.append(Text.assemble((key, "bold"), (f"  (removed by $remove at {level})", "dim")))
    return Group(*blocks)


def constraints_of(entry: dict[str, Any]) -> tuple[str, str]:
    """An entry's AFTER and BEFORE, with the defaults named when it has no constraints of its own."""
    if entry["before"] or entry["after"]:
        return ", ".join(entry["after"]), ", ".join(entry["before"])
    after, before = (f"{', '.join(names)} (default)" for names in (DEFAULT_AFTER, DEFAULT_BEFORE))
    return after, before


def own_constraints(entry: dict[str, Any], phases: Sequence[str]) -> tuple[list[str], list[str]]:
    """An entry's constraints less those its phase already says: ``after`` its own phase and
    ``before`` the next one (``validate-args`` in ``$post-configure`` then has none to name)."""
    position = phases.index(entry["phase"]) if entry["phase"] in phases else None
    following = phases[position + 1] if position is not None and position + 1 < len(phases) else None
    return [a for a in entry["after"] if a != entry["phase"]], [b for b in entry["before"] if b != following]


def chain_title(data: dict[str, Any]) -> tuple[str, str]:
    """The chain's title and style: its run order, or the $order cycle that leaves it unsorted."""
    if data.get("cycle"):
        loop = " -> ".join([*data["cycle"], data["cycle"][0]])
        return f"chain: CANNOT BE SORTED, $order forms a cycle: {loop} (entries unsorted)", "bold red"
    return "chain (run order)", "italic"


def chain_table(data: dict[str, Any]) -> Any:
    """The chain as a table: each entry's phase, constraints, origin, lock and RUNS."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    title, style = chain_title(data)
    chain = Table(
        title=title, title_justify="left", title_style=style, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    for column in ("#", "ENTRY", "PHASE", "AFTER", "BEFORE", "ORIGIN", "LOCKED", "RUNS"):
        # Names stay whole; the constraints wrap at CONSTRAINTS so that RUNS, a sentence, keeps room.
        wraps = column in ("AFTER", "BEFORE", "RUNS")
        chain.add_column(
            column, overflow="fold", no_wrap=not wraps, max_width=CONSTRAINTS if column in ("AFTER", "BEFORE") else None
        )
    for index, entry in enumerate(data["chain"], 1):
        after, before = constraints_of(entry)
        chain.add_row(
            Text(str(index)),
            Text(entry["name"], style="bold"),
            Text(entry["phase"]),
            Text(after),
            Text(before),
            Text(entry["origin"]),
            Text("locked" if entry["locked"] else "", style="yellow"),
            runs(entry, data["kind"]),
        )
    return chain


def chain_blocks(data: dict[str, Any]) -> Any:
    """The chain for a narrow console: one block per entry, its name, phase and lock, its own
    constraints, then what it does or why it is skipped."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for index, entry in enumerate(data["chain"], 1):
        block = Text(entry["name"], style="bold")
        facts = [entry["phase"]]
        if entry["origin"] != "metadata":
            facts.append(f"from {entry['origin']}")
        if entry["locked"]:
            facts.append("locked")
        after, before = own_constraints(entry, data["phases"])
        if after:
            facts.append("after " + ", ".join(after))
        if before:
            facts.append("before " + ", ".join(before))
        block.append(" · " + " · ".join(facts), style="dim")
        block.append("\n")
        block.append_text(runs(entry, data["kind"]))
        grid.add_row(Text(str(index)), block)
    title, style = chain_title(data)
    return Group(Text(title, style=style), grid)


def brief_view(data: dict[str, Any]) -> list[Any]:
    """``show --brief``: the tool, the keys the user set and the chain's entries with what each does."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    head.add_row("tool", Text(f"{data['tool']} ({data['kind']})"))
    if data["frontmatter"].get("description"):
        head.add_row("", Text(str(data["frontmatter"]["description"])))
    for row in notices(data):
        head.add_row(*row)
    keys = beside((item["key"], compact(item["value"])) for item in users(data))
    keys += [Text.assemble((key, "bold"), ("  (removed)", "dim")) for key in data["removed"]]
    chain = Table.grid(padding=(0, 2))
    chain.add_column(justify="right", no_wrap=True)
    chain.add_column(style="bold", overflow="fold", max_width=KEY_WIDTH)
    chain.add_column(overflow="fold")
    for index, entry in enumerate(data["chain"], 1):
        chain.add_row(Text(str(index)), Text(entry["name"]), runs(entry, data["kind"]))
    title, style = chain_title(data)
    view: list[Any] = [head, ""]
    if keys:
        view += [Group(Text("keys", style="italic"), *keys), ""]
    view.append(
        Group(Text(title, style=style), chain) if data["chain"] else Text("chain: empty (the body runs on its own)")
    )
    return view


def mapping_view(data: dict[str, Any]) -> Any:
    """The table of how an imported file's fields were mapped onto ours, with its unsupported features."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=f"mapping from {data['format']}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for column in ("SOURCE", "OURS", "HOW"):
        table.add_column(column, no_wrap=column == "SOURCE", overflow="fold")
    for item in data.get("mapping", ()):
        target = item["target"] if item["target"] is not None else "(dropped)"
        how = item["note"] + ("" if item["lossless"] else "  [lossy]")
        table.add_row(
            Text(item["source"], style="bold"), Text(target), Text(how, style="" if item["lossless"] else "yellow")
        )
    for line, message in data.get("problems", ()):
        table.add_row(
            Text(f"line {line}" if line else "-", style="bold"), Text("(unsupported)"), Text(message, style="yellow")
        )
    return table
