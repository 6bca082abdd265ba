"""tool-batch: the once-per-turn hook on an agent's parallel tool calls.

Before a turn's tool calls run, an agent whose metadata has `batch-pipeline`
(middleware -> args, like `tool-pipeline`) invokes this tool with
`{"calls": [{"id", "tool", "arguments"}, ...]}` (`tool` is the ref the model
called) and `batch-pipeline` as its overrides. Its result is the list of
calls to run: a middleware may change a call's `arguments`, or mark it
`"denied": "reason"` (the model gets an error result saying so); a call left
out of the list is denied. This body returns the calls unchanged. A
middleware that raises ApprovalRequired suspends the whole turn.
"""

frontmatter = {
    "description": "Receives one turn's tool calls; its batch-pipeline middleware may edit or deny them.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "calls": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "tool": {"type": "string"}, "arguments": {}},
                        "required": ["id", "tool"],
                    },
                },
            },
            "required": ["calls"],
        },
    },
}


async def main(ctx):
    return ctx.args["calls"]
