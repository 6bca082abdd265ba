"""The error tree and its messages (SPEC section 7)."""

from __future__ import annotations

import pytest

import orchestrator
from orchestrator import errors


def test_errors_form_the_documented_tree():
    base = errors.OrchestratorError
    for name in (
        "ToolNotFoundError",
        "ToolDefinitionError",
        "ConfigurationError",
        "InterpolationError",
        "ValidationError",
        "InvocationError",
        "InvocationTimeout",
        "SecurityError",
        "ModelError",
    ):
        assert issubclass(getattr(errors, name), base)
        assert name in errors.__doc__
    assert issubclass(errors.OrderCycleError, errors.ConfigurationError)
    assert issubclass(errors.ArgsValidationError, errors.ValidationError)
    assert issubclass(errors.ReturnsValidationError, errors.ValidationError)


def test_errors_name_tool_file_line_level_and_key():
    error = errors.ConfigurationError(
        "bad policy", tool="greet", path="tools/greet.md", line=7, level="default", key="tags"
    )
    assert str(error) == "tools/greet.md:7: bad policy (tool 'greet', level 'default', key 'tags')"
    assert (error.tool, error.path, error.line, error.level, error.key) == (
        "greet",
        "tools/greet.md",
        7,
        "default",
        "tags",
    )
    assert error.where == "tools/greet.md:7"


def test_errors_structured_fields_on_special_errors():
    cycle = errors.OrderCycleError(["a", "b"], tool="t")
    assert cycle.cycle == ["a", "b"]
    assert "a -> b -> a" in str(cycle)
    invalid = errors.ArgsValidationError([("/name", "is required"), ("", "bad")], tool="t")
    assert invalid.errors == [("/name", "is required"), ("", "bad")]
    assert "/name: is required" in str(invalid) and "/: bad" in str(invalid)
    missing = errors.ToolNotFoundError("x", ["/a", "/b"])
    assert missing.ref == "x" and missing.searched == ["/a", "/b"]


@pytest.mark.parametrize("name", [n for n in dir(errors) if n.endswith(("Error", "Timeout"))])
def test_every_error_has_a_raised_when_docstring(name):
    doc = getattr(errors, name).__doc__
    assert doc and doc.startswith("Raised when")
    assert getattr(orchestrator, name) is getattr(errors, name)


def test_tool_not_found_names_folders_relative_to_the_current_one_and_leaves_out_the_builtins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inside, outside, builtin = str(tmp_path / "tools"), "/elsewhere/tools", "/pkg/tools"
    missing = errors.ToolNotFoundError("x", [inside, outside, builtin], builtin=builtin)
    assert str(missing) == "no tool 'x' in tools, /elsewhere/tools"
    assert missing.searched == [inside, outside, builtin]


def test_tool_not_found_with_only_the_builtins_says_there_is_no_tools_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = errors.ToolNotFoundError("x", ["/pkg/tools"], builtin="/pkg/tools")
    assert "only the built-in tools were searched" in str(missing) and "no ./tools here" in str(missing)
    (tmp_path / "tools").mkdir()
    assert "no ./tools here" not in str(errors.ToolNotFoundError("x", ["/pkg/tools"], builtin="/pkg/tools"))


def test_tool_not_found_asks_for_suggestions_once_and_only_when_read():
    asked = []
    missing = errors.ToolNotFoundError("sumary", ["/a"], near=lambda: asked.append(1) or ["summary", "summary"])
    assert asked == []
    assert missing.detail == "no tool 'sumary' in /a; did you mean 'summary'?"
    assert missing.suggestions == ["summary"] and str(missing).endswith("did you mean 'summary'?") and asked == [1]
