"""model-call: one model request, as an ordinary tool, so retry, fallback, caching and
logging are ordinary middleware on it (pass them from an agent with `model-pipeline`).

The provider streams the answer to the delta callback the agent loop put in
`ctx.locals["stream"]` (when there is one); middleware still sees the
assembled response. When an attempt fails after pieces were streamed, or runs
again after a middleware retried it, listeners get `model.discarded` so they
can drop the partial text. A truncated answer, or one without the tool call
`tool-choice` demands, is a ModelError. The response's token usage is added
to `ctx.run.usage` (what the providers reported: a cache hit adds nothing).
The request uses the SDK client the Manager keeps for its configuration
(`orchestrator.agent.clients`), also when a program calls `model-call` itself.
"""

from orchestrator.agent import provider_for
from orchestrator.agent.clients import keeping
from orchestrator.agent.model import add_usage, check_response

frontmatter = {
    "description": "Sends one request to a model provider and returns its response.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "model": {"type": "object", "required": ["provider"]},
                "messages": {"type": "array", "items": {"type": "object", "required": ["role"]}},
                "tools": {"type": "array"},
                "tool-choice": {"type": "string"},
                "response-format": {"type": ["object", "null"]},
            },
            "required": ["model", "messages"],
        },
    },
}


async def main(ctx):
    stream = ctx.locals.get("stream")
    discard = getattr(stream, "discard", None)
    if discard is not None:
        discard("the request is sent again")  # an earlier attempt streamed, then a middleware ran it again
    try:
        with keeping(ctx.owner):  # the Manager's reused client, as an agent's requests get
            response = await provider_for(ctx.args["model"]).complete(ctx.args, run=ctx.run.id, on_delta=stream)
        add_usage(ctx.run.usage, response.get("usage"))  # a refused answer still cost its tokens
        check_response(ctx.args, response)
    except BaseException as exc:  # cancellation too: what was streamed will not be the answer
        if discard is not None:
            discard(f"{type(exc).__name__}: {exc}")
        raise
    return response
