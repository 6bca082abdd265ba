"""MCP prompts and completion (issue 27), through the real SDK client, over stdio, and with the MCP Inspector.

Markdown tools (templates, agents, Claude commands, Copilot prompt files,
Prompty files) are served as prompts as well as tools; ``mcp.serve`` says
otherwise. ``prompts/get`` renders the prompt with the arguments, never a
model's answer. ``completion/complete`` offers ``enum`` and ``examples``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference
from mcp_inspector import inspector, needs_npx

from orchestrator import Manager
from orchestrator.completion import MAX_VALUES, candidates
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

LIMIT = 20
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
FORMATS = Path(__file__).parent / "formats"
GREET = {
    "description": "Greets someone.",
    "metadata": {
        "params": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Who to greet"},
                "tone": {"type": "string", "enum": ["formal", "friendly", "Funny"], "examples": ["fun", "formal"]},
                "times": {"type": "integer", "examples": [1, 2, 3]},
            },
            "required": ["name"],
        },
        "mcp": {"title": "Greeting"},
    },
}
AGENT = {
    "description": "An agent.",
    "metadata": {
        "params": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "model": {"provider": "scripted", "script": [{"answer": "THE MODEL ANSWERED"}]},
        "returns": {"type": "object"},
    },
}


def md(front: dict, body: str) -> str:
    return "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body + "\n"


@pytest.fixture
def served(write, tools: Path) -> Path:
    write(
        "tools/greet.md", md(GREET, "{{ 'Dear' if args.get('tone') == 'formal' else 'Hi' }} {{ args.name }}" + "!" * 1)
    )
    write("tools/forecast.md", md(AGENT, "What is the weather in {{ args.city }}?"))
    write("tools/code.py", "def main(ctx):\n    return 'code ran'\n")
    write("tools/slash.md", md({"metadata": {"mcp": {"serve": ["prompt"]}}}, "Only a prompt."))
    write("tools/nowhere.md", md({"metadata": {"mcp": {"serve": []}}}, "Neither."))
    write("tools/shout.md", md({"metadata": {"params": {"type": "string"}}}, "{{ args | upper }}"))
    return tools


def names(listed) -> set[str]:
    return {item.name for item in getattr(listed, "prompts", None) or listed.tools}


@MODES
async def test_mcp_markdown_tools_are_prompts_and_code_is_not_unless_metadata_says(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            assert client.server_capabilities.prompts is not None
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            tools = names(await client.list_tools())
            as_tool = await client.call_tool("slash", {})
    assert set(prompts) == {"greet", "forecast", "slash", "shout"}
    assert tools == {"greet", "forecast", "code", "shout"}
    assert as_tool.is_error and "slash" in as_tool.content[0].text  # a prompt only is not a tool
    greet = prompts["greet"]
    assert greet.title == "Greeting" and greet.description == "Greets someone."
    assert [(a.name, a.description, a.required) for a in greet.arguments] == [
        ("name", "Who to greet", True),
        ("tone", None, False),
        ("times", None, False),
    ]
    assert [(a.name, a.required) for a in prompts["shout"].arguments] == [("value", True)]


@MODES
async def test_mcp_prompts_get_renders_the_prompt_never_the_models_answer(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            greet = await client.get_prompt("greet", {"name": "Ada", "tone": "formal", "times": "2"})
            agent = await client.get_prompt("forecast", {"city": "Oslo"})
            shout = await client.get_prompt("shout", {"value": "hi"})
            called = await client.call_tool("forecast", {"city": "Oslo"})
    assert [(m.role, m.content.text) for m in greet.messages] == [("user", "Dear Ada!")]
    assert agent.messages[0].content.text == "What is the weather in Oslo?"
    assert shout.messages[0].content.text == "HI"
    assert called.is_error  # as a tool the agent runs its model (whose answer here fails its returns)


@MODES
async def test_mcp_prompts_get_errors_say_what_to_fix(served, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            with pytest.raises(MCPError) as missing:
                await client.get_prompt("greet", {})
            with pytest.raises(MCPError) as wrong:
                await client.get_prompt("greet", {"name": "Ada", "times": "many"})
            with pytest.raises(MCPError) as unknown:
                await client.get_prompt("code", {})
            with pytest.raises(MCPError) as neither:
                await client.get_prompt("nowhere", {})
    assert "ArgsValidationError" in str(missing.value) and "name" in str(missing.value)
    assert "times" in str(wrong.value)
    assert "no prompt 'code'" in str(unknown.value) and "greet" in str(unknown.value)
    assert "no prompt 'nowhere'" in str(neither.value)


@MODES
async def test_mcp_completion_offers_enum_and_examples_by_prefix(served, mode):
    greet = PromptReference(name="greet")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([served])), mode=mode) as client:
            assert client.server_capabilities.completions is not None
            tone = await client.complete(greet, {"name": "tone", "value": "f"})
            funny = await client.complete(greet, {"name": "tone", "value": "FUN"})
            times = await client.complete(greet, {"name": "times", "value": ""})
            free = await client.complete(greet, {"name": "name", "value": "A"})
            code = await client.complete(PromptReference(name="code"), {"name": "x", "value": ""})
            template = await client.complete(ResourceTemplateReference(uri="file:///{x}"), {"name": "x", "value": ""})
    assert tone.completion.values == ["formal", "friendly", "Funny", "fun"] and tone.completion.total == 4
    assert funny.completion.values == ["Funny", "fun"]
    assert times.completion.values == ["1", "2", "3"]
    assert free.completion.values == [] and code.completion.values == [] and template.completion.values == []


def test_mcp_completion_candidates_are_capped_and_counted():
    from orchestrator.completion import complete
    from orchestrator.listings import Listing, offer

    schema = {"type": "object", "properties": {"n": {"enum": [f"v{i}" for i in range(150)]}}}
    listing = Listing("t", "t", None, schema, False, offer("t", "markdown", {}), None, None, False)
    found = complete(listing, "n", "v")
    assert len(found.values) == MAX_VALUES and found.total == 150 and found.has_more
    assert candidates({"enum": ["a", {"b": 1}], "examples": ["a"]}) == ["a", '{"b": 1}']


async def test_mcp_imported_formats_are_prompts(tmp_path):
    project = tmp_path / "hosts"
    shutil.copytree(FORMATS / "hosts", project)
    shutil.copy(FORMATS / "prompty" / "tagline.prompty", project / "tools")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([project, project / "tools"])), mode="legacy") as client:
            prompts = names(await client.list_prompts())
            command = await client.get_prompt("scaffold", {"arguments": "web app"})  # a Claude Code command
            copilot = await client.get_prompt("lint", {})  # a Copilot prompt file
            prompty = await client.get_prompt("tagline", {"product": "Soap"})  # a Prompty file
    assert {"scaffold", "lint", "tagline"} <= prompts
    assert command.messages[0].content.text == "Create the module web app with an empty test file beside it."
    assert copilot.messages[0].content.text.startswith("Run the linters on ${file}")
    assert "Soap" in prompty.messages[0].content.text


async def test_mcp_prompts_over_stdio_2026_client(served):
    code = "import sys; from orchestrator import Manager; from orchestrator.mcp import serve; serve(Manager([sys.argv[1]]))"
    params = StdioServerParameters(command=sys.executable, args=["-c", code, str(served)])
    with anyio.fail_after(LIMIT):
        async with Client(params, mode="auto") as client:
            assert "greet" in names(await client.list_prompts())
            rendered = await client.get_prompt("greet", {"name": "Bo"})
            tone = await client.complete(PromptReference(name="greet"), {"name": "tone", "value": "fr"})
    assert rendered.messages[0].content.text == "Hi Bo!"
    assert tone.completion.values == ["friendly"]


@needs_npx
def test_mcp_inspector_cli_lists_and_gets_prompts_and_sees_annotations(served, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(
        "import sys\nfrom orchestrator import Manager\nfrom orchestrator.mcp import serve\nserve(Manager([sys.argv[1]]))\n",
        encoding="utf-8",
    )
    base = [*inspector(), "--cli", sys.executable, str(script), str(served)]

    def inspect(*args: str) -> dict:
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = inspect("--method", "prompts/list")
    assert {p["name"] for p in listed["prompts"]} == {"greet", "forecast", "slash", "shout"}
    got = inspect("--method", "prompts/get", "--prompt-name", "greet", "--prompt-args", "name=Ada", "tone=formal")
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Dear Ada!"}}]
    tools = {t["name"]: t for t in inspect("--method", "tools/list")["tools"]}
    assert tools["greet"]["title"] == "Greeting"
    assert tools["greet"]["annotations"]["readOnlyHint"] is False
    assert tools["greet"]["annotations"]["destructiveHint"] is True


# -- list and show say how each tool is served -----------------------------------------------


def cli_run(*args: str):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    return CliRunner().invoke(cli, list(args), prog_name="toolcascade")


def test_list_shows_how_each_tool_is_served_over_mcp(served):
    done = cli_run("list", "--mcp", "--path", str(served))
    assert done.exit_code == 0, done.output
    rows = {line.split("\t")[0]: line.split("\t") for line in done.output.splitlines()}
    assert rows["NAME"][:3] == ["NAME", "KIND", "MCP"]
    assert rows["greet"][2] == "tool, prompt" and rows["code"][2] == "tool"
    assert rows["slash"][2] == "prompt" and rows["nowhere"][2] == "-"
    plain = cli_run("list", "--path", str(served))
    assert "MCP" not in plain.output.splitlines()[0]  # the column only when asked for
    listed = {
        row["name"]: row["mcp"] for row in json.loads(cli_run("list", "--json", "--mcp", "--path", str(served)).output)
    }
    assert listed["greet"] == {"serve": ["tool", "prompt"]} and listed["code"] == {"serve": ["tool"]}


def test_list_names_a_tool_whose_mcp_metadata_is_malformed(served, write):
    write("tools/bad.md", "---\nmetadata:\n  mcp: {serve: [everything]}\n---\nbad\n")
    done = cli_run("list", "--mcp", "--path", str(served))
    bad = next(line for line in done.output.splitlines() if line.startswith("bad\t"))
    assert "not served:" in bad and "mcp.serve" in bad and "tool and prompt" in bad


def test_show_explains_how_a_tool_is_served_over_mcp(served):
    data = json.loads(cli_run("show", "greet", "--json", "--path", str(served)).output)["mcp"]
    assert data["serve"] == ["tool", "prompt"] and data["title"] == "Greeting"
    assert data["reasons"]["serve"] == "tool and prompt: the default for markdown tools"
    assert data["reasons"]["destructive"].startswith("true: unset")
    code = json.loads(cli_run("show", "code", "--json", "--path", str(served)).output)["mcp"]
    assert code["serve"] == ["tool"] and "python tools" in code["reasons"]["serve"]
    shown = cli_run("show", "slash", "--path", str(served))
    assert "served over MCP" in shown.output and "prompt: set by mcp.serve" in shown.output


CITIES = """
frontmatter = {"description": "Cities for a country, by prefix.", "metadata": {"visibility": "hidden"}}

def main(ctx):
    cities = {"fr": ["Paris", "Lyon", "Pau"], "jp": ["Tokyo", "Kyoto"]}[ctx.args["arguments"].get("country", "fr")]
    return [c for c in cities if c.lower().startswith(ctx.args["value"].lower())]
"""


@MODES
async def test_mcp_completion_asks_the_tool_the_author_names(write, tools, mode):
    params = {"type": "object", "properties": {"country": {"enum": ["fr", "jp"]}, "city": {"type": "string"}}}
    write("tools/cities.py", CITIES)
    write("tools/broken.py", "def main(ctx):\n    raise ValueError('no')\n")
    write("tools/trip.md", md({"metadata": {"params": params, "complete-with": {"city": "cities"}}}, "Go"))
    write("tools/both.md", md({"metadata": {"params": params, "complete-with": "broken"}}, "Go"))
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([tools])), mode=mode) as client:
            trip = PromptReference(name="trip")
            french = await client.complete(trip, {"name": "city", "value": "p"})
            japanese = await client.complete(trip, {"name": "city", "value": "k"}, context_arguments={"country": "jp"})
            country = await client.complete(trip, {"name": "country", "value": ""})
            broken = await client.complete(PromptReference(name="both"), {"name": "country", "value": "j"})
    assert french.completion.values == ["Paris", "Pau"]
    assert japanese.completion.values == ["Kyoto"]
    assert country.completion.values == ["fr", "jp"]  # the mapping names no tool for country: the enum alone
    assert broken.completion.values == ["jp"]  # a failing completion tool adds nothing and fails nothing
