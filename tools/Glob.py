"""Glob: Claude Code's Glob tool. The project's files matching a glob, newest first.

Args as Claude Code's: ``pattern`` (``**/*.py``, ``src/*.{ts,tsx}``) and
``path`` (the folder to search; default the project folder). Paths are
relative to the project folder (the run's cwd; ``*.md`` matches in the
searched folder only, ``**/*.md`` at any depth), at most 100, most recently
modified first; nothing outside the project folder is looked at.
"""

from orchestrator.hosttools import MAX_MATCHES, confine, glob_regex, modified, shown, walk

frontmatter = {
    "description": "Finds the project's files whose paths match a glob pattern (**/*.py), newest first.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The glob to match (e.g. **/*.md)."},
                "path": {"type": "string", "description": "The folder to search (default: the project folder)."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
}


def main(ctx):
    args = ctx.args
    top = confine(ctx, args.get("path", "."), "path")
    regex = glob_regex(args["pattern"])
    found = [path for path in walk(ctx, top) if regex.match(path.relative_to(top).as_posix())]
    found.sort(key=lambda path: -modified(path))
    lines = [shown(ctx, path) for path in found[:MAX_MATCHES]]
    if len(found) > MAX_MATCHES:
        lines.append(f"[{len(found) - MAX_MATCHES} more: narrow the pattern or the path]")
    return "\n".join(lines) if lines else "No files found"
