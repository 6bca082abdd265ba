"""count: words and characters of a text (a tiny unit of work)."""

frontmatter = {
    "description": "Counts the words and characters of a text.",
    "metadata": {
        "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


async def main(ctx):
    text = ctx.args["text"]
    return {"words": len(text.split()), "characters": len(text)}
