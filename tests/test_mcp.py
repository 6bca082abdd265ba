"""The MCP server (SPEC section 8, issue 7), driven by the real ``mcp`` client.

In-process tests connect ``mcp.Client`` to ``build_server`` in both protocol
eras (``legacy``: the initialize handshake; ``auto``: 2026-07-28 per-request
envelopes); the stdio and streamable HTTP tests run ``serve`` in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, ToolListChangedNotification
from mcp_inspector import inspector, needs_npx
from servers import free_port, listening, stop

from orchestrator import ConfigurationError, Manager
from orchestrator.mcp import build_server, parse_address
from orchestrator.schema import object_schema as input_schema
from orchestrator.tool import wire_name as tool_name

pytestmark = pytest.mark.anyio

LIMIT = 20  # seconds any one client session may take; nothing waits longer
STDIO = (
    "import sys; from orchestrator import Manager; from orchestrator.mcp import serve; "
    "serve(Manager([sys.argv[1]]), poll_interval=float(sys.argv[2]))"
)
CLIENT = Implementation(name="pytest-client", version="1.2.3")
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])

TOOLS = {
    "greet.md": """
        ---
        description: Greets someone.
        metadata:
          params: {type: object, properties: {name: {type: string}}, required: [name]}
        ---
        Hello, {{ args.name }}!
        """,
    "team/shout.md": """
        ---
        description: Shouts its text.
        metadata:
          params: {type: string}
        ---
        {{ args | upper }}!
        """,
    "info.py": """
        frontmatter = {"description": "What the tool saw."}

        def main(ctx):
            return {"envelope": ctx.envelope, "args": ctx.args, "color": ctx.meta.get("color")}
        """,
    "numbers.py": """
        frontmatter = {"metadata": {"params": {"type": "object"}}}

        def main(ctx):
            return [1, 2, 3]
        """,
    "boom.py": """
        def main(ctx):
            raise ValueError("boom")
        """,
    "slow.py": """
        import anyio

        async def main(ctx):
            await anyio.sleep(30)
        """,
    "secret.md": """
        ---
        description: Not for MCP.
        metadata: {visibility: hidden}
        ---
        secret
        """,
}


@pytest.fixture
def served(write, tools: Path) -> Path:
    for rel, text in TOOLS.items():
        write(f"tools/{rel}", text)
    return tools


def by_name(listed) -> dict:
    return {tool.name: tool for tool in listed.tools}


def text(result) -> str:
    assert len(result.content) == 1
    return result.content[0].text


def add_tool(folder: Path) -> None:
    (folder / "late.md").write_text("---\ndescription: Added while serving.\n---\nlate\n", encoding="utf-8")


# -- names and schemas ------------------------------------------------------------


def test_mcp_tool_names_keep_to_the_portable_alphabet():
    assert tool_name("greet") == "greet"
    assert tool_name("team/summarize") == "team__summarize"
    assert tool_name("a/b/c-d") == "a__b__c-d"
    assert tool_name("x.y z") == "x_y_z"


def test_mcp_input_schema_uses_object_schemas_and_wraps_the_rest():
    obj = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert input_schema(obj) == (obj, False)
    assert input_schema({"properties": {"a": {}}}) == ({"type": "object", "properties": {"a": {}}}, False)
    assert input_schema(None) == ({"type": "object"}, False)
    wrapped = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    assert input_schema({"type": "string"}) == (wrapped, True)
    with pytest.raises(ValueError):
        input_schema({"type": "object", "properties": ["a"]})
    with pytest.raises(ValueError):
        input_schema("string")


def test_mcp_parse_address():
    assert parse_address("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("8000", "127.0.0.1", "host:port", ":80", "h:99999"):
        with pytest.raises(ConfigurationError, match="HOST:PORT"):
            parse_address(bad)


def test_mcp_max_timeout_must_be_positive(tools):
    with pytest.raises(ConfigurationError, match="max_timeout"):
        build_server(Manager([tools]), max_timeout=0)


def test_mcp_module_imports_the_sdk_lazily():
    code = "import sys, orchestrator.mcp; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


# -- in process, both protocol eras --------------------------------------------------


@MODES
async def test_mcp_lists_non_hidden_tools_with_their_schemas(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            assert client.server_capabilities.tools.list_changed is True
            tools = by_name(await client.list_tools())
    assert set(tools) == {"greet", "team__shout", "info", "numbers", "boom", "slow"}
    assert tools["greet"].description == "Greets someone."
    assert tools["greet"].input_schema == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    assert tools["team__shout"].input_schema == {
        "type": "object",
        "properties": {"value": {"type": "string"}},
        "required": ["value"],
    }
    assert tools["boom"].input_schema == {"type": "object"}


@MODES
async def test_mcp_calls_return_text_json_and_structured_content(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode, client_info=CLIENT) as client:
            greeting = await client.call_tool("greet", {"name": "Ada"})
            shout = await client.call_tool("team__shout", {"value": "hi"})
            info = await client.call_tool("info", {"a": 1})
            numbers = await client.call_tool("numbers", {})
    assert (text(greeting), greeting.is_error, greeting.structured_content) == ("Hello, Ada!", False, None)
    assert text(shout) == "HI!"
    assert info.structured_content["args"] == {"a": 1}
    assert json.loads(text(info)) == info.structured_content
    assert (text(numbers), numbers.structured_content) == ("[1, 2, 3]", None)


@MODES
async def test_mcp_errors_are_error_results(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            invalid = await client.call_tool("greet", {"name": 3})
            missing = await client.call_tool("team__shout", {})
            bug = await client.call_tool("boom", {})
            unknown_option = await client.call_tool("greet", {"name": "a", "$evil": 1})
            after = await client.call_tool("greet", {"name": "still serving"})
    assert invalid.is_error and text(invalid).startswith("ArgsValidationError: invalid args: /name: ")
    assert missing.is_error and text(missing).startswith("ArgsValidationError: ")
    assert bug.is_error and text(bug) == "ValueError: boom (tool 'boom', boom.py:2)"
    assert unknown_option.is_error and text(unknown_option).startswith("InvocationError: unknown option '$evil'")
    assert text(after) == "Hello, still serving!"


@MODES
async def test_mcp_unknown_or_hidden_tool_is_an_error_result(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            for name in ("nope", "secret"):
                result = await client.call_tool(name, {})
                assert result.is_error
                assert text(result).startswith(f"ToolNotFoundError: no tool {name!r}: this server serves ")
                assert "greet" in text(result)


@MODES
async def test_mcp_callers_cannot_remove_locked_entries_or_override(served, mode):
    removal = {"name": "x", "$middleware": {"validate-args": {"remove": True}}}
    via_context = {"name": "x", "$context": {"locals": {"middleware": {"validate-args": {"remove": True}}}}}
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            results = [
                await client.call_tool("greet", removal),
                await client.call_tool("greet", via_context),
                await client.call_tool("greet", {"name": "x", "$overrides": {"validate-args": None}}),
                await client.call_tool("team__shout", {"value": "x", "$overrides": {}}),
                await client.call_tool("greet", {"name": "x", "$context": {"paths": ["/"]}}),
                await client.call_tool("greet", {"name": "x", "$middleware": {"paths": {"args": "/"}}}),
                await client.call_tool("greet", {"name": "x", "$middleware": [{"name": "delegate", "args": "secret"}]}),
                await client.call_tool(
                    "greet", {"name": "x", "$context": {"locals": {"middleware": {"cwd": {"args": "/"}}}}}
                ),
            ]
    assert all(result.is_error for result in results)
    assert text(results[0]).startswith("SecurityError: middleware 'validate-args' is locked and cannot be removed")
    assert text(results[1]).startswith("SecurityError: $context.locals.middleware is read by the engine")
    assert text(results[2]).startswith("SecurityError: $overrides is not accepted from MCP callers")
    assert text(results[3]).startswith("SecurityError: $overrides is not accepted from MCP callers")
    assert text(results[4]).startswith("SecurityError: $context.paths is not accepted from MCP callers")
    assert text(results[5]).startswith("SecurityError: $middleware from MCP callers may add or override only tools")
    assert "'delegate'" in text(results[6])
    assert text(results[7]).startswith("SecurityError: $context.locals.middleware is read by the engine")


async def test_mcp_overrides_when_allowed(served):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served]), allow_overrides=True)) as client:
            result = await client.call_tool("info", {"$overrides": {"color": "red"}})
    assert result.structured_content["color"] == "red"


async def test_mcp_broken_and_colliding_tools_are_left_out_and_logged(served, write, caplog):
    write("tools/broken.md", "---\nmetadata: [not, a, mapping\n---\nx\n")
    write("tools/team__shout.md", "---\ndescription: Collides with team/shout.\n---\nx\n")
    server = build_server(Manager([served]))
    with anyio.fail_after(LIMIT):
        async with Client(server) as client:
            first = by_name(await client.list_tools())
            second = by_name(await client.list_tools())
    assert first.keys() == second.keys() == {"greet", "team__shout", "info", "numbers", "boom", "slow"}
    warnings = [r.getMessage() for r in caplog.records if r.name == "orchestrator.mcp"]
    assert len(warnings) == 2  # once each, however often the tools are listed
    assert any(w.startswith("tool 'broken' not served: ") for w in warnings)
    assert any("its MCP name 'team__shout' is taken by" in w for w in warnings)


@MODES
async def test_mcp_timeout_is_capped_by_max_timeout(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served]), max_timeout=0.2), mode=mode) as client:
            started = time.monotonic()
            implicit = await client.call_tool("slow", {})
            explicit = await client.call_tool("slow", {"$timeout": 60})
            elapsed = time.monotonic() - started
    assert text(implicit) == text(explicit) == "InvocationTimeout: timed out after 0.2 s (tool 'slow')"
    assert elapsed < 5


@MODES
async def test_mcp_envelope_is_the_servers_not_the_callers(served, mode):
    forged = {"transport": "forged", "client": {"name": "evil"}}
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode, client_info=CLIENT) as client:
            refused = await client.call_tool("info", {"k": "v", "$context": {"envelope": forged}})
            result = await client.call_tool("info", {"k": "v", "$context": {"locals": {"x": 1}}})
            version = client.protocol_version
    assert refused.is_error
    assert text(refused).startswith("SecurityError: $context.envelope is not accepted from MCP callers")
    envelope = result.structured_content["envelope"]
    assert envelope["transport"] == "mcp"
    assert envelope["client"] == {"name": "pytest-client", "version": "1.2.3"}
    assert isinstance(envelope["session"], str) and envelope["request_id"] is not None
    assert envelope["protocol_version"] == version
    assert result.structured_content["args"] == {"k": "v"}


async def test_mcp_handshake_session_is_told_when_the_list_changes(served):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    server = build_server(Manager([served]), poll_interval=0.05)
    with anyio.fail_after(LIMIT):
        async with Client(server, mode="legacy", message_handler=on_message) as client:
            assert "late" not in by_name(await client.list_tools())
            add_tool(served)
            await changed.wait()
            assert by_name(await client.list_tools())["late"].description == "Added while serving."


async def test_mcp_listen_stream_is_told_when_the_list_changes(served):
    server = build_server(Manager([served]), poll_interval=0.05)
    with anyio.fail_after(LIMIT):
        async with Client(server) as client:
            assert client.protocol_version == "2026-07-28"
            async with client.listen(tools_list_changed=True) as events:
                add_tool(served)
                async for _event in events:
                    break
            assert "late" in by_name(await client.list_tools())


# -- over stdio ----------------------------------------------------------------------


def stdio(tools: Path, mode: str, **options) -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-c", STDIO, str(tools), "0.1"])
    return Client(params, mode=mode, client_info=CLIENT, **options)


async def test_mcp_stdio_end_to_end(served):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(LIMIT):
        async with stdio(served, "legacy", message_handler=on_message) as client:
            assert client.server_info.name == "toolcascade"
            assert client.server_capabilities.tools.list_changed is True
            tools = by_name(await client.list_tools())
            assert "secret" not in tools and "late" not in tools
            assert tools["team__shout"].input_schema["required"] == ["value"]

            assert text(await client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
            assert text(await client.call_tool("team__shout", {"value": "hi"})) == "HI!"
            forged = await client.call_tool("info", {"a": 1, "$context": {"envelope": {"transport": "forged"}}})
            assert forged.is_error and "$context.envelope is not accepted" in text(forged)
            info = await client.call_tool("info", {"a": 1})
            assert info.structured_content["args"] == {"a": 1}
            envelope = info.structured_content["envelope"]
            assert envelope["transport"] == "mcp" and envelope["client"]["name"] == "pytest-client"
            assert envelope["session"] and envelope["protocol_version"] == "2025-11-25"

            invalid = await client.call_tool("greet", {})
            assert invalid.is_error and text(invalid).startswith("ArgsValidationError: ")
            locked = await client.call_tool("greet", {"name": "x", "$middleware": {"validate-args": {"remove": True}}})
            assert locked.is_error and text(locked).startswith("SecurityError: ")
            overrides = await client.call_tool("greet", {"name": "x", "$overrides": {"k": 1}})
            assert overrides.is_error and "$overrides is not accepted" in text(overrides)

            add_tool(served)
            await changed.wait()
            assert "late" in by_name(await client.list_tools())


async def test_mcp_stdio_modern_client_listens_for_changes(served):
    with anyio.fail_after(LIMIT):
        async with stdio(served, "auto") as client:
            assert client.protocol_version == "2026-07-28"
            info = await client.call_tool("info", {})
            assert info.structured_content["envelope"]["client"] == {"name": "pytest-client", "version": "1.2.3"}
            async with client.listen(tools_list_changed=True) as events:
                add_tool(served)
                async for _event in events:
                    break
            assert "late" in by_name(await client.list_tools())


# -- over streamable HTTP ---------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("http") / "tools"
    folder.mkdir()
    for rel in ("greet.md", "team/shout.md", "info.py", "secret.md"):
        path = folder / rel
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(line[8:] for line in TOOLS[rel].splitlines()).lstrip("\n"), encoding="utf-8")
    port = free_port()
    code = (
        "import sys; from orchestrator import Manager; from orchestrator.mcp import serve; "
        "serve(Manager([sys.argv[1]]), http=sys.argv[2])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(folder), f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        if not listening(process, port, LIMIT):
            raise RuntimeError(f"the HTTP server did not start: {process.stderr.read().decode()}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)
        process.stderr.close()


# asyncio only: on trio the SDK's HTTP client leaves its SSE response generator
# unclosed (a ResourceWarning, an error here); the server runs on asyncio either way.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@MODES
async def test_mcp_streamable_http(http_url, mode):
    with anyio.fail_after(LIMIT):
        async with Client(http_url, mode=mode, client_info=CLIENT) as client:
            assert client.server_capabilities.tools.list_changed is True
            tools = by_name(await client.list_tools())
            assert set(tools) == {"greet", "team__shout", "info"}
            assert text(await client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
            assert text(await client.call_tool("team__shout", {"value": "hi"})) == "HI!"
            envelope = (await client.call_tool("info", {})).structured_content["envelope"]
            invalid = await client.call_tool("greet", {"name": 1})
    # Stateless HTTP (tests/test_mcp_scale.py): no Mcp-Session-Id; a handshake-era request stands alone.
    assert not envelope["session"]
    if mode == "legacy":
        assert envelope["client"] is None  # only the initialize request carried it
    else:
        assert envelope["client"] == {"name": "pytest-client", "version": "1.2.3"}
    assert invalid.is_error and text(invalid).startswith("ArgsValidationError: ")


# -- the official MCP Inspector ------------------------------------------------------------

# The pinned release, run as tests/mcp_inspector.py says (its own command, found through npx once).


@needs_npx
def test_mcp_inspector_cli_lists_and_calls(served, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(
        "import sys\nfrom orchestrator import Manager\nfrom orchestrator.mcp import serve\n"
        "serve(Manager([sys.argv[1]]))\n",
        encoding="utf-8",
    )
    base = [*inspector(), "--cli", sys.executable, str(script), str(served)]

    def inspect(*args: str) -> dict:
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = inspect("--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == {"greet", "team__shout", "info", "numbers", "boom", "slow"}
    called = inspect("--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Ada")
    assert called["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert not called.get("isError")  # a nested tool's call through the Inspector: the streamable HTTP test below


@needs_npx
def test_mcp_inspector_cli_over_streamable_http(http_url):
    command = [*inspector(), "--cli", http_url, "--transport", "http"]
    done = subprocess.run(
        [*command, "--method", "tools/call", "--tool-name", "team__shout", "--tool-arg", "value=hi"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == [{"type": "text", "text": "HI!"}]
