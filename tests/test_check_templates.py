"""``check``'s template syntax errors: every error a render's compile raises, found without compiling to Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import Manager
from orchestrator.check import check
from orchestrator.interpolate import compile_template


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{{ args.x | nofilter }}", "No filter named 'nofilter'"),
        ("{{ args.x is notatest }}", "No test named 'notatest'"),
        ("{% if %}x{% endif %}", "Expected an expression"),
        ("{% extends 'a' %}", "{% extends %} is not supported"),
        ("{% block a %}{% endblock %}{% block a %}{% endblock %}", "block 'a' defined twice"),
    ],
)
def test_each_error_a_render_would_raise_is_reported_for_each_tool(
    write: Any, tools: Path, template: str, said: str
) -> None:
    for name in ("one", "two"):  # the same text twice: each tool's own problem
        write(f"tools/{name}.md", f'---\nmetadata:\n  note: "{template}"\n---\n{template}\n')
    problems = [(Path(p.path).name, p.line, p.message) for p in check(Manager([tools])) if said in p.message]
    assert sorted((name, line, message.split(":")[0]) for name, line, message in problems) == [
        ("one.md", 3, "template syntax error in metadata key 'note'"),
        ("one.md", 5, "template syntax error in the prompt"),
        ("two.md", 3, "template syntax error in metadata key 'note'"),
        ("two.md", 5, "template syntax error in the prompt"),
    ]
    with pytest.raises(Exception, match=said.replace("{", r"\{").replace("}", r"\}")):
        compile_template(template)  # what a render would raise


def test_a_template_that_compiles_is_no_problem(write: Any, tools: Path) -> None:
    write(
        "tools/fine.md",
        "---\nmetadata:\n  note: \"{{ args.x | default('y') | upper }}\"\n---\n{{ args.x | default(1) }}\n",
    )
    assert [p for p in check(Manager([tools])) if "syntax" in p.message] == []
