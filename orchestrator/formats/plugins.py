"""Claude Code plugins as locations: ``plugins/NAME/{agents,commands,skills}``.

A plugin folder holds the same files as a project's ``.claude`` folder,
without the ``.claude``: ``plugins/review/agents/critic.md`` is an agent,
``plugins/review/commands/check.md`` a command, ``plugins/review/skills/x/SKILL.md``
a skill. Claude Code names them after the plugin (``review:check``), and
``${CLAUDE_PLUGIN_ROOT}`` in their text is the plugin's folder; here it is
written ``plugins/NAME``, relative to the project, so no server path ever
reaches a prompt.

``place`` finds the plugin a file belongs to; ``in_location``
(``orchestrator.formats.fields``) asks it for the ``.claude/...`` locations,
so the registry treats a plugin's folders as those locations; ``plugin_folders``
lists the plugins a search path holds (the project root, ``plugins`` itself,
or one plugin's folder).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PLUGINS = "plugins"
ROOT_VARIABLE = "${CLAUDE_PLUGIN_ROOT}"
KINDS = ("agents", "commands", "skills")


@dataclass(frozen=True, slots=True)
class Place:
    """Where a file sits in a plugin: the plugin's name and the folder of its kind (``plugins/NAME/commands``)."""

    name: str
    folder: Path

    @property
    def root(self) -> str:
        """What ``${CLAUDE_PLUGIN_ROOT}`` stands for: the plugin's folder, relative to the project."""
        return f"{PLUGINS}/{self.name}"


def place(path: Path, kind: str) -> Place | None:
    """The plugin whose ``kind`` folder (``agents``, ``commands``, ``skills``) holds ``path``, or None."""
    if f"{os.sep}{PLUGINS}{os.sep}" not in str(path):
        return None  # the common case, decided without splitting the path
    parts = path.parts
    for start in range(len(parts) - 4, -1, -1):  # the nearest enclosing plugin
        if parts[start] == PLUGINS and parts[start + 2] == kind:
            return Place(parts[start + 1], Path(*parts[: start + 3]))
    return None


def plugin_folders(root: Path) -> list[Path]:
    """The plugin folders of a search path: ``root/plugins/*``, every folder of ``root`` named ``plugins``, or root."""
    if root.parent.name == PLUGINS:
        return [root]
    holder = root if root.name == PLUGINS else root / PLUGINS
    try:
        return sorted(entry for entry in holder.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    except OSError:
        return []


def fill_root(text: str, where: Place | None) -> str:
    """``text`` with ``${CLAUDE_PLUGIN_ROOT}`` written as the plugin's folder (``plugins/NAME``)."""
    if where is None or ROOT_VARIABLE not in text:
        return text
    return text.replace(ROOT_VARIABLE, where.root)
