"""One Claude plugin file reached through two search paths: each sees its own ``${CLAUDE_PLUGIN_ROOT}``.

A plugin's ``${CLAUDE_PLUGIN_ROOT}`` is its folder written relative to the
search path the file was found through (``orchestrator.formats.plugins``), so
what a file loads as depends on that search path, not on the file alone: the
load cache must keep the two apart (an adapted file is cached per search path
root), or the second root reads the first's value. Two ways to reach one file:
nested search paths (one Manager, a call seeded with the inner one) and a
symlinked folder (two Managers sharing nothing but the file).
"""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = [
    pytest.mark.anyio,
]

WHERE = "---\ndescription: Say where the notes are.\n---\nRead ${CLAUDE_PLUGIN_ROOT}/notes.txt\n"


def plugin(write, rel: str) -> None:
    write(f"{rel}/.claude-plugin/plugin.json", '{"name": "kit", "version": "1.0.0"}')
    write(f"{rel}/commands/where.md", WHERE)


async def test_two_nested_search_paths_reaching_one_plugin_file_each_see_their_own_root(write, tmp_path):
    plugin(write, "market/kit")
    manager = Manager([tmp_path])
    assert await manager.invoke("kit:where", {"arguments": ""}) == "Read market/kit/notes.txt"
    inner = {"paths": [str(tmp_path / "market")]}  # the same file, found through the folder market/
    assert await manager.invoke("kit:where", {"arguments": ""}, context=inner) == "Read kit/notes.txt"
    assert await manager.invoke("kit:where", {"arguments": ""}) == "Read market/kit/notes.txt"  # and back


async def test_a_plugin_folder_reached_through_a_symlink_is_read_with_the_root_it_was_found_through(write, tmp_path):
    plugin(write, "vendor/kit")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "kit").symlink_to(tmp_path / "vendor" / "kit", target_is_directory=True)
    manager = Manager([tmp_path / "vendor"])
    assert await manager.invoke("kit:where", {"arguments": ""}) == "Read kit/notes.txt"
    plugin_itself = {"paths": [str(tmp_path / "project" / "kit")]}  # the plugin is the search path: "."
    assert await manager.invoke("kit:where", {"arguments": ""}, context=plugin_itself) == "Read ./notes.txt"
