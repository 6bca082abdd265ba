"""A directive tool: :signature{team=...} becomes a sign-off line."""

frontmatter = {"description": "A sign-off line for a reply.", "metadata": {"visibility": "hidden"}}


def main(ctx):
    return f"-- {ctx.args['attributes'].get('team', 'the team')}, {ctx.target.meta['tone']} regards"
