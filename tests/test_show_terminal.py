"""show for a terminal (issue 25, point 9): fits 80 columns, the user's keys first, plain RUNS words, brief.

Rendered through rich consoles of 80 and 160 columns, as a terminal of each
width draws them, and through the CLI with ``COLUMNS=80``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator import Manager
from orchestrator.display import explanation_view

AUTHORITY = """
---
name: project
metadata:
  $attach: middleware
  tone: friendly
  polish: {suffix: " :)"}
  $order:
    polish: {after: [$pre-execute], before: [execute]}
---
"""

POLISH = '''
"""A middleware: adds a suffix to the wrapped tool's result."""

frontmatter = {
    "role": "middleware",
    "description": "Adds a suffix to the wrapped tool's result.",
    "metadata": {"params": {"type": "object", "properties": {"suffix": {"type": "string", "default": "!"}}}},
}


async def main(ctx):
    return f"{await ctx.target.manager.next()}{ctx.args.get('suffix', '')}"
'''

HELLO = """
---
description: Says hello.
metadata:
  params:
    type: object
    properties:
      name: {type: string, default: world}
---
Hello, {{ args.name }}! This is a {{ meta.tone }} tool.
"""

LONG = "a sentence long enough that no column of an eighty column terminal could ever hold it on one line"


@pytest.fixture
def project(write, tools: Path) -> Path:
    write("tools/AUTHORITY.md", AUTHORITY)
    write("tools/polish.py", POLISH)
    write("tools/hello.md", HELLO)
    write("tools/one.md", "Hello, {{ meta.tone }} world.\n")
    return tools


def shown(data: dict[str, Any], width: int, **options: Any) -> str:
    """What a terminal ``width`` columns wide shows for ``data``, without colour or trailing spaces."""
    console = Console(width=width, color_system=None, highlight=False, force_terminal=False)
    with console.capture() as captured:
        for renderable in explanation_view(data, **options):
            console.print(renderable)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def flat(text: str) -> str:
    """``text`` with every run of spaces and line breaks made one space: wrapped text reads as written."""
    return " ".join(text.split())


def explained(tools: Path, ref: str) -> dict[str, Any]:
    return Manager([tools]).explain(ref).to_dict()


@pytest.mark.parametrize("width", [80, 160])
def test_show_fits_the_terminal_and_never_cuts_a_value(project, write, width):
    write("tools/long.md", f"---\nmetadata:\n  a-key-name-longer-than-any-column-should-be: {LONG}\n---\nx\n")
    for ref in ("hello", "one", "long"):
        text = shown(explained(project, ref), width)
        assert max(len(line) for line in text.splitlines()) <= width, ref
        assert "…" not in text, ref  # nothing is cut short
    text = shown(explained(project, "long"), width)
    assert "a-key-name-longer-than-any-column-should-be" in text.replace("\n", "").replace(" ", "")
    if width == 80:  # one block per key: the wrapped value reads as written
        assert json.dumps(LONG) in flat(text)
    else:  # a table: the value wraps inside its column, each word kept whole
        assert all(word in text for word in LONG.split())
    assert '"friendly"' in shown(explained(project, "one"), width)


def test_a_one_line_tool_takes_a_screenful_at_80_columns_one_block_per_entry(project):
    text = shown(explained(project, "one"), 80)
    assert len(text.splitlines()) <= 60  # was 140
    lines = text.splitlines()
    chain = lines[next(i for i, line in enumerate(lines) if line.startswith("chain")) :]
    starts = [line.split()[:2] for line in chain if line.split()[:1] and line.split()[0].isdigit()]
    assert [number for number, _ in starts] == [str(n) for n in range(1, len(starts) + 1)]  # one block each
    assert [name for _, name in starts][0] == "trust" and "execute" in [name for _, name in starts]
    assert not any(line.startswith(("KEY ", "#  ")) for line in lines)  # blocks, not table headers


def test_show_is_a_table_on_a_wide_terminal(project):
    text = shown(explained(project, "hello"), 160)
    lines = text.splitlines()
    assert any(line.split()[:6] == ["KEY", "VALUE", "LEVEL", "POLICY", "VERDICT", "WHY"] for line in lines)
    assert any(line.split()[:3] == ["#", "ENTRY", "PHASE"] and line.split()[-1] == "RUNS" for line in lines)
    rows = {line.split()[0]: line for line in lines if line.strip()}
    assert "hello (tool)" in rows["params"] and "middleware" in rows["params"]


@pytest.mark.parametrize("width", [80, 160])
def test_the_users_keys_come_first_the_default_authority_last(project, width):
    text = shown(explained(project, "hello"), width)
    keys = text[text.index("merged metadata") : text.index("chain")]
    where = {key: keys.index(f"\n{key} ") for key in ("params", "tone", "polish", "trust", "execute")}
    assert where["params"] < where["tone"] < where["trust"]  # the tool, then its authority, then the default
    assert where["params"] < where["polish"] < where["execute"]


def test_the_json_keeps_the_merged_order(project):
    data = explained(project, "hello")
    assert [k["key"] for k in data["keys"]][:2] == ["trust", "validate-args"]  # as merged, not as shown


@pytest.mark.parametrize("width", [80, 160])
def test_runs_says_what_happens(project, width):
    text = flat(shown(explained(project, "hello"), width))
    assert "not needed" not in text
    # A markdown tool without returns: execute has nothing after it, and the body still runs.
    assert "skipped: no entry after it has work; the body runs at the end of the chain" in text
    assert "skipped: the tool has no returns" in text  # validate-returns
    assert "Adds a suffix to the wrapped tool's result." in text  # what polish does, in its author's words
    assert "(the tool has params)" in text  # validate-args runs, and why


def test_runs_names_the_body_when_execute_runs(project, write):
    write("tools/typed.md", "---\nmetadata:\n  returns: {type: string}\n---\nHello.\n")
    text = flat(shown(explained(project, "typed"), 80))
    assert "Runs the target's body, then continues its chain (an entry after it has work)." in text
    assert "skipped: no entry after it has work" not in text


def test_entries_carry_what_their_tool_does(project):
    chain = {entry.name: entry for entry in Manager([project]).explain("hello").chain}
    assert chain["polish"].description == "Adds a suffix to the wrapped tool's result."
    assert chain["execute"].description == "Runs the target's body, then continues its chain."


@pytest.mark.parametrize("width", [80, 160])
def test_brief_shows_the_users_keys_and_what_each_entry_does(project, width):
    text = shown(explained(project, "hello"), width, brief=True)
    assert max(len(line) for line in text.splitlines()) <= width
    assert len(text.splitlines()) <= 30
    lines = text.splitlines()
    head = lines[: next(i for i, line in enumerate(lines) if line.startswith("chain"))]
    keys = [line.split()[0] for line in head if line.strip()]
    assert {"params", "tone", "polish"} <= set(keys)
    assert not {"trust", "validate-args", "execute"} & set(keys)  # the default authority's rows are left out
    for hidden in ("frontmatter", "merged metadata", "LEVEL", "POLICY", "uri", "phases", "(authority)"):
        assert hidden not in text
    flattened = flat(text)
    assert "polish Adds a suffix to the wrapped tool's result." in flattened
    assert "validate-args Checks args against the tool's params schema" in flattened
    assert "execute skipped: no entry after it has work; the body runs at the end of the chain" in flattened


def test_brief_still_names_an_order_cycle(write, tools):
    write("tools/a.py", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/b.py", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    write("tools/g.md", "---\nmetadata:\n  a: {}\n  b: {}\n  $order: {a: {after: [b]}, b: {after: [a]}}\n---\nx\n")
    text = flat(shown(explained(tools, "g"), 80, brief=True))
    assert "CANNOT BE SORTED, $order forms a cycle: a -> b -> a" in text


def test_toolcascade_show_fits_80_columns_on_the_command_line(project):
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", "hello"],
        capture_output=True,
        text=True,
        cwd=project.parent,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in done.stdout
    assert '"friendly"' in done.stdout
    assert not any(line.split()[:2] == ["KEY", "VALUE"] for line in lines)  # the narrow layout


def test_runs_names_the_condition_that_fails_and_all_of_them_when_several_may(write, tools):
    guard = "async def main(ctx):\n    return await ctx.target.manager.next()\n"
    write(
        "tools/guard.py",
        "frontmatter = {'role': 'middleware', 'when': {'kind': 'markdown', 'meta': ['a', 'b']}}\n" + guard,
    )
    write("tools/page.md", "---\nmetadata:\n  guard: {}\n  a: 1\n---\nx\n")
    write("tools/code.py", "frontmatter = {'metadata': {'guard': {}}}\n\ndef main(ctx):\n    return 1\n")
    page = flat(shown(explained(tools, "page"), 80))
    assert "guard · $configure skipped: it runs only when the tool has a and b" in page  # the kind holds
    code = flat(shown(explained(tools, "code"), 80))
    assert "guard · $configure skipped: the tool is not markdown" in code  # what alone rules it out
    assert "agent-execute · $execute · locked · before execute skipped: the tool is not markdown" in code
    write("tools/both.md", "---\nmetadata:\n  guard: {}\n  a: 1\n  b: 2\n---\nx\n")
    assert "guard · $configure runs (the tool is markdown and the tool has a and b)" in flat(
        shown(explained(tools, "both"), 80)
    )
