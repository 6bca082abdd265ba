"""model: choose the model that answers a markdown tool (R-AGENT-2)."""

from orchestrator.agent import parse_model

frontmatter = {
    "description": "Parses the `model` metadata ('provider:name' or a mapping) for agent-execute.",
    # Any value: parse_model reports a bad one naming the tool and key.
    "metadata": {"visibility": "hidden", "params": {"description": "'provider:name' or a mapping"}},
}


async def main(ctx):
    target = ctx.target
    folder = target.tool.path.parent if target.tool.path else None
    target.locals["model"] = parse_model(ctx.args, tool=target.tool.name, folder=folder)
    return await target.manager.next()
