"""The first hour (issue 12): errors name the tool and file, tracebacks stay short, roles and visibility.

Driven as a newcomer meets them: the CLI in a subprocess, the MCP SDK client,
and ``manager.invoke`` on real files.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from orchestrator import ConfigurationError, Manager
from orchestrator.mcp import build_server

RAISER = """
frontmatter = {"description": "Fails."}

def helper(n):
    return 10 / n

def main(ctx):
    return helper(ctx.args.get("n", 0))
"""

WRAP = """
frontmatter = {"role": "middleware", "description": "Wraps a result in brackets."}

async def main(ctx):
    return f"[{await ctx.target.manager.next()}]"
"""


def toolcascade(*args: str, cwd: Path, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        stdin=stdin,
        timeout=60,
    )


def test_a_tools_own_exception_names_the_tool_and_line(write, tmp_path):
    write("tools/raiser.py", RAISER)
    done = toolcascade("run", "raiser", cwd=tmp_path)
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ZeroDivisionError: division by zero (tool 'raiser', tools/raiser.py:4)")
    assert "--debug" in line


def test_debug_tracebacks_leave_out_the_engine(write, tmp_path):
    write("tools/raiser.py", RAISER)
    done = toolcascade("run", "raiser", "--debug", cwd=tmp_path)
    assert done.returncode == 1
    assert 'tools/raiser.py", line 7, in main' in done.stderr
    assert 'tools/raiser.py", line 4, in helper' in done.stderr
    assert "orchestrator/chain.py" not in done.stderr and "orchestrator/manager.py" not in done.stderr
    assert "frames of toolcascade and anyio hidden" in done.stderr
    assert len(done.stderr.splitlines()) < 25


@pytest.mark.anyio
async def test_mcp_reports_a_failing_tool_in_one_log_line(write, tools, caplog):
    write("tools/raiser.py", RAISER)
    with caplog.at_level(logging.INFO, logger="orchestrator.mcp"):
        async with Client(build_server(Manager([tools]))) as client:
            result = await client.call_tool("raiser", {})
    assert result.is_error
    assert result.content[0].text.startswith("ZeroDivisionError: division by zero (tool 'raiser', ")
    records = [r for r in caplog.records if r.name == "orchestrator.mcp" and r.levelno >= logging.WARNING]
    assert len(records) == 1 and records[0].exc_info is None
    assert "raiser.py:4" in records[0].getMessage()


def test_serve_says_when_it_serves_nothing(tmp_path):
    done = toolcascade("serve", cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert "warning: serving no tools (looked in no folder: there is no ./tools in" in done.stderr
    assert "pass --path /abs/path/to/tools" in done.stderr


@pytest.mark.anyio
async def test_print_in_a_tool_never_reaches_the_stdio_protocol(write, tools):
    write("tools/chatty.py", "def main(ctx):\n    print('hello from a tool')\n    return 'answer'\n")
    script = "import sys; from orchestrator import Manager; from orchestrator.mcp import serve; serve(Manager([sys.argv[1]]))"
    params = StdioServerParameters(command=sys.executable, args=["-c", script, str(tools)])
    with anyio.fail_after(30):
        async with Client(params) as client:
            first = await client.call_tool("chatty", {})
            second = await client.call_tool("chatty", {})
    assert first.content[0].text == second.content[0].text == "answer"


# -- roles and visibility -------------------------------------------------------------


@pytest.fixture
def roles(write, tools):
    write("tools/wrap.py", WRAP)
    write(
        "tools/base.md", "---\ndescription: A hidden base.\nmetadata:\n  visibility: hidden\n  tone: dry\n---\nbase\n"
    )
    write("tools/child.md", "---\ndescription: Inherits the base.\nmetadata:\n  $inherit: base\n  wrap: {}\n---\nhi\n")
    return tools


@pytest.mark.anyio
async def test_visibility_is_never_inherited_and_middleware_is_hidden(roles):
    manager = Manager([roles])
    listed = {info.ref: info for info in manager.list_tools()}
    assert "child" in listed and "base" not in listed and "wrap" not in listed
    every = {info.ref: info for info in manager.list_tools(hidden=True)}
    assert every["wrap"].role == "middleware" and every["wrap"].hidden and every["base"].hidden
    assert await manager.invoke("child") == "[hi]"
    async with Client(build_server(Manager([roles]))) as client:
        served = {tool.name for tool in (await client.list_tools()).tools}
        called = await client.call_tool("wrap", {})
    assert served == {"child"}
    assert called.is_error and called.content[0].text.startswith("ToolNotFoundError: no tool 'wrap'")


def test_list_shows_middleware_only_when_asked(roles, tmp_path):
    plain = toolcascade("list", cwd=tmp_path)
    every = toolcascade("list", "--all", cwd=tmp_path)
    assert "child" in plain.stdout and "wrap" not in plain.stdout
    assert "wrap" in every.stdout


@pytest.mark.anyio
async def test_middleware_cannot_be_offered_to_a_model(roles, write):
    metadata = {"model": {"provider": "scripted", "script": [{"answer": "x"}]}, "tools": ["wrap"]}
    write("tools/agent.md", "---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nHi\n")
    with pytest.raises(ConfigurationError, match=r"'wrap' is middleware \(role: middleware\)"):
        await Manager([roles]).invoke("agent")


@pytest.mark.anyio
async def test_mcp_accepts_options_sent_as_json_text(write, tools):
    """The MCP Inspector sends object arguments as JSON text."""
    write("tools/greet.md", "---\nmetadata:\n  tone: plain\n---\nHello {{ meta.tone }} {{ locals.city }}\n")
    async with Client(build_server(Manager([tools]), allow_overrides=True)) as client:
        result = await client.call_tool(
            "greet", {"$context": '{"locals": {"city": "Oslo"}}', "$overrides": '{"tone": "warm"}'}
        )
        bad = await client.call_tool("greet", {"$middleware": "{not json"})
    assert result.content[0].text == "Hello warm Oslo"
    assert bad.is_error and bad.content[0].text.startswith("InvocationError: $middleware is text but not JSON")


@pytest.mark.anyio
async def test_a_template_failing_for_want_of_a_misspelt_key_names_it(write, tools):
    from orchestrator import InterpolationError

    write(
        "tools/dbl.md",
        "---\nmetadata:\n  paramz: {type: object, properties: {n: {default: 2}}}\n---\n{{ args.n * 2 }}\n",
    )
    with pytest.raises(InterpolationError, match="metadata key 'paramz' is data, not 'params': did you mean 'params'"):
        await Manager([tools]).invoke("dbl")
