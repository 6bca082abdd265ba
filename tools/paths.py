"""paths: search these folders first for the tools this one invokes.

Folders added here hold markdown tools only, unless the program marked them
trusted (Manager(trusted_paths=[...])): metadata never grants python code.
"""

frontmatter = {
    "description": "Adds search paths (relative to the tool's folder) for the tools this one invokes.",
    "metadata": {
        "visibility": "hidden",
        "params": {"type": ["string", "array"], "items": {"type": "string"}},
    },
}


async def main(ctx):
    target = ctx.target
    folders = [ctx.args] if isinstance(ctx.args, str) else list(ctx.args)
    added = [target.manager.search_path(target.manager.folder(folder, "paths")) for folder in folders]
    target.paths = (*added, *target.paths)
    return await target.manager.next()
