"""The authority's locked middleware: appends a stamp to every result."""

frontmatter = {
    "role": "middleware",
    "metadata": {"params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
}


async def main(ctx):
    result = await ctx.target.manager.next()
    return f"{result} [{ctx.args['text']}]"
