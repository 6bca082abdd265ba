"""cwd: set the target's working folder, relative to the tool's own folder."""

frontmatter = {
    "description": "Sets ctx.cwd for the tool (relative paths start at the tool's folder).",
    "metadata": {"visibility": "hidden", "params": {"type": "string"}},
}


async def main(ctx):
    target = ctx.target
    target.cwd = target.manager.folder(ctx.args, "cwd")
    return await target.manager.next()
