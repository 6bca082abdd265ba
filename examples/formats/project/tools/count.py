"""Our own tool, found by the name its frontmatter declares (word-count), not its file name."""

frontmatter = {
    "name": "word-count",
    "description": "Counts the words of a text.",
    "metadata": {
        "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


async def main(ctx):
    return len(ctx.args["text"].split())
