"""An MCP server written by hand over stdio, for the client tests: it answers a call with a line that is not JSON-RPC.

It answers ``initialize`` and ``tools/list`` as the protocol says. A call of
``garbage`` gets ``this is not json-rpc`` and no answer; a call of ``grow``
adds the tool ``added``, says so (``notifications/tools/list_changed``) and
answers ``grown``.
"""

from __future__ import annotations

import json
import sys
import time

TOOL = {"name": "garbage", "description": "Answers garbage.", "inputSchema": {"type": "object"}}
GROW = {"name": "grow", "description": "Adds a tool.", "inputSchema": {"type": "object"}}
ADDED = {"name": "added", "description": "Added by grow.", "inputSchema": {"type": "object"}}
tools = [TOOL, GROW]


def reply(request: dict, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if method == "initialize":
        version = request["params"]["protocolVersion"]
        info = {"name": "raw", "version": "1"}
        reply(request, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
    elif method == "tools/list":
        reply(request, {"tools": tools})
    elif method == "tools/call" and request["params"]["name"] == "grow":
        tools.append(ADDED)
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n")
        reply(request, {"content": [{"type": "text", "text": "grown"}]})
    elif method == "tools/call":
        sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
        time.sleep(3600)
    elif "id" in request:
        reply(request, {})
