frontmatter = {
    "description": "Looks a word up in a small dictionary.",
    "metadata": {"params": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}},
}

WORDS = {"ephemeral": "lasting a very short time", "ubiquitous": "found everywhere"}


async def main(ctx):
    return WORDS.get(ctx.args["word"].lower(), "not in this dictionary")
