"""What the command line draws: rich tables for show and list, and the progress spinner.

rich is imported inside the functions that draw, so ``toolcascade run``
with piped output never pays for it. ``list`` into a pipe prints plain
tab-separated rows instead of a table (``plain_rows``), as ``gh`` and ``ls`` do:
drawing a table of 10,000 tools took longer than listing them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from .frozen import thaw
from .ordering import DEFAULT_AFTER, DEFAULT_BEFORE
from .registry import builtin_folder

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

    from .events import Event


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
        if kind == "approval.request":
            self._stop()  # the terminal approver asks on stderr now: no spinner over the question
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


def runs(entry: dict[str, Any]) -> Any:
    """The RUNS cell: when an entry with a ``when`` runs, and whether it has work now."""
    from rich.text import Text

    if entry.get("when") is None:
        return Text("")
    if entry.get("needed", True):
        return Text(f"when {entry['when']}")
    return Text(f"not needed: runs when {entry['when']}", style="dim")


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
    for note in ("$static", "$dynamic", "$locked", "$private"):
        if data["annotations"].get(note):
            head.add_row(note, Text(", ".join(data["annotations"][note])))
    if data["annotations"].get("$attach"):
        head.add_row("$attach", Text(str(data["annotations"]["$attach"])))
    if data.get("replaces"):
        head.add_row("replaces", Text(f"{data['replaces']}: wherever it would run, this tool runs instead"))
    if data.get("format"):
        head.add_row("format", Text(f"{data['format']} (read through its adapter; mapping below)"))
    if data.get("host_tools"):
        head.add_row("host tools", Text(", ".join(data["host_tools"]) + " (kept as data: never offered, never run)"))
    view.append(head)
    view.append("")
    if data.get("format"):
        view.append(mapping_view(data))
        view.append("")
    frontmatter = yaml.safe_dump(thaw(data["frontmatter"]), sort_keys=False, allow_unicode=True).rstrip()
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
    for column in ("#", "ENTRY", "PHASE", "AFTER", "BEFORE", "ORIGIN", "LOCKED", "RUNS"):
        chain.add_column(column, no_wrap=column not in ("AFTER", "BEFORE", "RUNS"))
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
            runs(entry),
        )
    if data.get("cycle"):
        loop = " -> ".join([*data["cycle"], data["cycle"][0]])
        chain.title = f"chain: CANNOT BE SORTED, $order forms a cycle: {loop} (entries unsorted)"
        chain.title_style = "bold red"
    view.append(chain if data["chain"] else Text("chain: empty (the body runs on its own)"))
    if data.get("prompt"):
        title = "prompt (rendered with ARGS)" if data.get("rendered") else "prompt (as written)"
        view.append("")
        view.append(Panel(Text(data["prompt"]), title=title, title_align="left", box=box.ROUNDED, expand=False))
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
        table.add_column(column, no_wrap=column == "SOURCE")
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
