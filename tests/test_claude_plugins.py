"""Claude Code plugins whose manifest sits deeper than a search path's child folders (issue 28).

A marketplace repository keeps its plugins several folders down
(``marketplace/plugins/NAME/.claude-plugin/plugin.json``,
``vendors/acme/tools/NAME/...``). They are found within
``MANIFEST_DEPTH`` levels and ``MANIFEST_FOLDERS`` folders, never inside
hidden or dependency folders, and never a plugin inside a plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import Manager
from orchestrator.formats import plugins
from orchestrator.formats.plugins import plugin_folders

pytestmark = pytest.mark.anyio


def plugin(write, rel: str, name: str) -> None:
    write(f"{rel}/.claude-plugin/plugin.json", '{"name": "' + name + '", "version": "1.0.0"}')
    write(f"{rel}/commands/fix.md", "---\ndescription: Fix lint\n---\nFix $ARGUMENTS\n")
    write(f"{rel}/agents/helper.md", "---\nname: helper\ndescription: Helps.\n---\nYou help.\n")


async def test_a_marketplaces_plugins_several_levels_down_are_found_and_run(write, tmp_path):
    plugin(write, "marketplace/plugins/tidy", "tidy-kit")
    plugin(write, "vendors/acme/tools/lint", "acme-lint")
    manager = Manager([tmp_path])
    refs = {info.ref for info in manager.list_tools()}
    assert {"tidy-kit:fix", "tidy-kit:helper", "acme-lint:fix", "acme-lint:helper"} <= refs
    assert await manager.invoke("acme-lint:fix", {"arguments": "a.py"}) == "Fix a.py"
    assert await Manager([tmp_path]).invoke("tidy-kit:fix", {"arguments": "b.py"}) == "Fix b.py"  # a fresh lookup


def test_the_search_is_bounded_in_depth(write, tmp_path):
    plugin(write, "a/b/c/near", "near")  # four levels below the search path: found
    plugin(write, "a/b/c/d/far", "far")  # five: past MANIFEST_DEPTH
    found = {folder.name for folder in plugin_folders(tmp_path)}
    assert found == {"near"}
    refs = {info.ref for info in Manager([tmp_path]).list_tools()}
    assert "near:fix" in refs and "far:fix" not in refs


def test_the_search_is_bounded_in_folders(write, tmp_path, monkeypatch):
    for index in range(30):
        write(f"many/f{index:02}/readme.txt", "x")
    plugin(write, "zz/kit", "kit")  # sorted after every other folder
    assert [folder.name for folder in plugin_folders(tmp_path)] == ["kit"]
    monkeypatch.setattr(plugins, "MANIFEST_FOLDERS", 20)
    assert plugin_folders(tmp_path) == []  # the walk stopped before reaching it


def test_hidden_and_dependency_folders_and_plugins_inside_plugins_are_not_searched(write, tmp_path):
    plugin(write, "node_modules/pkg", "from-deps")
    plugin(write, ".cache/pkg", "hidden")
    plugin(write, "outer", "outer")
    plugin(write, "outer/vendored/inner", "inner")
    assert [folder.name for folder in plugin_folders(tmp_path)] == ["outer"]


def test_plugins_folders_without_a_manifest_still_count(write, tmp_path):
    write("plugins/review/commands/check.md", "---\ndescription: Check\n---\nCheck $ARGUMENTS\n")
    plugin(write, "deep/er/kit", "kit")
    found = {folder.relative_to(tmp_path).as_posix() for folder in plugin_folders(tmp_path)}
    assert found == {"plugins/review", "deep/er/kit"}
    assert "review:check" in {info.ref for info in Manager([Path(tmp_path)]).list_tools()}


def test_the_folders_looked_into_are_reported_for_a_cache_to_watch(write, tmp_path):
    from orchestrator.formats import location_trees, registered

    write("a/b/readme.txt", "x")
    plugin(write, "a/c/kit", "kit")
    looked: list[Path] = []
    trees = {
        tree.relative_to(tmp_path).as_posix() for tree, _fmt in location_trees(tmp_path, registered().values(), looked)
    }
    assert "a/c/kit/commands" in trees
    seen = {folder.relative_to(tmp_path).as_posix() or "." for folder in looked}
    assert {".", "a", "a/b", "a/c", "a/c/kit"} <= seen  # where a new manifest would change the answer


async def test_a_plugin_added_deep_down_later_is_found_by_the_same_manager(write, tmp_path):
    write("vendors/acme/tools/README.md", "Vendored tools.\n")  # the folders exist before the plugin does
    manager = Manager([tmp_path])
    assert not any(info.ref.startswith("late-kit:") for info in manager.list_tools())
    plugin(write, "vendors/acme/tools/late", "late-kit")
    manager.refresh()
    assert {"late-kit:fix", "late-kit:helper"} <= {info.ref for info in manager.list_tools()}
    assert {"late-kit:fix", "late-kit:helper"} <= {info.ref for info in Manager([tmp_path]).list_tools()}
    assert await manager.invoke("late-kit:fix", {"arguments": "c.py"}) == "Fix c.py"


async def test_a_nested_plugins_root_is_its_folder_relative_to_the_search_path(write, tmp_path):
    write("vendors/acme/lint/.claude-plugin/plugin.json", '{"name": "acme-lint"}')
    write(
        "vendors/acme/lint/commands/run.md", "---\ndescription: Lint\n---\nRun ${CLAUDE_PLUGIN_ROOT}/scripts/lint.sh\n"
    )
    write("solo/.claude-plugin/plugin.json", '{"name": "solo"}')
    write("solo/commands/go.md", "---\ndescription: Go\n---\nRun ${CLAUDE_PLUGIN_ROOT}/go.sh\n")
    assert (
        await Manager([tmp_path]).invoke("acme-lint:run", {"arguments": ""}) == "Run vendors/acme/lint/scripts/lint.sh"
    )
    assert await Manager([tmp_path / "solo"]).invoke("solo:go", {"arguments": ""}) == "Run ./go.sh"  # the project
