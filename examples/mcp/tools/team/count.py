"""A python tool in a subfolder: served as team__count, its result comes back as JSON."""

frontmatter = {
    "description": "Counts the words and characters of a text.",
    "metadata": {"params": {"type": "string"}},  # not an object: MCP clients send {"value": "..."}
}


def main(ctx):
    return {"words": len(ctx.args.split()), "characters": len(ctx.args)}
