"""``toolcascade export``: our tools written back as Prompty files and Claude Code subagents (issue 15).

Round trips load the written file through its adapter and compare behaviour:
the same params, model and prompt (rendered, or sent to the scripted model).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator import ConfigurationError, Manager
from orchestrator.cli import cli
from orchestrator.export import export_tool
from orchestrator.frozen import thaw
from orchestrator.hosttools import IMPLEMENTED
from orchestrator.translation import unliteral

pytestmark = pytest.mark.anyio

SUMMARIZE = """
---
description: Summarizes a text for an audience.
metadata:
  model: {provider: openai, name: gpt-4o-mini, api-key-env: SHOP_OPENAI_KEY, max-tokens: 200, options: {temperature: 0.1}}
  params:
    type: object
    properties:
      text: {type: string, description: The text to summarize}
      audience: {type: string, default: engineers, examples: [managers]}
    required: [text]
  system: "You write summaries for {{ args.audience | default('engineers') }}."
  messages:
    - {role: user, content: "Summarize: the sky is blue because of Rayleigh scattering."}
    - {role: assistant, content: "Blue light scatters most."}
---
Summarize for {{ args.audience }}{% if args.text | length > 40 %} (long){% endif %}: {{ args['text'] }}
"""

REVIEWER = """
---
description: Reviews a diff for security problems.
metadata:
  model: anthropic:claude-sonnet-4-5
  tools: [lookup-cve]
  params:
    type: object
    properties: {prompt: {type: string, description: The task for the reviewer agent.}}
    required: [prompt]
    additionalProperties: false
  system: |-
    You review diffs for injection, secrets and unsafe deserialization.
    Name the file and line of each finding.
---
{{ args.prompt }}
"""


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="toolcascade")


def scripted(*turns) -> dict:
    return {"model": {"provider": "scripted", "script": list(turns)}}


async def test_export_prompty_round_trip_keeps_params_model_and_prompt(write, tmp_path):
    write("tools/summarize.md", SUMMARIZE)
    ours = Manager([tmp_path / "tools"])
    exported = export_tool(ours.find_tool("summarize"), "prompty")
    assert exported.lost == ()
    assert "{{ audience }}" in exported.text and "{{ text }}" in exported.text and "args" not in exported.text
    write("back/summarize.prompty", exported.text)
    back = Manager([tmp_path / "back"])
    original, loaded = ours.find_tool("summarize"), back.find_tool("summarize")
    assert loaded.format == "prompty"
    assert thaw(loaded.metadata["params"]) == thaw(original.metadata["params"])
    assert thaw(loaded.metadata["model"]) == thaw(original.metadata["model"])
    assert loaded.description == original.description
    # Without a model: the same rendered prompt and system message.
    args = {"text": "Rayleigh scattering makes the daytime sky look blue to us."}
    plain = {"$remove": ["model"]}
    prompt = await ours.invoke("summarize", args, overrides=plain)
    messages = await back.invoke("summarize", args, overrides=plain)
    assert prompt == "Summarize for engineers (long): Rayleigh scattering makes the daytime sky look blue to us."
    assert messages[0] == {"role": "system", "content": "You write summaries for engineers."}
    assert messages[1:3] == thaw(original.metadata["messages"])
    assert messages[-1] == {"role": "user", "content": prompt}
    # With a model: the same request (checked by the scripted model) and answer.
    turns = ["(few-shot)", {"answer": "Sky: blue.", "expect": {"contains": ["for managers", "(long)", "Blue light"]}}]
    args["audience"] = "managers"
    assert await ours.invoke("summarize", args, overrides=scripted(*turns)) == "Sky: blue."
    assert await back.invoke("summarize", args, overrides=scripted(*turns)) == "Sky: blue."


async def test_export_prompty_round_trip_of_a_prompty_file_restores_its_fields(tmp_path, write):
    source = Path(__file__).parent / "formats" / "prompty" / "haiku-card.prompty"
    write("a/haiku-card.prompty", source.read_text())
    first = Manager([tmp_path / "a"])
    exported = export_tool(first.find_tool("haiku-card"), "prompty")
    assert exported.lost == ()
    assert "template: mustache" in exported.text and "{{#memories}}" in exported.text
    assert "sample:\n    - the lake in June" in exported.text
    write("b/haiku-card.prompty", exported.text)
    args = {"recipient": "Ada", "memories": ["the lake"]}
    assert await Manager([tmp_path / "b"]).invoke("haiku-card", args) == await first.invoke("haiku-card", args)


async def test_export_claude_agent_round_trip(write, tmp_path):
    write("tools/reviewer.md", REVIEWER)
    ours = Manager([tmp_path / "tools"])
    exported = export_tool(ours.find_tool("reviewer"), "claude-agent")
    assert exported.text.startswith("---\nname: reviewer\ndescription: Reviews a diff for security problems.\n")
    # Ours as Claude Code names them when toolcascade serve is its MCP server 'toolcascade' (issue 28).
    assert "tools: mcp__toolcascade__lookup-cve\nmodel: sonnet\n" in exported.text
    assert exported.lost == ()
    write("project/.claude/agents/reviewer.md", exported.text)
    back = Manager([tmp_path / "project"])
    original, loaded = ours.find_tool("reviewer"), back.find_tool("reviewer")
    assert loaded.format == "claude-agent"
    for key in ("model", "tools", "params", "system"):
        assert thaw(loaded.metadata[key]) == thaw(original.metadata[key]), key
    assert loaded.prompt == original.prompt.strip()
    turn = {"answer": "No findings.", "expect": {"contains": ["Name the file and line", "check auth.py"]}}
    overrides = {"model": {"provider": "scripted", "script": [turn]}, "tools": []}
    for manager in (ours, back):
        assert await manager.invoke("reviewer", {"prompt": "check auth.py"}, overrides=overrides) == "No findings."


def test_export_claude_agent_round_trip_of_a_claude_file_keeps_its_fields(write, tmp_path):
    write(
        "p/.claude/agents/tester.md",
        "---\nname: tester\ndescription: Runs the tests.\ntools: Bash, Read\nmodel: haiku\ncolor: green\n---\n"
        "Run the test suite and report failures.\n",
    )
    exported = export_tool(Manager([tmp_path / "p"]).find_tool("tester"), "claude-agent")
    assert exported.lost == ()
    assert exported.text == (
        "---\nname: tester\ndescription: Runs the tests.\ntools: Bash, Read\nmodel: haiku\ncolor: green\n---\n"
        "Run the test suite and report failures.\n"
    )


def test_export_says_precisely_what_is_lost(write, tmp_path):
    write(
        "tools/base.md",
        "---\nmetadata: {retry: {attempts: 2}}\n---\nbase\n",
    )
    write(
        "tools/lossy.md",
        """
        ---
        description: Uses what Prompty lacks.
        metadata:
          $inherit: base
          cache: {size: 10}
          tools: [base]
          params: {type: object, properties: {n: {type: integer, minimum: 1}}, additionalProperties: false}
          model: {provider: openai, name: gpt-4o, timeout: 30}
        ---
        Tool {{ tool.name }} with {{ args.n }} :base[x]
        """,
    )
    exported = export_tool(Manager([tmp_path / "tools"]).find_tool("lossy"), "prompty")
    lost = {item.field: item.why for item in exported.lost}
    assert set(lost) == {"$inherit", "cache", "tools", "params.additionalProperties", "model.timeout", "prompt"}
    assert "Prompty has no request timeout" in lost["model.timeout"]
    assert "json_schema:\n      minimum: 1" in exported.text  # kept: Prompty inputs carry a json_schema
    assert [item.why for item in exported.lost if item.field == "prompt"] == [
        "reads 'tool', which Prompty templates do not have: it renders empty there",
        "directive :base runs only in toolcascade: it stays text",
    ]


def test_export_cli_writes_the_file_and_lists_losses_on_stderr(write, tmp_path):
    write("tools/summarize.md", SUMMARIZE)
    write("tools/lossy.md", "---\nmetadata: {cache: {size: 3}}\n---\nhello\n")
    out = tmp_path / "out" / "summarize.prompty"
    result = cli_run("export", "summarize", "--format", "prompty", "-o", str(out), "--path", str(tmp_path / "tools"))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    # its own fields all map; the default authority's validate-args (it has params) does not run in Prompty
    assert [line.split(": ")[:3] for line in result.stderr.splitlines()] == [
        ["lost", "validate-args", "middleware from authority 'default'"]
    ]
    assert out.read_text().startswith("---\nname: summarize\n")

    lossy = cli_run("export", "lossy", "--format", "prompty", "--path", str(tmp_path / "tools"))
    assert lossy.exit_code == 0
    assert lossy.stdout.startswith("---\nname: lossy\n")
    assert lossy.stderr.splitlines() == [
        "lost: cache: toolcascade metadata (middleware or data): no equivalent in this format"
    ]

    target = tmp_path / "strict.prompty"
    strict = cli_run(
        "export", "lossy", "--format", "prompty", "--strict", "-o", str(target), "--path", str(tmp_path / "tools")
    )
    assert strict.exit_code == 1
    assert not target.exists()
    assert strict.stderr.splitlines()[-1].startswith("error: 'lossy' does not export to prompty without loss")


def test_export_refuses_python_tools_and_unknown_names(write, tmp_path):
    write("tools/code.py", "def main(ctx):\n    return 1\n")
    manager = Manager([tmp_path / "tools"])
    with pytest.raises(ConfigurationError, match="only markdown tools"):
        export_tool(manager.find_tool("code"), "prompty")
    with pytest.raises(ConfigurationError, match="cannot export to 'yaml'"):
        export_tool(manager.find_tool("code"), "yaml")
    missing = cli_run("export", "nope", "--format", "prompty", "--path", str(tmp_path / "tools"))
    assert missing.exit_code == 1 and missing.stderr.startswith("error: ToolNotFoundError: no tool 'nope'")
    bad = cli_run("export", "code", "--format", "json", "--path", str(tmp_path / "tools"))
    # a usage error naming the option and our formats; the sentence around them is click's, never asserted
    assert bad.exit_code == 2 and "--format" in bad.stderr and "prompty" in bad.stderr and "json" in bad.stderr


def test_export_an_input_named_like_our_variables_is_not_reported(write, tmp_path):
    write(
        "tools/pick.md",
        "---\nmetadata:\n  params: {type: object, properties: {tool: {type: string}}}\n---\nUse {{ args.tool }}.\n",
    )
    exported = export_tool(Manager([tmp_path / "tools"]).find_tool("pick"), "prompty")
    assert exported.lost == ()
    assert exported.text.endswith("user:\nUse {{ tool }}.\n")


MIDDLEWARE = """
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    return str(await ctx.target.manager.next()).upper()
"""


def test_export_names_the_middleware_of_authorities_and_inherited_tools_it_will_not_run(write, tmp_path):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  shout: {}\n---\n")
    write("tools/shout.py", MIDDLEWARE)
    write("tools/loud.py", MIDDLEWARE.replace("upper", "strip"))
    write("tools/base.md", "---\nmetadata:\n  loud: {}\n---\nbase\n")
    write(
        "tools/hello.md",
        "---\ndescription: Greets.\nmetadata:\n  $inherit: base\n"
        "  params: {type: object, properties: {name: {type: string}}}\n---\nHello {{ args.name }}\n",
    )
    tools = str(tmp_path / "tools")
    result = cli_run("export", "hello", "--format", "prompty", "--path", tools)
    assert result.exit_code == 0, result.output
    lost = result.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lost] == ["$inherit", "shout", "loud", "validate-args"], lost
    assert "authority 'AUTHORITY.md'" in lost[1] and "tool 'base'" in lost[2] and "authority 'default'" in lost[3]
    assert not any(name in result.stderr for name in ("execute", "trust", "directives"))  # the host runs the body
    strict = cli_run("export", "hello", "--format", "prompty", "--strict", "--path", tools)
    assert strict.exit_code == 1 and strict.stdout == ""


# -- exports that load back and run (issue 28) ----------------------------------------------------

FIXTURES = Path(__file__).parent / "formats"
PROJECTS = [FIXTURES / name for name in ("claude", "copilot", "prompty", "prompty2", "hosts")]
# What a difference in the rendered request may be explained by: a lost line on one of these fields.
REQUEST_FIELDS = ("prompt", "system", "messages", "params", "prompty.template")
PLAIN = {"$remove": ["model", "returns"]}  # the request itself, rendered: no model asked, no answer checked


def fixture_tools() -> list[tuple[Path, str]]:
    """Every tool of every format fixture project (our own tools there included), by project and name."""
    found = []
    for project in PROJECTS:
        manager = Manager([project / "tools", project] if (project / "tools").is_dir() else [project])
        found += [(project, info.ref) for info in manager.list_tools()]  # a broken fixture fails, never hides
    return sorted(found)


def sample_args(params: Any) -> dict[str, Any]:
    """Args a tool's params accept: each property's default, first example, or a plain value of its type."""
    plain = {"string": "alpha beta", "integer": 3, "number": 1.5, "boolean": True, "array": [], "object": {}}
    args: dict[str, Any] = {}
    for name, prop in ((params or {}).get("properties") or {}).items():
        if "default" in prop:
            args[name] = prop["default"]
        elif prop.get("examples"):
            args[name] = prop["examples"][0]
        else:
            kind = prop.get("type", "string")
            args[name] = plain.get(kind if isinstance(kind, str) else "string", "alpha beta")
        if name in ("arguments", "prompt", "input") and args[name] == "":
            args[name] = "alpha beta"
    return args


def rendered(manager: Manager, ref: str, args: dict[str, Any]) -> list[Any]:
    """The request a tool sends, as messages: its system, its messages and its rendered prompt (no model asked)."""
    result = manager.invoke_sync(ref, args, overrides=PLAIN)
    if isinstance(result, list):
        return [dict(message) for message in thaw(result)]
    explanation = manager.explain(ref, args)
    messages: list[Any] = []
    for key, role in (("system", "system"),):
        try:
            value = explanation.key(key).value
        except KeyError:
            continue
        messages.append({"role": role, "content": str(value).strip()})
    try:
        messages += [dict(message) for message in thaw(explanation.key("messages").value)]
    except KeyError:
        pass
    return [*messages, {"role": "user", "content": str(result).strip()}]


def exported_back(tmp_path: Path, tool_name: str, exported) -> tuple[Manager, str]:
    if exported.format == "prompty":
        folder = tmp_path / "back"
        (folder / f"{tool_name}.prompty").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"{tool_name}.prompty").write_text(exported.text, encoding="utf-8")
    else:
        folder = tmp_path / "back"
        target = folder / ".claude" / "agents" / f"{tool_name.replace(':', '-')}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(exported.text, encoding="utf-8")
    manager = Manager([folder])
    refs = [info.ref for info in manager.list_tools()]
    assert len(refs) == 1, refs
    return manager, refs[0]


TASKS = ("arguments", "input", "prompt")
"""The args that carry a command's or prompt file's request: a subagent's task, its user message."""
UNRENDERED = ("does not render", "prior messages are dropped")
"""What a lost line says when Claude Code shows the request otherwise: a template it does not render, messages dropped."""


def flat(messages: list[Any]) -> str:
    """A request's text as the model reads it, roles aside: its messages' contents, in order."""
    return "\n\n".join(text for text in (str(m["content"]).strip() for m in messages) if text)


# Template syntax Claude Code shows as written: whole loops, conditions and mustache sections, then any tag.
_UNRENDERED_BLOCK = re.compile(
    r"\{%-?\s*(for|if)\b.*?\{%-?\s*end\1\s*-?%\}|\{\{\s*[#^]\s*([\w.]+)\s*\}\}.*?\{\{\s*/\s*\2\s*\}\}", re.DOTALL
)
_UNRENDERED_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


def differs_only_in_templates(written: str, shown: str) -> bool:
    """Whether ``shown`` (the source's rendered request) is ``written`` (the exported text) with each template
    construct Claude Code does not render (a tag, a loop, a condition, a mustache section) standing for any text."""
    pieces = _UNRENDERED_TAG.split(_UNRENDERED_BLOCK.sub("{{ }}", written))
    words = [r"\s*".join(re.escape(word) for word in piece.split()) for piece in pieces]
    return re.fullmatch(r"\s*" + r"[\s\S]*?".join(words) + r"\s*", shown) is not None


def same_request_as_a_subagent(source: Manager, ref: str, back: Manager, back_ref: str, args: dict[str, Any]) -> None:
    """The subagent's system prompt is the source's request without its task, and the task its user message."""
    without_task = {**args, **{key: "" for key in TASKS if key in args}}
    messages = rendered(back, back_ref, {"prompt": "the task"})
    assert messages[-1] == {"role": "user", "content": "the task"}
    assert flat(messages[:-1]) == flat(rendered(source, ref, without_task))


def same_request_but_for_its_templates(source: Manager, ref: str, back: Manager, back_ref: str, args: dict[str, Any]):
    """A lost line said Claude Code does not render the subagent's templates: they are the only difference."""
    without_task = {**args, **{key: "" for key in TASKS if key in args}}
    written = back.find_tool(back_ref).metadata.get("system") or ""
    text = unliteral(str(written))
    assert differs_only_in_templates(str(written) if text is None else text, flat(rendered(source, ref, without_task)))


@pytest.mark.parametrize("fmt", ["prompty", "claude-agent"])
@pytest.mark.parametrize(("project", "ref"), fixture_tools(), ids=lambda item: getattr(item, "name", item))
def test_every_fixture_exports_loads_back_and_renders_the_same_or_says_why(tmp_path, project, ref, fmt, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.invalid")  # the Prompty fixtures read it
    source = Manager([project / "tools", project] if (project / "tools").is_dir() else [project])
    tool = source.find_tool(ref)
    exported = export_tool(tool, fmt)
    lost = {item.field for item in exported.lost}
    back, back_ref = exported_back(tmp_path, tool.name, exported)
    loaded = back.find_tool(back_ref)  # loads back: never a ToolDefinitionError
    assert loaded.format == fmt
    # Every tool it offers is ours, and every host tool it names is kept as data: nothing fails to run for them.
    offered = set(loaded.metadata.get("tools") or ()) - set(tool.metadata.get("tools") or ())
    if "tools" in lost:  # no tools line, and said so: Claude Code's own tools, which we run too, come back
        offered -= IMPLEMENTED
    assert not offered
    args = sample_args(thaw(tool.metadata.get("params")))
    if fmt == "claude-agent":
        # A subagent's prompt is its system prompt plus the task: the same text unless a lost line says
        # Claude Code shows it otherwise ("prompt appended to the system prompt" alone is no such line).
        if not any(word in item.why for item in exported.lost for word in UNRENDERED):
            same_request_as_a_subagent(source, ref, back, back_ref, args)
        else:
            same_request_but_for_its_templates(source, ref, back, back_ref, args)
    elif not (lost & set(REQUEST_FIELDS) or any(field.startswith("messages") for field in lost)):
        assert rendered(back, back_ref, args) == rendered(source, ref, args)  # nothing said: the same request
    back_args = sample_args(thaw(loaded.metadata.get("params")))
    assert back.invoke_sync(back_ref, back_args, overrides=PLAIN) is not None


def test_export_claude_agent_never_writes_another_hosts_tools(tmp_path):
    project = FIXTURES / "copilot"
    tool = Manager([project]).find_tool("new-component")
    exported = export_tool(tool, "claude-agent")
    head = exported.text.split("\n---\n", 1)[0]
    assert "codebase" not in head and "editFiles" not in head
    assert "github/*" not in head  # VS Code's own, which we do not run
    # codebase and editFiles run as our host tools: Claude Code's own Grep, Glob, Read, Edit and Write there
    assert "\ntools: mcp__toolcascade__summarize, Grep, Glob, Read, Edit, Write\n" in head + "\n"
    lost = {item.field: item.why for item in exported.lost}
    assert "not written" in lost["host-tools"] and "github/*" in lost["host-tools"]
    back, ref = exported_back(tmp_path, tool.name, exported)
    loaded = back.find_tool(ref)
    assert list(loaded.metadata["tools"]) == list(tool.metadata["tools"]) and "host-tools" not in loaded.metadata


def test_export_claude_agent_says_when_no_tools_line_widens_what_claude_code_offers(write, tmp_path):
    write("tools/plain.md", "---\ndescription: Plain.\nmetadata:\n  model: sonnet\n---\n{{ args.prompt }}\n")
    exported = export_tool(Manager([tmp_path / "tools"]).find_tool("plain"), "claude-agent")
    assert "tools:" not in exported.text
    assert {item.field: item.why for item in exported.lost}["tools"].startswith("no tools line: Claude Code offers")


async def test_export_prompty_escapes_lines_that_would_read_back_as_role_markers(write, tmp_path):
    body = "Answer in three parts.\nTOOLS:\nlist them\n# Human:\nExample:\nuser:\n{{ args.topic }}"
    write("tools/parts.md", "---\ndescription: Parts.\n---\n" + body + "\n")
    ours = Manager([tmp_path / "tools"])
    exported = export_tool(ours.find_tool("parts"), "prompty")
    assert "{{ 'TOOLS:' }}" in exported.text and "{{ '# Human:' }}" in exported.text
    assert "\nExample:\n" in exported.text  # a heading that is no role stays as written
    # Prompty itself renders before it splits: only a line naming one of its roles is reported.
    assert [(item.field, item.why) for item in exported.lost] == [
        ("prompt", "the line 'user:' starts a new message in Prompty itself")
    ]
    write("back/parts.prompty", exported.text)
    back = Manager([tmp_path / "back"])
    messages = await back.invoke("parts", {"topic": "tea"})
    assert messages == [{"role": "user", "content": await ours.invoke("parts", {"topic": "tea"})}]


def test_export_prompty_escapes_role_lines_inside_literal_text(tmp_path):
    project = tmp_path / "p"
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "steps.md").write_text("Plan {{ it }}:\nTOOLS:\n$ARGUMENTS\n", encoding="utf-8")
    source = Manager([project])
    exported = export_tool(source.find_tool("steps"), "prompty")
    back, ref = exported_back(tmp_path, "steps", exported)
    args = {"arguments": "tea"}
    assert rendered(back, ref, args) == rendered(source, "steps", args)


@pytest.fixture
def first_manager(tmp_path: Path) -> Manager:
    """A Manager made before Hypothesis starts: the first one raises the recursion limit, which Hypothesis watches."""
    return Manager([tmp_path])


TRICKY_LINES = [
    "TOOLS:",
    "user:",
    "# System:",
    "Example:",
    "assistant:",
    "tool:",
    "Human:",
    "sytem:",
    "user[name=x]:",
    "{{ x }}",
    "{% raw %}",
    "{% endraw %}",
    "$ARGUMENTS",
    "$1 and $2",
    "@docs/a.md",
    "!`ls`",
    "```!",
    "---",
    "",
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.sampled_from(TRICKY_LINES) | st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=12),
        max_size=8,
    ),
    fmt=st.sampled_from(["prompty", "claude-agent"]),
)
def test_any_command_body_exports_loads_back_and_renders_the_same_or_says_why(first_manager, lines, fmt):
    body = "\n".join(["Start.", *lines])
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "p" / ".claude" / "commands").mkdir(parents=True)
        (root / "p" / ".claude" / "commands" / "cmd.md").write_text(body + "\n", encoding="utf-8")
        source = Manager([root / "p"])
        exported = export_tool(source.find_tool("cmd"), fmt)
        lost = {item.field for item in exported.lost}
        back, ref = exported_back(root, "cmd", exported)
        back.find_tool(ref)
        args = {"arguments": "alpha beta"}
        if fmt == "claude-agent":
            if any(word in item.why for item in exported.lost for word in UNRENDERED):
                same_request_but_for_its_templates(source, "cmd", back, ref, args)
            else:
                same_request_as_a_subagent(source, "cmd", back, ref, args)
        elif not lost & set(REQUEST_FIELDS):
            assert rendered(back, ref, args) == rendered(source, "cmd", args)


async def test_export_claude_agent_of_a_prompt_file_makes_its_request_the_subagents_task(tmp_path, scripted):
    project = FIXTURES / "hosts"
    exported = export_tool(Manager([project / "tools", project]).find_tool("tidy"), "claude-agent")
    body = exported.text.split("\n---\n", 1)[1]
    assert body == "Sort and group the imports; remove the unused ones.\n"  # no template of the input left in it
    assert "params" not in {item.field for item in exported.lost}  # the input is the subagent's task
    scripted(inherit=[{"expect": {"contains": ["remove the unused ones", "src/app.py"]}, "answer": "tidied"}])
    back, ref = exported_back(tmp_path, "tidy", exported)  # the alias table is read when the file loads
    assert await back.invoke(ref, {"prompt": "src/app.py"}) == "tidied"


# -- a Prompty file's own text, and shorthand schemas (issues 28, 30) ---------------------------------


def concierge(write) -> None:
    """The Prompty 2 fixture whose system section loops over the chat history, in folder ``a``."""
    folder = Path(__file__).parent / "formats" / "prompty2"
    for name in ("concierge.prompty", "guest.json"):
        write(f"a/{name}", (folder / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(("fmt", "target"), [("prompty", "concierge.prompty"), ("claude-agent", "concierge.md")])
def test_export_of_a_prompty_file_writes_its_authors_text_without_lenient_reads_or_history_markers(
    tmp_path, write, fmt, target
):
    concierge(write)
    out = tmp_path / "out" / target
    result = cli_run("export", "concierge", "--format", fmt, "-o", str(out), "--path", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "|default('')" not in text and "\x02" not in text and ":role:" not in text
    assert "The guest is {{guest.name}}," in text and "{% if guest.loyalty.tier %}" in text
    assert "{% for item in history %}\n{{item.role}}:\n{{item.content}}\n{% endfor %}" in text


async def test_export_of_a_prompty_file_loads_back_with_the_same_history_messages(tmp_path, write):
    concierge(write)
    first = Manager([tmp_path / "a"])
    write("b/concierge.prompty", export_tool(first.find_tool("concierge"), "prompty").text)
    args = {
        "guest": {"name": "Ada", "room": 7, "loyalty": {"tier": "gold"}},
        "question": "Breakfast?",
        "history": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    }
    plain = {"$remove": ["model"]}
    back = await Manager([tmp_path / "b"]).invoke("concierge", args, overrides=plain)
    assert back == await first.invoke("concierge", args, overrides=plain)
    assert [message["role"] for message in back] == ["system", "user", "assistant", "user"]


SHORTHAND = """
---
description: Tells the weather.
metadata:
  params:
    city: string, the city
    days?: integer
  returns: {temp: number, city?: string}
---
Weather in {{ args.city }}.
"""


def test_export_prompty_writes_shorthand_params_and_returns_as_inputs_and_outputs(write, tmp_path):
    write("tools/weather.md", SHORTHAND)
    exported = export_tool(Manager([tmp_path / "tools"]).find_tool("weather"), "prompty")
    write("back/weather.prompty", exported.text)
    loaded = Manager([tmp_path / "back"]).find_tool("weather")
    params = thaw(loaded.metadata["params"])
    assert params["required"] == ["city"] and params["properties"]["city"]["description"] == "the city"
    assert set(params["properties"]) == {"city", "days"}
    assert "outputs:\n  temp:\n    type: number\n" in exported.text
    lost = {item.field for item in exported.lost}
    assert "returns.required" in lost  # city? is optional: every Prompty output is required
    assert not any(field == "params" or field.startswith(("params.city", "params.type")) for field in lost)


def test_export_claude_agent_names_the_args_of_shorthand_params_it_cannot_pass(write, tmp_path):
    write(
        "tools/ask.md",
        "---\ndescription: x\nmetadata:\n  params: {prompt: string, tone?: string}\n---\n{{ args.prompt }}\n",
    )
    exported = export_tool(Manager([tmp_path / "tools"]).find_tool("ask"), "claude-agent")
    assert [item.why for item in exported.lost if item.field == "params"] == ["tone: a subagent takes one task text"]


def test_export_of_a_malformed_shorthand_names_its_file_and_line(write, tmp_path):
    write("tools/bad.md", "---\ndescription: x\nmetadata:\n  params:\n    when(aray): string\n---\nx\n")
    with pytest.raises(ConfigurationError) as caught:
        export_tool(Manager([tmp_path / "tools"]).find_tool("bad"), "prompty")
    assert caught.value.path == str(tmp_path / "tools" / "bad.md") and caught.value.line == 5


async def test_export_prompty_writes_a_thread_input_back_as_a_thread(tmp_path, write):
    source = Path(__file__).parent / "formats" / "prompty2" / "relay.prompty"
    write("a/relay.prompty", source.read_text(encoding="utf-8"))
    first = Manager([tmp_path / "a"])
    text = export_tool(first.find_tool("relay"), "prompty").text
    assert "\x02" not in text and "Answer briefly.\n\n{{conversation}}\n" in text
    assert "  conversation:\n    kind: thread\n" in text
    write("b/relay.prompty", text)
    args = {"conversation": [{"role": "user", "content": "Rain?"}, {"role": "assistant", "content": "Yes."}]}
    plain = {"$remove": ["model"]}
    back = await Manager([tmp_path / "b"]).invoke("relay", args, overrides=plain)
    assert back == await first.invoke("relay", args, overrides=plain)
    assert [message["role"] for message in back] == ["system", "user", "assistant", "user"]


def test_export_claude_agent_writes_the_host_tools_we_run_by_claude_codes_names(write, tmp_path):
    write(
        "p/.claude/agents/tester.md",
        "---\nname: tester\ndescription: Runs git.\ntools: Bash(git:*), Read, WebSearch\n---\nRun.\n",
    )
    write("p/.claude/agents/open.md", "---\nname: open\ndescription: Every tool.\n---\nRun.\n")
    write("p/tools/reader.md", "---\ndescription: Reads.\nmetadata:\n  tools: [Read, Grep]\n---\n{{ args.prompt }}\n")
    manager = Manager([tmp_path / "p" / "tools", tmp_path / "p"])
    narrowed = export_tool(manager.find_tool("tester"), "claude-agent")
    assert "\ntools: Bash(git:*), Read, WebSearch\n" in narrowed.text and narrowed.lost == ()
    every = export_tool(manager.find_tool("open"), "claude-agent")  # no tools line, as the file had none
    assert "tools:" not in every.text and not [item for item in every.lost if item.field == "tools"]
    ours = export_tool(manager.find_tool("reader"), "claude-agent")
    assert "\ntools: Read, Grep\n" in ours.text and "mcp__toolcascade__Read" not in ours.text
