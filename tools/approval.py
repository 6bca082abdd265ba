"""approval: ask a human (an approver) before the call runs: approve, deny, or edit its arguments.

On a tool, every invocation asks: `approval: true`, or `approval: {reason: "sends mail"}`.
For an agent's calls: `tool-pipeline: {approval: {tools: [delete-file, send-mail]}}`
(only the listed tools ask; without `tools`, every call does). Once per turn
for all parallel calls: `batch-pipeline: {approval: {tools: [...]}}`.

Who decides, in order: a resumed run's decision (only for the call it was
asked about: the same tool and args; another call is asked about anew), the
approver of the request (the terminal in `toolcascade run`, the MCP client
through elicitation in `toolcascade serve`), `Manager(approver=...)`; with
nobody to ask the run suspends (`Interrupted`, `manager.resume(token,
decision)`). A denial is an error the model hears, with the approver's
reason. An edit changes the arguments only: `$` keys in it are refused.
See orchestrator/approval.py.
"""

frontmatter = {
    "role": "middleware",
    "description": "Asks an approver before the call runs: approve, deny (the caller hears why) or edit the arguments.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": ["object", "boolean"],
            # checked by the middleware, so a mistake names the tool it configures
            "properties": {
                "reason": {"description": "what the approver is told about why it asks (text)"},
                "tools": {"description": "only these tools ask (a list of names; default: every call)"},
            },
        },
    },
}


async def main(ctx):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.approval import hold

    return await hold(ctx)
