"""Searches the address book."""

frontmatter = {
    "description": "Searches the address book.",
    "metadata": {"params": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
}


async def main(ctx):
    return {"q": ctx.args["q"], "found": "team@example.com"}
