"""Write: Claude Code's Write tool. Writes a file of the project, creating its folders.

Args as Claude Code's: ``file_path`` (absolute, or relative to the project
folder) and ``content``. It needs the ``write`` grant (``host-trust: {write:
true}`` on the agent, from a program or a trusted file) and, by default, an
approver's yes for each call; only files inside the project folder (the
run's cwd) are written, symlinks followed first.
"""

from orchestrator import ConfigurationError
from orchestrator.hosttools import confine, permit, shown

frontmatter = {
    "description": "Writes a file of the project (creating or replacing it) with the given content.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to write (absolute or project-relative)."},
                "content": {"type": "string", "description": "The file's whole new content."},
            },
            "required": ["file_path", "content"],
            "additionalProperties": False,
        },
    },
}


async def main(ctx):
    confine(ctx, ctx.args["file_path"], "file_path", exists=False)
    await permit(ctx, "write", "writes a file of the project")
    args = ctx.args  # an approver may have edited them: confine again
    path = confine(ctx, args["file_path"], "file_path", exists=False)
    if path.is_dir():
        raise ConfigurationError(f"file_path: {shown(ctx, path)!r} is a folder", tool=ctx.tool.name, key="file_path")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(args["content"], encoding="utf-8")
    return f"Wrote {len(args['content'])} characters to {shown(ctx, path)}"
