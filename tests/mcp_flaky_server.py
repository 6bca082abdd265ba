"""A tiny MCP server over stdio for the client tests: tools that crash, hang, answer too much or an image.

Run as ``python tests/mcp_flaky_server.py``; ``die`` ends the process mid-call,
``hang`` never answers, ``big`` answers ``size`` characters, ``picture`` a one-pixel PNG,
``echo`` its text, ``garbage`` a line that is not JSON-RPC, ``blob`` an embedded resource whose blob is
the text it is given (base64 or not). The variables it sees come back from ``environment``.
"""

from __future__ import annotations

import base64
import os
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import BlobResourceContents, EmbeddedResource

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
server = MCPServer("flaky")


@server.tool()
def echo(text: str) -> str:
    """Answer the text."""
    return text


@server.tool()
def die() -> str:
    """End the server in the middle of the call."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "late"


@server.tool()
def big(size: int) -> str:
    """Answer size characters."""
    return "x" * size


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def blob(text: str) -> EmbeddedResource:
    """An embedded binary resource whose blob is text, as given."""
    contents = BlobResourceContents(uri="file:///blob.bin", mime_type="application/octet-stream", blob=text)
    return EmbeddedResource(type="resource", resource=contents)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def environment() -> list[str]:
    """The names of the variables this server sees."""
    return sorted(os.environ)


if __name__ == "__main__":
    server.run()
