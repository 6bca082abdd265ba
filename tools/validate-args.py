"""validate-args: check the target's args against its `params` schema (JSON Schema or Picoschema)."""

from orchestrator import ArgsValidationError
from orchestrator.schema import check

frontmatter = {
    "when": {"meta": "params"},  # only a target with params has anything to check
    "description": "Checks args against the tool's params schema, listing every failing JSON pointer.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    target = ctx.target
    schema = target.meta.get("params")
    if schema is not None:
        check(schema, target.args, ArgsValidationError, target.tool.name, key="params", origin=target.tool)
    return await target.manager.next()
