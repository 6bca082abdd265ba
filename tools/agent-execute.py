"""agent-execute: a markdown tool with a `model` is answered by the model (R-AGENT-1).

It hands the tool's body to the agent loop and continues the chain, so the
loop runs where the body would (at `execute`, inside error handlers), and
post-execute middleware such as validate-returns checks the answer. Python
tools and markdown tools without a model pass through.

It is `$locked` in the default authority: without it the tool would return
its rendered prompt, which is the model's to read, not the caller's.
"""

frontmatter = {
    "when": {
        "kind": "markdown",
        "meta": "model",
    },  # only a markdown tool with a model (in metadata or locals) is an agent
    "description": "Runs a markdown tool's prompt through its model in a tool-calling loop.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    # Imported here, not at the top: every plan reads this file's `when`, and python tools never need the agent.
    from orchestrator.agent import model_spec, run_agent

    target = ctx.target
    if target.tool.kind == "markdown" and model_spec(target) is not None:
        target.body = run_agent
    return await target.manager.next()
