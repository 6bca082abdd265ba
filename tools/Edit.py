"""Edit: Claude Code's Edit tool. Replaces exact text in a file of the project.

Args as Claude Code's: ``file_path``, ``old_string``, ``new_string`` and
``replace_all`` (default false: ``old_string`` must occur exactly once). It
needs the ``write`` grant (``host-trust: {write: true}`` on the agent) and,
by default, an approver's yes for each call; only files inside the project
folder (the run's cwd) are edited, symlinks followed first.
"""

from orchestrator import ArgsValidationError
from orchestrator.hosttools import MAX_FILE, confine, permit, read_text, shown

frontmatter = {
    "description": "Replaces old_string with new_string in a file of the project (exactly once unless replace_all).",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to edit (absolute or project-relative)."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The text to put in its place."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    },
}


async def main(ctx):
    confine(ctx, ctx.args["file_path"], "file_path")
    await permit(ctx, "write", "edits a file of the project")
    args = ctx.args  # an approver may have edited them: confine again
    path = confine(ctx, args["file_path"], "file_path")
    if path.stat().st_size > MAX_FILE:
        raise ArgsValidationError([("/file_path", f"{shown(ctx, path)!r} is too large to edit")], tool=ctx.tool.name)
    text = read_text(ctx, path, "file_path")
    old, new = args["old_string"], args["new_string"]
    count = text.count(old) if old else 0
    if count == 0:
        raise ArgsValidationError([("/old_string", f"not found in {shown(ctx, path)}")], tool=ctx.tool.name)
    if count > 1 and not args.get("replace_all"):
        found = f"occurs {count} times in {shown(ctx, path)}: give more context or set replace_all"
        raise ArgsValidationError([("/old_string", found)], tool=ctx.tool.name)
    path.write_text(text.replace(old, new), encoding="utf-8")
    return f"Replaced {count if args.get('replace_all') else 1} occurrence(s) in {shown(ctx, path)}"
