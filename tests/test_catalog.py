"""The Catalog: one Manager's search paths, finding and compiling (issue 26, the Manager as a thin facade)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator import Manager, ToolNotFoundError
from orchestrator.catalog import Catalog
from orchestrator.limits import DEFAULT_LIMITS
from orchestrator.registry import builtin_folder


def test_the_manager_finds_through_its_catalog(write: Callable[[str, str], Path], tools: Path) -> None:
    """The Manager's parts are the catalog's: one registry, one planner, the same search paths."""
    write("tools/t.py", "async def main(ctx):\n    return 1\n")
    manager = Manager([tools])
    catalog = manager.catalog
    assert (manager.registry, manager.authorities, manager.planner) == (
        catalog.registry,
        catalog.authorities,
        catalog.planner,
    )
    assert manager.paths == catalog.paths and manager.paths[-1].root == builtin_folder("tools").resolve()
    assert manager.find_tool("t") is catalog.find_tool("t")
    assert catalog.pipeline("t", catalog.paths, None).tool is manager.find_tool("t")


def test_given_folders_come_before_the_builtins_and_are_trusted_only_when_marked(tmp_path: Path) -> None:
    other, marked = tmp_path / "other", tmp_path / "marked"
    other.mkdir()
    marked.mkdir()
    (other / "here.md").write_text("---\ndescription: Here.\n---\nHello.\n", encoding="utf-8")  # untrusted: no python
    catalog = Catalog((), marked, False, DEFAULT_LIMITS, None)
    paths = catalog.search_paths([other])
    assert [sp.root for sp in paths] == [other.resolve(), builtin_folder("tools").resolve()]
    assert catalog.search_paths(None) == catalog.paths
    assert not catalog.search_path(other).trusted and catalog.search_path(marked).trusted
    assert catalog.find_tool("here", [other]).name == "here"
    with pytest.raises(ToolNotFoundError):
        catalog.find_tool("here")


def test_authorities_are_found_from_a_ref_or_a_tool(write: Callable[[str, str], Path], tools: Path) -> None:
    write("tools/AUTHORITY.md", "---\nmetadata:\n  team: yes\n---\n")
    write("tools/t.py", "async def main(ctx):\n    return 1\n")
    catalog = Manager([tools]).catalog
    nearest = catalog.find_authority("t")
    assert nearest == catalog.find_authority(catalog.find_tool("t"))
    assert catalog.authority_chain("t")[-1] == nearest
