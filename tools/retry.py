"""retry: run the rest of the chain again when it fails, with exponential backoff.

Use it on any tool; on model requests through an agent's `model-pipeline`:
`model-pipeline: {retry: {attempts: 3, backoff: 0.5}}`.
"""

import anyio

frontmatter = {
    "description": "Retries the rest of the chain on failure (ModelError and InvocationTimeout by default).",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "attempts": {"type": "integer", "minimum": 1, "default": 3},
                "backoff": {"type": "number", "minimum": 0, "default": 0.5},
                "factor": {"type": "number", "minimum": 1, "default": 2},
                "on": {"type": "array", "items": {"type": "string"}, "default": ["ModelError", "InvocationTimeout"]},
            },
            "additionalProperties": False,
        },
    },
}


def matches(exc, names):
    return any(cls.__name__ in names for cls in type(exc).__mro__)


async def main(ctx):
    target = ctx.target
    args = ctx.args
    delay = args["backoff"]
    mark = target.manager.checkpoint()
    for attempt in range(1, args["attempts"] + 1):
        try:
            return await target.manager.next()
        except Exception as exc:
            if attempt == args["attempts"] or not matches(exc, args["on"]):
                raise
            target.nonlocals.setdefault("retries", []).append(f"{type(exc).__name__}: {exc}")
        target.manager.rewind(mark)
        await anyio.sleep(delay)
        delay *= args["factor"]
