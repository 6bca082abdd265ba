"""A middleware: upper-cases whatever the wrapped body returns."""

frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}


async def main(ctx):
    target = ctx.target
    result = await target.manager.next()
    return str(result).upper() + "!" * ctx.args.get("times", 1)
