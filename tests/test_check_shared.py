"""Work ``check`` does once for values many tools share (issue 24), never an answer one tool gets for another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator import Manager
from orchestrator.check import check
from orchestrator.frozen import freeze
from orchestrator.interpolate import has_templates_frozen


def test_a_frozen_values_templates_are_remembered_and_a_mutable_one_is_walked_each_time() -> None:
    shared = freeze({"type": "object", "properties": {"topic": {"type": "string"}}})
    assert has_templates_frozen(shared) is False
    assert has_templates_frozen(shared) is False  # remembered: the value cannot change
    mutable: dict[str, Any] = {"type": "object"}
    assert has_templates_frozen(mutable) is False
    mutable["description"] = "{{ args.x }}"
    assert has_templates_frozen(mutable) is True  # walked again: it changed
    assert has_templates_frozen(freeze({"a": ["{% if x %}y{% endif %}"]})) is True


def test_tools_under_one_authority_with_equal_params_each_get_their_own_reads(write: Any, tools: Path) -> None:
    """The authority's params object is every tool's; what each prompt reads is still checked per tool."""
    write(
        "tools/AUTHORITY.md",
        "---\nmetadata:\n  params:\n    type: object\n    properties:\n      topic: {type: string}\n---\n",
    )
    for n in range(3):
        write(f"tools/ok{n}.md", "---\ndescription: fine\n---\nAbout {{ args.topic }}.\n")
    wrong = write("tools/wrong.md", "---\ndescription: typo\n---\nAbout {{ args.topik }}.\n")
    problems = check(Manager([tools]))
    assert [(Path(p.path or ""), p.line) for p in problems] == [(wrong, 4)]
    assert "args.topik" in problems[0].message and "'args.topic'" in problems[0].message
