"""model-call: one model request, as an ordinary tool, so retry, fallback, caching and
logging are ordinary middleware on it (pass them from an agent with `model-pipeline`)."""

from orchestrator.agent import provider_for

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
    return await provider_for(ctx.args["model"]).complete(ctx.args, run=ctx.run.id)
