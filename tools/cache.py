"""cache: remember the result of the rest of the chain for the same call.

On model requests through an agent's `model-pipeline`:
`model-pipeline: {cache: {ttl: 600}}` answers a repeated request from memory.
The cache lives in this process. It is keyed by everything that can change
the answer, all as JSON (a call whose key JSON cannot hold is never cached):

- the target tool, its args and its merged metadata (so overrides and the
  authority's settings count);
- its locals (what the caller seeded in `$context.locals`, which templates
  read as `locals`) and nonlocals, less what is not data: the agent loop's
  `stream` callback and `conversation` (a model request's messages are its
  args), and this tool's own `cache-hits` count;
- the caller: the envelope, less its `request_id` (which names one request,
  not who sent it).

A caller nobody can tell from another has no answer of its own to keep: an
envelope whose `session` is null (an MCP client over stateless HTTP) is not
cached at all. `shared: true` says the answer does not depend on who asks:
the envelope is left out of the key, so every caller with the same call
(args, metadata, locals) shares one entry, anonymous callers included.
"""

import json
import time

frontmatter = {
    "description": "Caches the rest of the chain's result per tool, args, metadata, locals and caller, for ttl seconds.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "ttl": {"type": "number", "exclusiveMinimum": 0, "default": 300},
                "size": {"type": "integer", "minimum": 1, "default": 256},
                "shared": {"type": "boolean", "default": False},
            },
            "additionalProperties": False,
        },
    },
}

NOT_DATA = ("stream", "conversation")  # locals the agent loop hands model-call: a callback, the request's source
HITS = "cache-hits"
PER_REQUEST = "request_id"

entries: dict[tuple[str, str], tuple[float, object]] = {}  # key -> (expiry, result), oldest first


async def main(ctx):
    target = ctx.target
    envelope = target.envelope
    if ctx.args["shared"]:
        caller = None
    elif "session" in envelope and envelope["session"] is None:
        return await target.manager.next()  # no identity: its answer could only be another caller's
    else:
        caller = {k: v for k, v in envelope.items() if k != PER_REQUEST}
    local = {k: v for k, v in target.locals.items() if k not in NOT_DATA}
    nonlocal_ = {k: v for k, v in target.nonlocals.items() if k != HITS}
    try:
        key = (target.tool.uri, json.dumps([target.args, target.meta, caller, local, nonlocal_], sort_keys=True))
    except (TypeError, ValueError):
        return await target.manager.next()
    now = time.monotonic()
    hit = entries.get(key)
    if hit is not None and hit[0] > now:
        target.nonlocals[HITS] = target.nonlocals.get(HITS, 0) + 1
        return hit[1]
    result = await target.manager.next()
    if len(entries) >= ctx.args["size"]:
        entries.pop(next(iter(entries)))
    entries[key] = (now + ctx.args["ttl"], result)
    return result
