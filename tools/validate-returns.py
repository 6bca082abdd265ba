"""validate-returns: after the body, check the result against the `returns` schema (JSON Schema or Picoschema)."""

from orchestrator import ReturnsValidationError
from orchestrator.schema import check

frontmatter = {
    "when": {"meta": "returns"},  # only a target with returns has anything to check
    "description": "Checks the result against the tool's returns schema.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    target = ctx.target
    result = await target.manager.next()
    schema = target.meta.get("returns")
    if schema is not None:
        check(schema, result, ReturnsValidationError, target.tool.name, key="returns", origin=target.tool)
    return result
