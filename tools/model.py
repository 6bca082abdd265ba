"""model: choose the model that answers a markdown tool (R-AGENT-2).

A bare word names a model alias: `model-aliases` metadata (say, in the user
level's AUTHORITY.md: `model-aliases: {local: ollama:qwen3}`) over the
built-in table and `$TOOLCASCADE_MODEL_ALIASES`.
"""

frontmatter = {
    "description": "Parses the `model` metadata ('provider:name' or a mapping) for agent-execute.",
    # Any value: parse_model reports a bad one naming the tool and key.
    "metadata": {"visibility": "hidden", "params": {"description": "'provider:name' or a mapping"}},
}


async def main(ctx):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.agent import parse_model

    target = ctx.target
    folder = target.tool.path.parent if target.tool.path else None
    aliases = target.meta.get("model-aliases")  # the alias table's own entries (the user level's, say)
    target.locals["model"] = parse_model(ctx.args, tool=target.tool.name, folder=folder, aliases=aliases)
    return await target.manager.next()
