"""LS: Claude Code's LS tool. A folder's entries, folders marked with ``/``.

Args as Claude Code's: ``path`` (the folder; default the project folder) and
``ignore`` (globs of names to leave out). Only folders inside the project
folder (the run's cwd) are listed, symlinks followed first.
"""

from orchestrator import ConfigurationError
from orchestrator.hosttools import MAX_WALK, bounded, confine, matcher, shown

frontmatter = {
    "description": "Lists the files and folders in a folder of the project (folders end with /).",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The folder to list (default: the project folder)."},
                "ignore": {"type": "array", "items": {"type": "string"}, "description": "Globs of names to skip."},
            },
            "additionalProperties": False,
        },
    },
}


def main(ctx):
    args = ctx.args
    folder = confine(ctx, args.get("path", "."), "path")
    if not folder.is_dir():
        raise ConfigurationError(
            f"path: {shown(ctx, folder)!r} is not a folder: Read reads a file", tool="LS", key="path"
        )
    skip = [matcher(glob) for glob in args.get("ignore", [])]
    entries = []
    for index, entry in enumerate(sorted(folder.iterdir())):
        if index >= MAX_WALK:
            entries.append(f"[stopped after {MAX_WALK:,} entries]")
            break
        if any(test(entry.name) for test in skip):
            continue
        entries.append(entry.name + ("/" if entry.is_dir() else ""))
    return bounded(f"{shown(ctx, folder)}/\n" + "\n".join(f"  {name}" for name in entries))
