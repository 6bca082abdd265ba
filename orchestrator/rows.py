"""The rows ``toolcascade list`` prints: each tool once per file, as JSON, and how ``serve`` offers it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .folders import real_paths

if TYPE_CHECKING:
    from .manager import Manager
    from .tool import ToolInfo


def json_rows(
    infos: Sequence[ToolInfo], replacing: dict[str, str], mcp: dict[str, dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """``list --json``: one object per tool; with ``mcp`` (``--mcp``), how each is offered over MCP."""
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
            "format": info.format,
            "replaces": f"built-in {replacing[info.ref]}" if info.ref in replacing else None,
        }
        for info in infos
    ]
    if mcp is not None:
        for listed in rows:
            listed["mcp"] = mcp.get(str(listed["ref"]))
    return rows


def mcp_column(manager: Manager, infos: Sequence[ToolInfo]) -> dict[str, dict[str, Any]]:
    """Ref -> how ``serve`` offers the tool over MCP (``{"serve": [tool, prompt]}``), or why not (``{"error": ...}``)."""
    from .errors import OrchestratorError
    from .listings import offer_of

    found: dict[str, dict[str, Any]] = {}
    for info in infos:
        if info.error is not None:
            continue
        try:
            found[info.ref] = {"serve": [] if info.hidden else list(offer_of(manager, info).serve)}
        except OrchestratorError as exc:
            found[info.ref] = {"error": str(exc)}
    return found


def mcp_cell(offered: dict[str, Any] | None) -> str:
    """The ``MCP`` column of ``list --mcp``: ``tool, prompt``, ``tool``, ``prompt``, ``-``, or ``not served: why``."""
    if offered is None:
        return "-"
    if "error" in offered:
        return f"not served: {offered['error']}"
    return ", ".join(offered["serve"]) or "-"


def once_per_file(infos: Sequence[ToolInfo]) -> list[ToolInfo]:
    """``infos`` with a file reachable from two search paths (``--path tools --path .``) listed once, by its first ref."""
    seen: set[str] = set()
    kept = []
    for info, where in zip(infos, real_paths([info.path for info in infos]), strict=True):
        if where is not None:
            if where in seen:
                continue
            seen.add(where)
        kept.append(info)
    return kept
