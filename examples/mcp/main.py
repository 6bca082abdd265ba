"""Serve ./tools over MCP (stdio) with `toolcascade serve`, and call it with the mcp SDK client.

Then the other direction: ./client's AUTHORITY.md declares the time server
(mcp-server-time), whose tools its tools and agents use like any tool.
"""

import os
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from orchestrator import Manager


async def main() -> None:
    # The same command a client configuration names: toolcascade serve --path tools
    server = StdioServerParameters(command=sys.executable, args=["-m", "orchestrator", "serve", "--path", "tools"])
    with anyio.fail_after(60):
        async with Client(server) as client:
            print("server:", client.server_info.name)
            for tool in (await client.list_tools()).tools:
                print(f"tool {tool.name}: {tool.description} (arguments: {', '.join(tool.input_schema['required'])})")

            greeting = await client.call_tool("greet", {"name": "Ada"})
            print("greet ->", greeting.content[0].text)

            counted = await client.call_tool("team__count", {"value": "to be or not to be"})
            print("team__count ->", counted.structured_content)

            refused = await client.call_tool("greet", {})
            print("greet without a name -> isError:", refused.is_error, "|", refused.content[0].text)

            locked = await client.call_tool(
                "greet", {"name": "Ada", "$middleware": {"validate-args": {"remove": True}}}
            )
            print("removing a locked entry -> isError:", locked.is_error, "|", locked.content[0].text)


async def client() -> None:
    # mcp-server-time is installed beside this Python (the test extra): let the AUTHORITY.md's command find it.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    events = []
    async with Manager(["client"], on_event=events.append) as manager:
        with anyio.fail_after(60):
            tool = manager.find_tool("time/convert_time")
            print("remote tool:", tool.name, tool.uri, "| params:", ", ".join(tool.metadata["params"]["required"]))
            converted = await manager.invoke(
                "time/convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            print("12:00 UTC in Tokyo ->", converted["target"]["datetime"][11:16])
            print("clock ->", await manager.invoke("clock", {}))
    calls = [e.data["call"] for e in events if e.kind == "tool.start" and e.data.get("call")]
    print("the agent called:", ", ".join(calls))


if __name__ == "__main__":
    anyio.run(main)
    anyio.run(client)
