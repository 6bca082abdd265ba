"""Panels of ``show`` for what a tool composes and how it is served: partials, schemas, instructions, MCP,
and how an agent asks for a structured answer.

Each takes the ``Explanation.to_dict()`` data (or its ``mcp`` part) and
returns a rich renderable, or None when the tool has nothing of the kind.
"""

from __future__ import annotations

from typing import Any


def composed_view(data: dict[str, Any]) -> Any:
    """The partials the tool's templates use, its shorthand schemas expanded, its instruction files; None without."""
    import json

    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    for use in data.get("partials") or ():
        where = f"{use['level']}" + (f":{use['line']}" if use.get("line") else "")
        via = f" (via {use['via']})" if use.get("via") else ""
        found = use["path"] if use.get("path") else f"not found: {use.get('error')}"
        parts.append(Text(f"partial {use['name']!r} in {where}{via}: {found}"))
    for key, schema in (data.get("schemas") or {}).items():
        parts.append(Text(f"{key} (shorthand) as JSON Schema: {json.dumps(schema, sort_keys=True)}"))
    for verdict in data.get("instructions") or ():
        said = "applied: " if verdict["applied"] else ""
        parts.append(Text(f"instructions {verdict['file']} ({verdict['host']}): {said}{verdict['reason']}"))
    return Group(*parts) if parts else None


def mcp_view(offered: dict[str, Any]) -> Any:
    """How the tool is offered over MCP (``orchestrator.annotations``): as what, its title and hints, and why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if "error" in offered:
        return Text(f"mcp: not served: {offered['error']}", style="red")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for field, reason in offered["reasons"].items():
        grid.add_row(Text(field), Text(reason if field != "title" or not offered["title"] else offered["title"]))
    return Group(Text("served over MCP (mcp)", style="italic"), grid)


def returns_view(data: dict[str, Any]) -> Any:
    """How an agent gets an answer matching ``returns``: the strategy (native, tool, prompted) and why; or None."""
    from rich.text import Text

    from .agent.returns import strategy_of

    found = strategy_of({item["key"]: item["value"] for item in data.get("keys") or ()}, data["tool"])
    if found is None:
        return None
    if "error" in found:
        return Text(f"structured answers: cannot tell: {found['error']}", style="red")
    return Text(
        f"structured answers: {found['strategy']} ({found['why']}); an answer failing returns is sent back "
        f"{found['retries']} time(s) (returns-retries)"
    )
