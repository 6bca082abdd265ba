"""Serve ./tools over MCP (stdio) with `toolcascade serve`, and call it with the mcp SDK client."""

import sys

import anyio
from mcp import Client, StdioServerParameters


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


if __name__ == "__main__":
    anyio.run(main)
