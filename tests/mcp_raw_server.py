"""An MCP server written by hand over stdio, for the client tests: it answers a call with a line that is not JSON-RPC.

It answers ``initialize`` and ``tools/list`` (one tool, ``garbage``) as the
protocol says; a ``tools/call`` gets ``this is not json-rpc`` and no answer.
"""

from __future__ import annotations

import json
import sys
import time

TOOL = {"name": "garbage", "description": "Answers garbage.", "inputSchema": {"type": "object"}}


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
        reply(request, {"tools": [TOOL]})
    elif method == "tools/call":
        sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
        time.sleep(3600)
    elif "id" in request:
        reply(request, {})
