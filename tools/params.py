"""params: fill the defaults of the `params` schema (this entry's args) into the target's args."""

from collections.abc import Mapping

from orchestrator.schema import declares_defaults, fill_defaults

frontmatter = {
    "when": {"check": "declares"},  # a schema without defaults leaves args as they are: nothing to do
    "description": "Fills schema defaults into args; validate-args checks them later.",
    "metadata": {"visibility": "hidden", "params": {"type": ["object", "boolean"]}},
}


def declares(target, args):
    """args that declare a default"""
    return not isinstance(args, Mapping) or declares_defaults(args)


async def main(ctx):
    target = ctx.target
    target.args = fill_defaults(ctx.args, target.args)
    return await target.manager.next()
