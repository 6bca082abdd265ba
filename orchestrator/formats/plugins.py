"""Claude Code plugins as locations: ``plugins/NAME/{agents,commands,skills}``.

A plugin folder holds the same files as a project's ``.claude`` folder,
without the ``.claude``: ``plugins/review/agents/critic.md`` is an agent,
``plugins/review/commands/check.md`` a command, ``plugins/review/skills/x/SKILL.md``
a skill. Claude Code names them after the plugin (``review:check``), and
``${CLAUDE_PLUGIN_ROOT}`` in their text is the plugin's folder; here it is
written ``plugins/NAME``, relative to the project, so no server path ever
reaches a prompt.

A folder holding ``.claude-plugin/plugin.json`` is a plugin too (a repository
that is one plugin, or a marketplace's plugin several folders down, found
within ``MANIFEST_DEPTH`` levels and ``MANIFEST_FOLDERS`` folders): its
``agents``, ``commands`` and ``skills`` are named after the manifest's
``name``, and ``${CLAUDE_PLUGIN_ROOT}`` is ``.`` (``plugins/NAME`` under a
``plugins`` folder).

``place`` finds the plugin a file belongs to; ``in_location``
(``orchestrator.formats.fields``) asks it for the ``.claude/...`` locations,
so the registry treats a plugin's folders as those locations; ``plugin_folders``
lists the plugins a search path holds (the project root, ``plugins`` itself,
or one plugin's folder).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

PLUGINS = "plugins"
ROOT_VARIABLE = "${CLAUDE_PLUGIN_ROOT}"
KINDS = ("agents", "commands", "skills")
MANIFEST = Path(".claude-plugin", "plugin.json")
MANIFEST_BYTES = 65536  # a manifest is a few lines; only its name is read
MANIFEST_DEPTH = 4
"""Folder levels below a search path where a plugin manifest is looked for (``a/b/c/NAME/.claude-plugin``)."""
MANIFEST_FOLDERS = 2_000
"""Folders looked into for manifests per search path: a big tree costs a bounded walk, never a full one."""
SKIPPED = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist", "build", "target"})


@dataclass(frozen=True, slots=True)
class Place:
    """Where a file sits in a plugin: the plugin's name, the folder of its kind (``plugins/NAME/commands``),
    and what ``${CLAUDE_PLUGIN_ROOT}`` stands for: the plugin's folder relative to the project (``plugins/NAME``,
    or ``.`` for a plugin that is the project)."""

    name: str
    folder: Path
    root: str


def place(path: Path, kind: str, root: Path | None = None) -> Place | None:
    """The plugin whose ``kind`` folder (``agents``, ``commands``, ``skills``) holds ``path``, or None.

    A plugin is ``plugins/NAME``, or any folder with a ``.claude-plugin/plugin.json``; it is named by its
    manifest's ``name`` when it has one (a marketplace's ``plugins/tidy`` may be ``tidy-kit``), else by its folder.
    ``root`` is the search path the file was found in: a manifest's plugin below it is written relative to it
    (``vendors/acme/lint``), one that is the search path itself (or with no root known) as ``.``.
    """
    if f"{os.sep}{kind}{os.sep}" not in str(path):
        return None  # the common case, decided without splitting the path
    parts = path.parts
    for start in range(len(parts) - 2, 0, -1):  # the nearest enclosing plugin
        if parts[start] != kind:
            continue
        if start >= 2 and parts[start - 2] == PLUGINS:  # named by its manifest when it has one, as Claude Code
            named = manifest_name(Path(*parts[:start])) or parts[start - 1]
            return Place(named, Path(*parts[: start + 1]), f"{PLUGINS}/{parts[start - 1]}")
        name = manifest_name(Path(*parts[:start]))
        if name is not None:
            return Place(name, Path(*parts[: start + 1]), _relative(Path(*parts[:start]), root))
    return None


def _relative(folder: Path, root: Path | None) -> str:
    """``folder`` as written for the project: relative to the search path ``root``, ``.`` when it is root."""
    if root is None or not folder.is_relative_to(root):
        return "."
    return folder.relative_to(root).as_posix() or "."


def manifest_name(folder: Path) -> str | None:
    """The name of the plugin ``folder`` is (its ``.claude-plugin/plugin.json``), or None when it is none.

    A manifest without a usable ``name`` (text without ``/``, ``\\`` or ``:``) names the plugin after its folder.
    """
    manifest = folder / MANIFEST
    try:
        if not manifest.is_file():
            return None
        with open(manifest, "rb") as file:
            raw = file.read(MANIFEST_BYTES)
    except OSError:
        return None
    try:
        name = json.loads(raw).get("name")
    except (ValueError, AttributeError):
        name = None
    if isinstance(name, str) and name.strip() and not set(name) & set("/\\:") and ".." not in name:
        return name.strip()
    return folder.name


def plugin_folders(root: Path, looked: list[Path] | None = None) -> list[Path]:
    """The plugin folders of a search path: root itself when it is one, else ``root/plugins/*`` (or root's
    own folders when root is ``plugins``) and the folders below root that hold a manifest.

    Manifests are looked for down to ``MANIFEST_DEPTH`` levels below root (a marketplace keeps its plugins
    at ``plugins/NAME`` or deeper), in at most ``MANIFEST_FOLDERS`` folders, never inside a plugin found,
    a hidden folder or a dependency folder (``SKIPPED``). ``looked``, when given, receives every folder
    whose entries were read, so a cache of the result can follow edits there (a manifest added deep down).
    """
    if root.parent.name == PLUGINS or _is_file(root / MANIFEST):
        return [root]
    if looked is not None:
        looked.append(root)
    children = _folders(root)
    if root.name == PLUGINS:
        return children
    found = _manifests(children, looked)
    holder = root / PLUGINS
    if holder in children:
        found += [folder for folder in _folders(holder) if folder not in found]
    return found


def _folders(folder: Path) -> list[Path]:
    """``folder``'s subfolders, sorted, without hidden and dependency folders (none when it cannot be read).

    Read with ``os.scandir``: a directory entry knows whether it is a folder without a stat (a symlink is
    followed, as ``Path.is_dir`` follows it), and only the folders become Paths. The search path's top level
    looks into each of its folders for manifests: with ``iterdir`` that was a Path and a stat for every tool
    file of a 10,000-tool catalogue (63 ms of a first ``list``; 8 ms so).
    """
    try:
        with os.scandir(folder) as entries:
            names = sorted(
                entry.name
                for entry in entries
                if not entry.name.startswith(".") and entry.name not in SKIPPED and _entry_folder(entry)
            )
    except OSError:
        return []
    return [folder / name for name in names]


def _entry_folder(entry: os.DirEntry[str]) -> bool:
    """``entry`` is a folder, or a symlink to one; False when that cannot be told (as ``Path.is_dir``)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _manifests(top: list[Path], looked: list[Path] | None) -> list[Path]:
    """The folders holding a manifest among ``top`` and below them, breadth first and bounded."""
    found: list[Path] = []
    level = top
    count = 0
    for _depth in range(MANIFEST_DEPTH):
        below: list[Path] = []
        for folder in level:
            count += 1
            if count > MANIFEST_FOLDERS:
                return found
            if looked is not None:
                looked.append(folder)
            if _is_file(folder / MANIFEST):
                found.append(folder)  # a plugin's own folders hold no other plugin
            else:
                below += _folders(folder)
        level = below
        if not level:
            break
    return found


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for any OS error (a path too long for the OS, a folder it may not read)."""
    try:
        return path.is_file()
    except OSError:
        return False


def fill_root(text: str, where: Place | None) -> str:
    """``text`` with ``${CLAUDE_PLUGIN_ROOT}`` written as the plugin's folder (``plugins/NAME``)."""
    if where is None or ROOT_VARIABLE not in text:
        return text
    return text.replace(ROOT_VARIABLE, where.root)
