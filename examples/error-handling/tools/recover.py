"""The inner error handler: turns one error type into a fallback value; anything else goes on out."""

import builtins

frontmatter = {
    "role": "middleware",
    "description": "Returns `value` when the rest of the chain raises the error type named by `error`.",
    "metadata": {
        "params": {
            "type": "object",
            "properties": {"error": {"type": "string"}, "value": {}},
            "required": ["error", "value"],
        }
    },
}


async def main(ctx):
    recoverable = getattr(builtins, ctx.args["error"])  # a built-in exception class, e.g. LookupError
    try:
        return await ctx.target.manager.next()
    except recoverable as error:
        return f"{ctx.args['value']} ({error})"
