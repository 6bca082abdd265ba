"""A middleware: upper-cases the result of the rest of the chain, then adds `suffix`."""

frontmatter = {
    "role": "middleware",
    "metadata": {"params": {"type": "object", "properties": {"suffix": {"type": "string", "default": ""}}}},
}


async def main(ctx):
    result = await ctx.target.manager.next()
    return str(result).upper() + ctx.args.get("suffix", "")
