"""The format-adapter framework (issue 15): the contract, discovery, selection, loading, and plugins."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import orchestrator.formats as formats
from orchestrator import ConfigurationError, Manager, ToolDefinitionError
from orchestrator.check import check
from orchestrator.formats import Adapted, Format, Mapped, claude, literal
from orchestrator.interpolate import compile_template

pytestmark = pytest.mark.anyio


class NoteFormat:
    """A plugin format for the tests: ``*.note`` files, the first line a description, the rest the prompt."""

    name = "note"
    suffixes = (".note",)

    def recognises(self, path: Path, root: Path) -> bool:
        return path.name.endswith(".note")

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        if "explode" in body:
            raise RuntimeError("adapter bug")
        if "refuse" in body:
            raise ToolDefinitionError("a note may not say refuse", line=body_line)
        first, _, rest = body.partition("\n")
        return Adapted(
            name=str(front.get("name") or path.name.removesuffix(".note")),
            metadata={"description": first, "tags": front.get("tags", [])},
            prompt=literal(rest.strip()),
            mapping=(Mapped("(first line)", "description"), Mapped("body", "prompt", "literal text")),
        )


class EntryPoint:
    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value, self._value = name, f"tests:{name}", value

    def load(self) -> Any:
        if isinstance(self._value, Exception):
            raise self._value
        return self._value


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch):
    """Install entry points in the ``toolcascade.formats`` group for one test."""

    def _install(**points: Any) -> None:
        def fake(group: str) -> list[EntryPoint]:
            assert group == formats.ENTRY_POINTS
            return [EntryPoint(name, value) for name, value in points.items()]

        monkeypatch.setattr(formats, "entry_points", fake)
        monkeypatch.setattr(formats, "_REGISTERED", None)
        monkeypatch.setattr(formats, "_BROKEN", {})

    yield _install
    formats._REGISTERED = None


def test_the_built_in_adapters_satisfy_the_protocol():
    for fmt in claude.FORMATS:
        assert isinstance(fmt, Format)
    assert {"claude-agent", "claude-command", "claude-skill"} <= set(formats.registered())


async def test_a_plugin_format_from_an_entry_point_reads_its_files(plugin, tools, write):
    plugin(note=NoteFormat(), broken=ImportError("no such module"))
    write("tools/standup.note", "---\ntags: [team]\n---\nDaily standup prompt\nWhat did you do yesterday?\n")
    manager = Manager([tools])
    assert await manager.invoke("standup") == "What did you do yesterday?"
    tool = manager.find_tool("standup")
    assert (tool.format, tool.description, list(tool.metadata["tags"])) == ("note", "Daily standup prompt", ["team"])
    assert manager.explain("standup").to_dict()["mapping"][0] == {
        "source": "(first line)",
        "target": "description",
        "note": "",
        "lossless": True,
    }
    # A plugin that failed to load is only an error when it is asked for.
    with pytest.raises(ConfigurationError, match="unknown format 'broken' .the entry point tests:broken failed"):
        Manager([tools], formats=["broken"])


async def test_formats_per_search_path(plugin, tmp_path, write):
    plugin(note=NoteFormat())
    write("a/x.note", "A\nfrom a\n")
    write("b/y.note", "B\nfrom b\n")
    manager = Manager([tmp_path / "a", tmp_path / "b"], formats={str(tmp_path / "a"): []})
    refs = {info.ref for info in manager.list_tools()}
    assert "y" in refs and "x" not in refs
    assert await manager.invoke("y") == "from b"


def test_an_adapters_failures_are_typed_errors_naming_the_file(plugin, tools, write):
    plugin(note=NoteFormat())
    bug = write("tools/bug.note", "x\nexplode\n")
    refused = write("tools/refused.note", "x\nrefuse\n")
    manager = Manager([tools])
    with pytest.raises(ToolDefinitionError, match="the note adapter failed: RuntimeError: adapter bug") as info:
        manager.find_tool("bug")
    assert info.value.path == str(bug)
    with pytest.raises(ToolDefinitionError, match="a note may not say refuse") as info:
        manager.find_tool("refused")
    assert (info.value.path, info.value.line) == (str(refused), 1)
    found = [str(p) for p in check(manager)]
    assert any(p.startswith(f"{bug}: the note adapter failed") for p in found), found


def test_another_formats_file_is_read_within_the_limits(plugin, tools, write):
    from orchestrator import Limits

    plugin(note=NoteFormat())
    write("tools/big.note", "---\nname: big\n---\n" + "x" * 2000 + "\n")
    with pytest.raises(ToolDefinitionError, match="Limits.file_bytes"):
        Manager([tools], limits=Limits(file_bytes=1000)).find_tool("big")
    write(
        "tools/bomb.note",
        "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: [*b, *b, *b, *b, *b, *b, *b, *b]\n---\nbody\n",
    )
    with pytest.raises(ToolDefinitionError, match="yaml_nodes|more than") as info:
        Manager([tools], limits=Limits(yaml_nodes=200)).find_tool("bomb")
    assert info.value.path == str(tools / "bomb.note")


def test_unknown_or_malformed_selections_are_configuration_errors(tools):
    with pytest.raises(ConfigurationError, match="unknown format 'claud'"):
        Manager([tools], formats="claud")
    with pytest.raises(ConfigurationError, match="keys are search path folders"):
        Manager([tools], formats={3: "claude"})
    with pytest.raises(ConfigurationError, match="a format name must be a string"):
        Manager([tools], formats=[None])


def test_location_trees_are_found_from_the_root_the_middle_or_the_location(tmp_path):
    agent = formats.registered()["claude-agent"]
    for root, expected in [
        (tmp_path, tmp_path / ".claude/agents"),
        (tmp_path / ".claude", tmp_path / ".claude/agents"),
        (tmp_path / ".claude/agents", tmp_path / ".claude/agents"),
        (tmp_path / ".claude/agents/team", tmp_path / ".claude/agents/team"),
    ]:
        assert [folder for folder, _fmt in formats.location_trees(root, [agent])] == [expected]


def test_host_tools_and_ours_are_told_apart():
    names = ["Read", "WebFetch", "Bash(git add:*, git commit:*)", "mcp__github__create_issue", "summarize", "team/x"]
    assert formats.split_tools(names) == (["summarize", "team/x"], names[:4])


def test_a_comma_string_keeps_commas_inside_parentheses():
    front = formats.Front({"tools": "Read, Bash(git add:*, git commit:*), lint"})
    assert formats.name_list(front, "tools", tool="t", path=Path("t.md")) == [
        "Read",
        "Bash(git add:*, git commit:*)",
        "lint",
    ]


def test_model_aliases_are_configurable(monkeypatch):
    assert formats.resolve_model("sonnet")[0] == formats.ALIASES["sonnet"]
    assert formats.resolve_model("openai:gpt-4o") == ("openai:gpt-4o", "kept", True)
    assert formats.resolve_model("claude-opus-4-1-20250805")[0] == "anthropic:claude-opus-4-1-20250805"
    monkeypatch.setenv(formats.ALIASES_ENV, "{sonnet: 'openai:gpt-4o', inherit: {provider: scripted}}")
    assert formats.resolve_model("sonnet")[0] == "openai:gpt-4o"
    spec, note, lossless = formats.resolve_model("inherit")
    assert (spec, lossless) == ({"provider": "scripted"}, False) and "caller's model is not passed down" in note
    monkeypatch.setenv(formats.ALIASES_ENV, "[sonnet]")
    with pytest.raises(ConfigurationError, match="TOOLCASCADE_MODEL_ALIASES is not a YAML mapping"):
        formats.resolve_model("sonnet")


@settings(deadline=None)  # hypothesis' default 100 examples, as for the suite's other properties
@given(st.text(alphabet=st.sampled_from(list("{}%#-+ rawendx\n'\"")), max_size=40))
def test_literal_text_renders_to_itself(text):
    assert compile_template(literal(text)).render() == text


def test_command_placeholders_become_argument_templates():
    template, used = claude.substitute("Fix $1 in $2 ($ARGUMENTS; first: $ARGUMENTS[0]; $10 stays; {{ x }})")
    assert used
    render = compile_template(template).render
    assert render(args={"arguments": "bug42 api"}) == "Fix bug42 in api (bug42 api; first: bug42; $10 stays; {{ x }})"
    assert render(args={"arguments": ""}) == "Fix  in  (; first: ; $10 stays; {{ x }})"


def test_file_references_and_shell_commands_are_reported_with_their_lines():
    body = "Look at @src/app.py and mail me@example.com.\n\nStatus: !`git status`\n@README.md"
    assert claude.unsupported(body, 10) == (
        (10, "@src/app.py is not supported: files are never read into the prompt (it stays text)"),
        (12, "!`git status` is not supported: commands are never run (it stays text)"),
        (13, "@README.md is not supported: files are never read into the prompt (it stays text)"),
    )


ENTRY_POINTS = """
import json, sys
sys.path[:0] = sys.argv[1:]
from orchestrator import formats
points = sorted((p.name, p.value) for p in formats.entry_points("toolcascade.formats"))
loaded = [p.load() for p in formats.entry_points("toolcascade.formats") if p.name == "note"]
print(json.dumps({"points": points, "asked": "importlib.metadata" in sys.modules, "loaded": loaded}))
"""


def _entry_points_in_a_new_process(tmp_path, *folders):
    import json
    import subprocess
    import sys

    env = {**os.environ, "TOOLCASCADE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", ENTRY_POINTS, *map(str, folders)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def _distribution(folder, name, version, value):
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[console_scripts]\nx = y:z\n\n[toolcascade.formats]\n{value}\n")


def test_entry_points_come_from_importlib_metadata_once_then_from_the_cache(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "notefmt_plugin.py").write_text("class Holder:\n    FMT = 'the format'\n")
    _distribution(plugins, "notefmt_plugin", "1.0", "note = notefmt_plugin:Holder.FMT")
    first = _entry_points_in_a_new_process(tmp_path, plugins)
    assert ["note", "notefmt_plugin:Holder.FMT"] in first["points"]
    assert first["asked"] and first["loaded"] == ["the format"]
    again = _entry_points_in_a_new_process(tmp_path, plugins)
    assert again["points"] == first["points"] and again["loaded"] == ["the format"]  # loaded by importlib.metadata


def test_a_kept_group_costs_no_importlib_metadata_until_a_point_is_loaded(tmp_path):
    """The common case: only our own formats are installed, and built-ins never load through entry points."""
    import json
    import subprocess
    import sys

    code = (
        "import sys\nfrom orchestrator import formats\nformats.registered()\nprint('importlib.metadata' in sys.modules)"
    )
    env = {**os.environ, "TOOLCASCADE_CACHE": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)]
    runs.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True))
    assert [json.loads(r.stdout.strip().lower()) for r in runs] == [True, False]


def test_a_distribution_installed_later_is_seen_by_the_next_process(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    assert ["late", "late_fmt:FMT"] not in _entry_points_in_a_new_process(tmp_path, plugins)["points"]
    _distribution(plugins, "late_fmt", "1.0", "late = late_fmt:FMT")
    found = _entry_points_in_a_new_process(tmp_path, plugins)
    assert found["asked"] and ["late", "late_fmt:FMT"] in found["points"]
