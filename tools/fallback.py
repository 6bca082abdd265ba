"""fallback: when a model request fails, ask the next model in the list.

On an agent: `model-pipeline: {fallback: {models: ["openai:gpt-4o-mini", scripted]}}`.
Every model fault is a ModelError, whether retryable or not: an error status,
a timeout, an answer out of shape (an HTML page, `null`, a broken stream
chunk) or past `Limits.model_answer`; each one moves on to the next model.

A model here may name its own `base-url` and `api-key-env` (a self-hosted
endpoint) when trusted configuration set it: the agent authorizes these
models when it starts, as it does its `model`, and refuses them when a file
from a folder the program does not trust chose them. Outside an agent, a
program grants such a spec itself (`orchestrator.agent.model.grant_model`).
"""

from orchestrator import ModelError

frontmatter = {
    "description": "On a ModelError, runs the rest of a model-call chain again with the next fallback model.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {"models": {"type": "array", "items": {"type": ["string", "object"]}, "minItems": 1}},
            "required": ["models"],
            "additionalProperties": False,
        },
    },
}


async def main(ctx):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.agent import parse_model

    target = ctx.target
    mark = target.manager.checkpoint()
    models = [
        parse_model(m, tool=target.tool.name, aliases=target.meta.get("model-aliases")) for m in ctx.args["models"]
    ]
    for model in [None, *models]:
        if model is not None:
            target.manager.rewind(mark)
            target.args = {**target.args, "model": model}
        try:
            return await target.manager.next()
        except ModelError as exc:
            target.nonlocals.setdefault("fallbacks", []).append(f"{exc}")
            if model is models[-1]:
                raise
