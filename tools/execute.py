"""execute: run the target's body, then let the rest of its chain (post-execute) run."""

frontmatter = {
    "when": {"next": True},  # with nothing after it, the body runs at the bottom of the chain anyway
    "description": "Runs the target's body, then continues its chain.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    target = ctx.target
    await target.manager.execute()
    return await target.manager.next()
