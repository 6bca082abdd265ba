"""What ``toolcascade list`` prints: plain tab-separated rows into a pipe, a table on a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from .display import display, plain_rows, terminal
from .rows import mcp_cell

if TYPE_CHECKING:
    from .tool import ToolInfo


def print_tools(
    infos: Sequence[ToolInfo], replacing: dict[str, str], hidden: bool, mcp: dict[str, dict[str, Any]] | None
) -> None:
    """Print one row per tool: NAME, KIND, HIDDEN (with ``hidden``), MCP (with ``mcp``: how serve offers it), DESCRIPTION.

    ``replacing`` maps a ref to the built-in file it takes the place of. A
    pipe gets plain rows, as gh and ls print them (a table of 10,000 rows took seconds).
    """

    def about(info: ToolInfo) -> str:
        if info.error:
            return str(info.error)
        return (info.description or "") + (
            f" (replaces the built-in {replacing[info.ref]})" if info.ref in replacing else ""
        )

    def cells(info: ToolInfo) -> list[str]:
        shown = ["hidden" if info.hidden else ""] if hidden else []
        served = [mcp_cell(mcp.get(info.ref))] if mcp is not None else []
        return [info.ref, "error" if info.error else info.kind, *shown, *served, about(info)]

    header = ["NAME", "KIND", *(["HIDDEN"] if hidden else []), *(["MCP"] if mcp is not None else []), "DESCRIPTION"]
    if not terminal():
        click.echo(plain_rows([header, *(cells(info) for info in infos)]))
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in header:
        table.add_column(column, style="bold" if column == "NAME" else None, no_wrap=column == "NAME")
    for info in infos:
        row = [Text(cell) for cell in cells(info)]
        if info.error:
            row[1].stylize("red")
            row[-1].stylize("red")
        table.add_row(*row, style="dim" if info.hidden else None)
    display(table)
