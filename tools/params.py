"""params: fill the defaults of the `params` schema (this entry's args) into the target's args."""

from orchestrator.schema import fill_defaults

frontmatter = {
    "when": {"defaults": True},  # a schema without defaults leaves args as they are: nothing to do
    "description": "Fills schema defaults into args; validate-args checks them later.",
    "metadata": {"visibility": "hidden", "params": {"type": ["object", "boolean"]}},
}


async def main(ctx):
    target = ctx.target
    target.args = fill_defaults(ctx.args, target.args)
    return await target.manager.next()
