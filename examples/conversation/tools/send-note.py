frontmatter = {
    "description": "Sends a note to the teacher.",
    "metadata": {"params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
}


async def main(ctx):
    print(f"  (the teacher receives: {ctx.args['text']!r})")  # runs once, after the approval
    return "note sent"
