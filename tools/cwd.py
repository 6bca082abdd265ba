"""cwd: set the target's working folder, relative to the tool's own folder."""

from pathlib import Path

from orchestrator.errors import ConfigurationError

frontmatter = {
    "description": "Sets ctx.cwd for the tool (relative paths start at the tool's folder).",
    "metadata": {"visibility": "hidden", "params": {"type": "string"}},
}


async def main(ctx):
    target = ctx.target
    base = target.tool.path.parent if target.tool.path else target.cwd
    folder = (base / Path(ctx.args)).resolve()
    if not folder.is_dir():
        raise ConfigurationError(f"cwd {str(folder)!r} is not a folder", tool=target.tool.name, key="cwd")
    target.cwd = folder
    return await target.manager.next()
