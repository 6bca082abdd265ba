"""``toolcascade logs``: the runs the run log kept (``orchestrator.runlog``): list, show one, export.

``logs`` (or ``logs list``) prints the last runs, newest first: id, start,
tool, model, tokens, cost (a column only when some run has one: see
``orchestrator.costs``), duration and status; ``logs show ID`` one whole run
(its args, each model turn with the messages sent when they were kept, each
tool call, its result or error; ``--json`` as stored); ``logs export`` every run as JSON Lines, oldest first. The
filters ``--tool``, ``--since`` and ``--status`` apply to ``list`` and
``export``. Tables are drawn with rich on a terminal; piped, rows are plain
tab-separated lines. The file is ``--log FILE``, else ``TOOLCASCADE_RUNLOG``,
else ``runs.db`` in the user state folder.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .cachefolder import state_folder
from .display import display, plain_rows, terminal
from .exits import fail, reporting
from .flags import debug_option, json_option
from .runlog import ENVIRONMENT, LOG_FILE, OFF, RunInfo, RunLog

STATUSES = ("ok", "error", "interrupted")
_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def opened(path: Path | None) -> RunLog:
    """The run log ``--log`` names, else ``TOOLCASCADE_RUNLOG``'s, else the state folder's ``runs.db``."""
    if path is None:
        chosen = os.environ.get(ENVIRONMENT, "").strip()
        if chosen and chosen.lower() not in OFF:
            path = Path(chosen)
        else:
            folder = state_folder()
            if folder is None:
                fail(f"no home folder to find the run log in: pass --log FILE or set {ENVIRONMENT}")
            path = folder / LOG_FILE
    return RunLog(path)


def since_time(_ctx: click.Context | None, _param: click.Parameter | None, value: str | None) -> float | None:
    """``--since``: an age (``30m``, ``2h``, ``7d``, ``1w``) or a local date or time (``2026-11-26T09:00``)."""
    if value is None:
        return None
    found = _AGO.fullmatch(value.strip())
    if found:
        return time.time() - float(found[1]) * _UNITS[found[2]]
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither an age (30m, 2h, 7d) nor a date or time (2026-11-26, 2026-11-26T09:00)"
        ) from None


def log_option(fn: Any) -> Any:
    return click.option(
        "--log",
        "path",
        metavar="FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"The run log (default: ${ENVIRONMENT}, else runs.db in the user state folder).",
    )(fn)


def filter_options(fn: Any) -> Any:
    fn = click.option("--status", type=click.Choice(STATUSES), help="Only runs that ended so.")(fn)
    fn = click.option(
        "--since", callback=since_time, metavar="AGE|DATE", help="Only runs started since (2h, 7d, 2026-11-26)."
    )(fn)
    return click.option("--tool", metavar="NAME", help="Only runs of this tool (its name or ref).")(fn)


@click.group(invoke_without_command=True, short_help="List, show or export the runs in the run log.")
@click.pass_context
def logs(ctx: click.Context) -> None:
    """List, show or export the runs the run log kept (toolcascade run records them).

    \b
    Examples:
      toolcascade logs
      toolcascade logs list -n 50 --tool summarize --status error --since 2h
      toolcascade logs show 9cdb81ae00000001 --json
      toolcascade logs export --since 7d > runs.jsonl
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_runs)


@logs.command(name="list", short_help="List the last runs, newest first.")
@click.option("-n", "--last", "limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many.")
@filter_options
@log_option
@json_option
@debug_option
def list_runs(
    limit: int,
    tool: str | None,
    since: float | None,
    status: str | None,
    path: Path | None,
    as_json: bool,
    debug: bool,
) -> None:
    """List the last runs: id, start, tool, model, tokens, duration and status."""
    with reporting(debug):
        runlog = opened(path)
        found = runlog.runs(limit, tool=tool, since=since, status=status)
    if as_json:
        click.echo(json.dumps([info.to_json() for info in found], indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo(f"no runs in {runlog.path}", err=True)
        return
    priced = any(info.cost is not None for info in found)  # no prices extra, no priced model: no COST column
    rows = [_cells(info, priced) for info in found]
    heads = ["RUN", "STARTED", "TOOL", "MODEL", "TOKENS", *(["COST"] if priced else []), "SECONDS", "STATUS"]
    if not terminal():  # a pipe: plain rows, as list does
        click.echo(plain_rows([heads, *rows]))
        return
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for head in heads:
        table.add_column(
            head,
            justify="right" if head in ("TOKENS", "COST", "SECONDS") else "left",
            no_wrap=head in ("RUN", "STARTED"),
        )
    for info, cells in zip(found, rows, strict=True):
        table.add_row(*cells, style="red" if info.status == "error" else None)
    display(table)


def _cells(info: RunInfo, priced: bool = False) -> list[str]:
    status = info.status if info.error_type is None else f"{info.status}: {info.error_type}"
    cost = [dollars(info.cost)] if priced else []
    return [
        info.id,
        _when(info.started),
        info.tool or info.ref,
        info.model or "-",
        str(info.tokens) if info.tokens is not None else "-",
        *cost,
        f"{info.seconds:.3f}",
        status,
    ]


def dollars(cost: float | None) -> str:
    """A cost as ``logs`` and ``eval`` print it: ``$0.000210``, or ``-`` when unknown."""
    return f"${cost:.6f}" if cost is not None else "-"


def _when(started: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))


@logs.command(short_help="Print one run: args, model turns, result.")
@click.argument("run_id", metavar="ID")
@log_option
@json_option
@debug_option
def show(run_id: str, path: Path | None, as_json: bool, debug: bool) -> None:
    """Print run ID (or the run whose id starts with ID): what was asked, each model turn, what came back."""
    with reporting(debug):
        runlog = opened(path)
        run = runlog.get(run_id)
    if run is None:
        fail(f"no run {run_id!r} in {runlog.path}")
    if as_json:
        click.echo(json.dumps(run, indent=2, ensure_ascii=False))
        return
    for line in describe_run(run):
        click.echo(line)


def describe_run(run: dict[str, Any]) -> list[str]:
    """The lines ``logs show`` prints for ``run`` (as ``RunLog.get`` returns it)."""
    lines = [
        f"run      {run['id']}",
        f"tool     {run.get('tool') or run['ref']}"
        + (f" (as {run['ref']!r})" if run.get("tool") not in (None, run["ref"]) else ""),
        f"started  {_when(run['started'])}, {run['seconds']:.3f} s",
        f"status   {run['status']}" + (f" ({run['caller']})" if run.get("caller") else ""),
    ]
    if run.get("model"):
        lines.append(f"model    {run['model']}")
    if run.get("usage"):
        lines.append(f"usage    {_json(run['usage'])}")
    if run.get("cost") is not None:
        lines.append(f"cost     {dollars(run['cost'])} ({run.get('prices') or 'unknown prices'})")
    if run.get("meta_hash"):
        levels = ", ".join(f"{level.get('kind')} {level.get('name')}" for level in run.get("levels") or [])
        lines.append(f"metadata {run['meta_hash']}" + (f" from {levels}" if levels else ""))
    lines.append(f"args     {_json(run.get('args'))}")
    for turn in run.get("turns") or []:
        lines.append(_turn_line(turn))
        lines.extend(_messages(turn))
    error = run.get("error")
    if error:
        lines.append(f"error    {error.get('type')}: {error.get('message')}")
    else:
        result = run.get("result")
        lines.append(f"result   {result if isinstance(result, str) else _json(result)}")
    return lines


def _turn_line(turn: dict[str, Any]) -> str:
    data = turn.get("data") or {}
    where = f"  [{turn.get('iteration') or '-'}] {turn.get('tool')}"
    kind = turn.get("kind")
    if kind == "model.request":
        offered = ", ".join(data.get("tools") or []) or "no tools"
        sent = data.get("messages")
        count = len(sent) + (data.get("earlier") or 0) if isinstance(sent, list) else sent
        return f"{where} asks {data.get('model')}: {count} messages, {offered}"
    if kind == "model.response":
        calls = ", ".join(data.get("calls") or [])
        said = data.get("content")
        what = f"calls {calls}" if calls else _json(said) if not isinstance(said, str) else said
        return f"{where} <- {what} (finish: {data.get('finish_reason')}, usage: {_json(data.get('usage'))})"
    if kind == "tool.start":
        return f"{where} -> {data.get('call')} {_json(data.get('arguments'))}"
    outcome = "held for a decision" if data.get("held") else data.get("error") or "done"
    return f"{where} <- {data.get('call')}: {outcome}"


def _messages(turn: dict[str, Any]) -> list[str]:
    """A request's messages as sent, one line each (``role: text``), when the run log kept them."""
    sent = (turn.get("data") or {}).get("messages")
    if turn.get("kind") != "model.request" or not isinstance(sent, list):
        return []
    earlier = (turn.get("data") or {}).get("earlier")
    lines = [f"        ({earlier} as in the request before)"] if earlier else []
    for message in sent:
        if not isinstance(message, dict):
            lines.append(f"        {_json(message)}")
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else _json(content)
        calls = message.get("tool_calls")
        if calls:
            text = (text + " " if content else "") + f"calls {_json(calls)}"
        lines.append(f"        {message.get('role')}: " + text.replace("\n", "\n" + " " * 10))
    return lines


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@logs.command(short_help="Print the runs as JSON Lines, oldest first.")
@filter_options
@log_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
@debug_option
def export(
    tool: str | None, since: float | None, status: str | None, path: Path | None, output: Path | None, debug: bool
) -> None:
    """Print every run (filtered) as one JSON object per line, oldest first, as logs show --json has it."""
    with reporting(debug):
        runlog = opened(path)
        lines = (json.dumps(run, ensure_ascii=False) for run in runlog.export(tool=tool, since=since, status=status))
        if output is None:
            for line in lines:
                click.echo(line)
            return
        with output.open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")


__all__ = ["describe_run", "dollars", "logs", "since_time"]
