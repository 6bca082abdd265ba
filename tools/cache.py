"""cache: remember the result of the rest of the chain for the same args.

On model requests through an agent's `model-pipeline`:
`model-pipeline: {cache: {ttl: 600}}` answers a repeated request from memory.
The cache lives in this process. It is keyed by everything that can change
the answer: the target tool, its args, its merged metadata (so overrides and
the authority's settings count) and its envelope (the caller's identity), all
as JSON; a call whose key JSON cannot hold is never cached.
"""

import json
import time

frontmatter = {
    "description": "Caches the rest of the chain's result per tool, args, metadata and caller, for ttl seconds.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "ttl": {"type": "number", "exclusiveMinimum": 0, "default": 300},
                "size": {"type": "integer", "minimum": 1, "default": 256},
            },
            "additionalProperties": False,
        },
    },
}

entries = {}


async def main(ctx):
    target = ctx.target
    try:
        key = (
            target.tool.uri,
            json.dumps([target.args, target.meta, target.envelope], sort_keys=True),
        )
    except (TypeError, ValueError):
        return await target.manager.next()
    now = time.monotonic()
    hit = entries.get(key)
    if hit is not None and hit[0] > now:
        target.nonlocals["cache-hits"] = target.nonlocals.get("cache-hits", 0) + 1
        return hit[1]
    result = await target.manager.next()
    if len(entries) >= ctx.args["size"]:
        entries.pop(next(iter(entries)))
    entries[key] = (now + ctx.args["ttl"], result)
    return result
