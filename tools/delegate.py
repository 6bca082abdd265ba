"""delegate: hand the target's body to another tool, passing the target's args on."""

from orchestrator.errors import ConfigurationError

frontmatter = {
    "description": "Replaces the tool's body with an invocation of another tool, args passed on.",
    "metadata": {"visibility": "hidden", "params": {"type": "string", "minLength": 1}},
}


async def main(ctx):
    target = ctx.target
    name = ctx.args
    if name == target.tool.name:
        raise ConfigurationError("a tool cannot delegate to itself", tool=name, key="delegate")

    async def body(tctx):
        return await tctx.manager.invoke(name, tctx.args)

    target.body = body
    return await target.manager.next()
