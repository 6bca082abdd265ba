"""A quick import (issue 11, point 6): ``import orchestrator`` and a first plain invoke load only what they use.

Each check runs in a fresh interpreter and looks at ``sys.modules``, never at
the clock. Heavy or optional libraries are imported where they are needed:
jinja2 by the first template render, markdown-it by the first prompt that
could hold a directive, jsonschema by the first validation, watchfiles by a
long-lived registry's watcher, the SDKs by the features that use them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.graph import strongly_connected

ROOT = Path(__file__).resolve().parent.parent

NOT_AT_IMPORT = (
    "jinja2",
    "networkx",
    "markdown_it",
    "jsonschema",
    "rich",
    "mcp",
    "openai",
    "anthropic",
    "ray",
    "opentelemetry",
    "watchfiles",
    "difflib",
)
NOT_AT_FIRST_PLAIN_INVOKE = ("jinja2", "markdown_it", "jsonschema", "watchfiles")


def loaded_after(code: str, cwd: Path) -> dict[str, list[str]]:
    """Run ``code`` in a fresh interpreter; the top-level packages in ``sys.modules`` at each ``mark(name)``."""
    program = (
        "import json, sys\n"
        "marks = {}\n"
        "def mark(name):\n"
        "    marks[name] = sorted({m.split('.')[0] for m in sys.modules})\n" + code + "\nprint(json.dumps(marks))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_orchestrator_loads_no_heavy_or_optional_library(tmp_path: Path) -> None:
    marks = loaded_after("import orchestrator\nmark('import')", tmp_path)
    assert sorted(set(NOT_AT_IMPORT) & set(marks["import"])) == []


def test_a_first_plain_python_invoke_loads_no_template_or_markdown_library(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "plain.py").write_text("async def main(ctx):\n    return ctx.args['n'] + 1\n")
    code = (
        "from orchestrator import Manager\n"
        "manager = Manager(['tools'])\n"
        "assert manager.invoke_sync('plain', {'n': 1}) == 2\n"
        "mark('invoke')\n"
        "assert manager.invoke_sync('plain', {'n': 2}) == 3\n"
        "mark('again')\n"
    )
    marks = loaded_after(code, tmp_path)
    for moment in ("invoke", "again"):
        assert sorted(set(NOT_AT_FIRST_PLAIN_INVOKE) & set(marks[moment])) == [], moment


def test_a_template_still_renders_and_errors_keep_their_types(tmp_path: Path) -> None:
    # jinja2 arrives with the first render; its errors still become typed errors with a cause.
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "hello.md").write_text("---\n---\nHello {{ args.name }}!\n")
    (tmp_path / "tools" / "broken.md").write_text("---\n---\nHello {{ args.name \n")
    code = (
        "from orchestrator import Manager, InterpolationError\n"
        "manager = Manager(['tools'])\n"
        "assert manager.invoke_sync('hello', {'name': 'Ada'}) == 'Hello Ada!'\n"
        "mark('render')\n"
        "try:\n"
        "    manager.invoke_sync('broken', {'name': 'Ada'})\n"
        "except InterpolationError as exc:\n"
        "    assert 'syntax error' in str(exc) and exc.__cause__ is not None, exc\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
        "try:\n"
        "    manager.invoke_sync('hello', {})\n"
        "except InterpolationError as exc:\n"
        "    assert 'undefined' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    marks = loaded_after(code, tmp_path)
    assert "jinja2" in marks["render"]


@given(st.dictionaries(st.integers(0, 11), st.lists(st.integers(0, 11), max_size=4), max_size=12))
def test_strongly_connected_components_match_networkx(raw: dict[int, list[int]]) -> None:
    # graph.py finds SCCs (auto-static, R-CAS-8) without networkx: the same components, every time.
    nodes = set(raw) | {n for out in raw.values() for n in out}
    edges = {str(n): [str(m) for m in raw.get(n, [])] for n in nodes}
    graph = nx.DiGraph()
    graph.add_nodes_from(edges)
    graph.add_edges_from((a, b) for a, out in edges.items() for b in out)
    expected = sorted(sorted(c) for c in nx.strongly_connected_components(graph))
    assert sorted(sorted(c) for c in strongly_connected(edges)) == expected


def test_a_long_chain_of_tools_does_not_exhaust_the_stack() -> None:
    size = 50_000  # far deeper than the recursion limit: the search keeps its own stack
    edges = {str(i): [str(i + 1)] for i in range(size)}
    edges[str(size)] = ["0"]
    assert list(strongly_connected(edges)) == [frozenset(edges)]
