"""The common YAML mistakes are named in plain words at the line to fix (issue 25, point 8).

PyYAML reports where its parser gave up: an unclosed quote at the closing
``---``, ``tone:friendly`` at the next line, a tab as "a character that cannot
start any token". Each case here is a real tool file; the assertions are on
our words and lines, never PyYAML's.
"""

from __future__ import annotations

import os

import pytest

from orchestrator import Manager, ToolDefinitionError
from orchestrator.check import check

# (frontmatter lines after the opening '---', the file line to fix, words the message must hold)
CASES = {
    "unclosed-double-quote": (
        ['description: "Greets someone', "metadata:", "  a: 1", "  b: 2", "  c: 3", "  d: 4", "  e: 5"],
        2,
        ['quote " opened here is never closed'],
    ),
    "unclosed-single-quote": (["description: 'Greets", "metadata: {}"], 2, ["quote ' opened here is never closed"]),
    "unclosed-bracket": (["metadata:", "  tags: [a, b", "  c: 1"], 3, ["bracket [ opened here is never closed"]),
    "tab-indent": (["metadata:", "\ttone: friendly"], 3, ["tab", "spaces"]),
    "tab-before-item": (["metadata:", "  tags:", "\t- a"], 4, ["tab", "spaces"]),
    "no-space-after-colon": (
        ["metadata:", "  tone:friendly", "  length: 3"],
        3,
        ["'tone:friendly' needs a space after the colon", "'tone: friendly'"],
    ),
    "no-space-top-level": (["description:hi", "metadata: {}"], 2, ["'description: hi'"]),
    "colon-in-value": (["description: Note: be brief"], 2, ["'description' holds ': '", "'Note: be brief'"]),
    "two-lists": (["metadata:", "  tags: [a] [b]"], 3, ["second value", "[a, b]"]),
    "odd-indent": (["metadata:", "  a: 1", " b: 2"], 4, ["indented 1 space", "align it"]),
}


def tool_text(rows: list[str]) -> str:
    return "---\n" + "\n".join(rows) + "\n---\nHello\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_common_yaml_mistake_is_named_at_its_line(tmp_path, name):
    rows, line, words = CASES[name]
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / f"{name}.md").write_text(tool_text(rows), encoding="utf-8")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tools]).find_tool(name)
    error = info.value
    assert error.line == line and error.path is not None and error.path.endswith(f"{name}.md")
    for word in words:
        assert word in str(error)


def test_check_reports_each_mistake_at_its_line_beside_the_good_tools(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, (rows, _line, _words) in CASES.items():
        (tools / f"{name}.md").write_text(tool_text(rows), encoding="utf-8")
    (tools / "fine.md").write_text("---\ndescription: Fine.\n---\nok\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    manager = Manager([tools])
    found = {os.path.basename(p.path or ""): p.line for p in check(manager) if p.severity == "error"}
    assert found == {f"{name}.md": line for name, (_rows, line, _words) in CASES.items()}
    assert manager.invoke_sync("fine") == "ok"


def test_yaml_that_is_valid_is_never_explained_away(tmp_path):
    # The rules look at text only once PyYAML refused it: these are all valid and load as written.
    tools = tmp_path / "tools"
    tools.mkdir()
    rows = ["description: 'Note: be brief'", "metadata:", "  url: http://example.com:8080/x", "  at: 12:30"]
    (tools / "ok.md").write_text(tool_text(rows), encoding="utf-8")
    tool = Manager([tools]).find_tool("ok")
    assert tool.description == "Note: be brief" and tool.metadata["url"] == "http://example.com:8080/x"


def test_a_mistake_nobody_named_keeps_the_parsers_problem_and_points_at_where_it_began(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "odd.md").write_text(tool_text(["metadata:", "  a: {b: 1", "  c: 2}}"]), encoding="utf-8")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tools]).find_tool("odd")
    assert str(info.value).count("invalid YAML in frontmatter: ") == 1 and info.value.line in (3, 4)
