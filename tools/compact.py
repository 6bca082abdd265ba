"""compact: keep an agent's conversation within a message or token budget, for good.

Put it in an agent's `model-pipeline`:
`model-pipeline: {compact: {max-messages: 40, max-tokens: 20000}}`. Before a
model request whose conversation is over budget, the oldest turns are
dropped (the system message and the `messages` metadata always stay) and the
conversation is rewritten through `ctx.locals["conversation"]`, so the later
requests and the saved session continue from the compacted list. Turns are
dropped whole: an assistant message that called tools never loses its tool
results, and the kept part starts at a user message when one fits. The
newest turn is always kept. Tokens are estimated at 4 characters each.

With `summarize: MODEL` (a model spec, as in `model`), the dropped turns are
summarised by that model and the summary is kept as the first message. Its
`base-url` and `api-key-env` are honoured when trusted configuration set
them, as for `fallback`'s models (the agent authorizes both when it starts).
"""

import json

frontmatter = {
    "description": "Trims (or summarises) an agent's oldest turns past a message or token budget.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "max-messages": {"type": "integer", "minimum": 1},
                "max-tokens": {"type": "integer", "minimum": 1},
                "summarize": {"type": ["string", "object"]},
            },
            "anyOf": [{"required": ["max-messages"]}, {"required": ["max-tokens"]}],
            "additionalProperties": False,
        },
    },
}

SUMMARY = "Summarise this conversation in a few sentences: the facts, decisions and open questions a reader needs."


def tokens(message):
    return len(json.dumps(message, ensure_ascii=False, default=str)) // 4 + 1


def cut(messages, max_messages, max_tokens):
    """Where the kept part starts: whole turns from the end, within both budgets (0: nothing to drop)."""
    starts = [i for i, m in enumerate(messages) if m.get("role") != "tool"] or [0]
    count = size = 0
    keep = len(messages)
    for start in reversed(starts):
        count += keep - start
        size += sum(tokens(m) for m in messages[start:keep])
        if keep < len(messages) and (count > max_messages or size > max_tokens):
            break
        keep = start
    users = [s for s in starts if s >= keep and messages[s].get("role") == "user"]
    return users[0] if users and keep > 0 else keep


async def summary(ctx, spec, dropped):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.agent import parse_model

    parent = ctx.target.parent
    folder = parent.tool.path.parent if parent is not None and parent.tool.path else None
    model = parse_model(spec, tool=ctx.tool.name, folder=folder, aliases=ctx.target.meta.get("model-aliases"))
    transcript = "\n".join(f"{m.get('role')}: {m.get('content') or json.dumps(m.get('tool_calls'))}" for m in dropped)
    request = {
        "model": model,
        "messages": [{"role": "system", "content": SUMMARY}, {"role": "user", "content": transcript}],
    }
    response = await ctx.manager.invoke("model-call", request)
    return {"role": "user", "content": f"Summary of the earlier conversation: {response.get('content') or ''}"}


async def main(ctx):
    target = ctx.target
    conversation = target.locals.get("conversation")
    if conversation is not None:
        preamble, messages = conversation.preamble, list(conversation.messages)
    else:  # a model-call outside an agent: compact this request only, keeping its leading system messages
        sent = list(target.args["messages"])
        lead = next((i for i, m in enumerate(sent) if m.get("role") != "system"), len(sent))
        preamble, messages = sent[:lead], sent[lead:]
    budget = (ctx.args.get("max-messages", len(messages) + 1), ctx.args.get("max-tokens", float("inf")))
    start = cut(messages, *budget)
    if start > 0:
        kept = messages[start:]
        if ctx.args.get("summarize"):
            kept = [await summary(ctx, ctx.args["summarize"], messages[:start]), *kept]
        if conversation is not None:
            conversation.rewrite(kept)
        target.args = {**target.args, "messages": [*preamble, *kept]}
        target.nonlocals["compacted"] = target.nonlocals.get("compacted", 0) + start
    return await target.manager.next()
