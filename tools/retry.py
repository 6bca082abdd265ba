"""retry: run the rest of the chain again when it fails, with exponential backoff.

Use it on any tool; on model requests through an agent's `model-pipeline`:
`model-pipeline: {retry: {attempts: 3, backoff: 0.5}}`. It is the only retry
of a model request: the provider clients never retry on their own.

It retries only what can succeed on a second try: an error whose type is in
`on` (ModelError and InvocationTimeout by default), unless the error says it
is not retryable (`retryable = False`: a model's HTTP 400, 401, 403, 404,
422, a truncated answer). Connection failures, timeouts, 429 and 5xx are.
So is an answer that is not JSON (a gateway's HTML page with status 200, a
body or stream chunk cut off); JSON of the wrong shape, server-sent events
to an unstreamed request and an answer past `Limits.model_answer` are not.
When the server asked to wait (Retry-After, on the error as `retry_after`),
the wait is at least that long. Every wait is capped at `max-delay` seconds.
The errors retried and the waits are in the target's nonlocals (`retries`,
`retry-waits`).
"""

import anyio

frontmatter = {
    "description": "Retries the rest of the chain on retryable failures (ModelError and InvocationTimeout by default).",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "attempts": {"type": "integer", "minimum": 1, "default": 3},
                "backoff": {"type": "number", "minimum": 0, "default": 0.5},
                "factor": {"type": "number", "minimum": 1, "default": 2},
                "max-delay": {"type": "number", "minimum": 0, "default": 30},
                "on": {"type": "array", "items": {"type": "string"}, "default": ["ModelError", "InvocationTimeout"]},
            },
            "additionalProperties": False,
        },
    },
}


def retryable(exc, names):
    """An error of a type in `names` that does not say it cannot succeed again."""
    return getattr(exc, "retryable", True) is not False and any(cls.__name__ in names for cls in type(exc).__mro__)


async def main(ctx):
    target = ctx.target
    args = ctx.args
    delay = args["backoff"]
    mark = target.manager.checkpoint()
    for attempt in range(1, args["attempts"] + 1):
        try:
            return await target.manager.next()
        except Exception as exc:
            if attempt == args["attempts"] or not retryable(exc, args["on"]):
                raise
            asked = getattr(exc, "retry_after", None)
            wait = min(max(delay, asked if isinstance(asked, (int, float)) else 0), args["max-delay"])
            target.nonlocals.setdefault("retries", []).append(f"{type(exc).__name__}: {exc}")
            target.nonlocals.setdefault("retry-waits", []).append(wait)
        target.manager.rewind(mark)
        await anyio.sleep(wait)
        delay *= args["factor"]
