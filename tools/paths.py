"""paths: search these folders first for the tools this one invokes.

Folders added here hold markdown tools only, unless the program marked them
trusted (Manager(trusted_paths=[...])): metadata never grants python code.
"""

from orchestrator.errors import ConfigurationError

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
    base = target.tool.path.parent if target.tool.path else target.cwd
    added = []
    for folder in folders:
        path = (base / folder).resolve()
        if not path.is_dir():
            raise ConfigurationError(f"paths: {str(path)!r} is not a folder", tool=target.tool.name, key="paths")
        added.append(target.manager.search_path(path))
    target.paths = (*added, *target.paths)
    return await target.manager.next()
