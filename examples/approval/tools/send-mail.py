"""Sends an e-mail (here it only says what it would send)."""

frontmatter = {
    "description": "Sends an e-mail.",
    "metadata": {
        "params": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
    },
}


async def main(ctx):
    return f"sent {ctx.args['subject']!r} to {ctx.args['to']}"
