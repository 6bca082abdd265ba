"""What an MCP call returns: a result, an ``isError`` result, and the server's paths named or hidden in errors."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .manager import Manager
from .registry import builtin_folder

if TYPE_CHECKING:
    import mcp.types as types

SERVER_PATH = "<server path>"  # what an error result says instead of a path outside the served folders
_PATH = re.compile(r"(?<![\w.~/:-])(?:file://)?/[^\s'\"`,;:()\[\]{}<>|]+")


def success(result: Any) -> types.CallToolResult:
    """A string as text; anything else as JSON text, plus ``structuredContent`` for an object."""
    from mcp.types import CallToolResult, TextContent

    if isinstance(result, str):
        return CallToolResult(content=[TextContent(text=result)])
    if isinstance(result, Mapping):
        result = dict(result)
    text = json.dumps(result, ensure_ascii=False, default=str)
    structured = json.loads(text) if isinstance(result, dict) else None
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def failure(text: str) -> types.CallToolResult:
    """An ``isError`` result: ``text``, the error described on one line (``"<ErrorType>: <message>"``)."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=text)], is_error=True)


class ServedPaths:
    """How error texts sent to MCP clients name the server's files (see the module docstring).

    Served folders and the built-ins are replaced by what they are (longest
    first, so a folder inside another is named from the inner one); then any
    other absolute path under one of the file system's top-level entries is
    ``SERVER_PATH``. A JSON pointer (``/name``) is not such a path and stays.
    """

    __slots__ = ("names", "known", "top")

    def __init__(self, manager: Manager) -> None:
        builtins = {str(builtin_folder(kind).resolve()): f"built-in {kind}" for kind in ("tools", "authorities")}
        roots = {sp.folder: builtins.get(sp.folder) for sp in manager.paths} | builtins
        self.names: dict[str, str | None] = roots  # None: a served folder (its files are named relative to it)
        ordered = sorted(roots, key=len, reverse=True)
        self.known = re.compile(rf"(?:file://)?({'|'.join(map(re.escape, ordered))})(/|(?![\w.-]))")
        try:
            self.top = frozenset(os.listdir("/"))
        except OSError:
            self.top = frozenset()

    def shown(self, text: str) -> str:
        """``text`` with the server's paths named relative to the served folders, or hidden."""
        return _PATH.sub(self._hidden, self.known.sub(self._relative, text))

    def _relative(self, match: re.Match[str]) -> str:
        root, slash = match.group(1), match.group(2)
        name = self.names[root]
        if name is None:  # a served folder: its files relative to it, itself by its own name
            return "" if slash else os.path.basename(root)
        return name + slash

    def _hidden(self, match: re.Match[str]) -> str:
        found = match.group(0)
        parts = found.removeprefix("file://").strip("/").split("/")
        return SERVER_PATH if len(parts) >= 2 and parts[0] in self.top else found
