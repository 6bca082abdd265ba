"""A middleware no tool names: callers add it with $middleware."""

frontmatter = {
    "role": "middleware",
    "metadata": {"params": {"type": "object", "properties": {"times": {"type": "integer", "default": 1}}}},
}


async def main(ctx):
    result = await ctx.target.manager.next()
    return str(result) + "!" * ctx.args.get("times", 1)
