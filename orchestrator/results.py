"""What an MCP call returns: a result, a typed result, an ``isError`` result, and the server's paths in errors.

**Media results.** A tool that returns a media part
(``orchestrator.mediaparts``), or a list of text and media parts, gives
image and audio content as such, a file as an embedded resource
(``toolcascade-result://NAME``, its bytes inline: not a resource ``resources/read`` serves), and a part given by URL as
a resource link; a text line describing the media comes first when the
result has no text of its own.

**Typed results.** A tool's ``returns`` is its ``outputSchema``: an object
schema as it is, any other schema wrapped as the one required property
``result`` (as the SDK's own ``MCPServer`` does). A result that matches it
comes back as ``structuredContent`` (wrapped the same way) with its JSON as
the text copy (a string result: the string itself); one that does not is an
``isError`` result saying why, since a client checks ``structuredContent``
against the schema it was shown.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .errors import ConfigurationError, ReturnsValidationError, describe
from .manager import Manager
from .mediaparts import described, is_media, media_pieces
from .registry import builtin_folder
from .schema import check, json_schema

if TYPE_CHECKING:
    import mcp.types as types

MEDIA_URI = "toolcascade-result://"
"""The URI an embedded file result is given: a name for the client, not a resource it can read again."""
SERVER_PATH = "<server path>"  # what an error result says instead of a path outside the served folders
_PATH = re.compile(r"(?<![\w.~/:-])(?:file://)?/[^\s'\"`,;:()\[\]{}<>|]+")


def success(result: Any) -> types.CallToolResult:
    """A string as text; a media result as media content; anything else as JSON text, plus ``structuredContent``
    for an object."""
    from mcp.types import CallToolResult, TextContent

    if isinstance(result, str):
        return CallToolResult(content=[TextContent(text=result)])
    pieces = media_pieces(result)
    if pieces is not None:
        return CallToolResult(content=media_content(pieces))
    if isinstance(result, Mapping):
        result = dict(result)
    text = json.dumps(result, ensure_ascii=False, default=str)
    structured = json.loads(text) if isinstance(result, dict) else None
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def media_content(pieces: list[Any]) -> list[types.ContentBlock]:
    """A media result's pieces as MCP content: images and audio as such, files as embedded resources.

    Text pieces are text (other values JSON). A result with no text of its own
    starts with a text line describing what it holds, for clients that show
    only text. A part given by URL is a resource link.
    """
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    content: list[types.ContentBlock] = []
    for index, piece in enumerate(pieces):
        if not is_media(piece):
            text = piece if isinstance(piece, str) else json.dumps(piece, ensure_ascii=False, default=str)
            content.append(TextContent(text=text))
            continue
        name = str(piece.get("name") or f"result-{index + 1}")
        media_type = str(piece.get("media_type") or "application/octet-stream")
        if piece.get("url"):
            content.append(ResourceLink(name=name, uri=piece["url"], mime_type=piece.get("media_type")))
        elif piece["kind"] == "image":
            content.append(ImageContent(data=piece["data"], mime_type=media_type))
        elif piece["kind"] == "audio":
            content.append(AudioContent(data=piece["data"], mime_type=media_type))
        else:
            blob = BlobResourceContents(uri=f"{MEDIA_URI}{quote(name)}", mime_type=media_type, blob=piece["data"])
            content.append(EmbeddedResource(resource=blob))
    if not any(isinstance(block, TextContent) for block in content):
        content.insert(0, TextContent(text="; ".join(described(p) for p in pieces if is_media(p))))
    return content


def output_schema(returns: Any, ref: str) -> tuple[dict[str, Any] | None, bool]:
    """The ``outputSchema`` for ``returns`` (None without one), and whether it wraps ``returns`` as ``result``.

    Raises:
        ConfigurationError: ``returns`` is not a JSON Schema (or a malformed shorthand), naming the tool and key.
    """
    if returns is None:
        return None, False
    schema = json.loads(json.dumps(json_schema(returns, "returns", tool=ref), default=str))  # a private JSON copy
    if isinstance(schema, dict) and (
        schema.get("type") == "object" or ("type" not in schema and "properties" in schema)
    ):
        return {"type": "object", **schema}, False
    if not isinstance(schema, (dict, bool)):
        raise ConfigurationError(
            f"returns must be a JSON Schema (like {{type: object, properties: ...}}), not {type(returns).__name__}",
            tool=ref,
            key="returns",
        )
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def typed(result: Any, returns: Any, wrapped: bool, ref: str) -> types.CallToolResult:
    """A result checked against ``returns``: ``structuredContent`` with a text copy, or an error saying why not."""
    from mcp.types import CallToolResult, TextContent

    value = dict(result) if isinstance(result, Mapping) else result
    try:
        plain = json.loads(json.dumps(value, ensure_ascii=False, default=str))
        check(returns, plain, ReturnsValidationError, ref, key="returns")
    except (ReturnsValidationError, ConfigurationError) as exc:
        return failure(describe(exc))
    text = value if isinstance(value, str) else json.dumps(plain, ensure_ascii=False)
    structured = {"result": plain} if wrapped else plain
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
