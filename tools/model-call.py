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
(`orchestrator.agent.clients`) and reads at most the Manager's
`Limits.model_answer` bytes of answer, also when a program calls
`model-call` itself.

It has no `params`, so validate-args is not in its chain: the request (an
object with `model` and `messages`) and the shape of each field (`model` a
mapping naming its provider, `messages` a list of objects with a `role`,
`tools` a list, `tool-choice` a string, `response-format` an object or null)
are checked by `request_problems`, in plain Python, before anything is sent,
and refused with the ArgsValidationError validate-args would raise, listing
every failing pointer. The agent sends one request per turn, on the way to
its first token: a JSON Schema walk over the request and every message cost
about ten times the rest of validate-args, and validate-args itself a chain
entry (issue 29).
"""

from orchestrator import ArgsValidationError

frontmatter = {
    "description": "Sends one request to a model provider and returns its response.",
    "metadata": {"visibility": "hidden"},  # no params: request_problems checks the request
}


def request_problems(args):
    """(pointer, problem) for each field of a request out of shape, in pointer order (none for a good request)."""
    if not isinstance(args, dict):
        return [("", f"{type(args).__name__} is not an object (a request)")]
    missing = [repr(key) for key in REQUIRED if key not in args]
    if missing:
        return [("", f"missing required propert{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)}")]
    found = []
    messages = args["messages"]
    if not isinstance(messages, list):
        found.append(("/messages", f"{type(messages).__name__} is not a list of messages"))
    else:
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                found.append((f"/messages/{index}", f"{type(message).__name__} is not an object (a message)"))
            elif "role" not in message:
                found.append((f"/messages/{index}", "missing required property 'role'"))
    model = args["model"]
    if not isinstance(model, dict):
        found.append(("/model", f"{type(model).__name__} is not an object (a model spec)"))
    elif "provider" not in model:
        found.append(("/model", "missing required property 'provider'"))
    for key, kinds, wanted in FIELDS:
        if key in args and not isinstance(args[key], kinds):
            found.append((f"/{key}", f"{type(args[key]).__name__} is not {wanted}"))
    return found


REQUIRED = ("model", "messages")
FIELDS = (
    ("response-format", (dict, type(None)), "an object or null"),
    ("tool-choice", str, "a string"),
    ("tools", list, "a list"),
)
"""The optional fields' types, in pointer order."""


async def main(ctx):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.agent import provider_for
    from orchestrator.agent.answer import bounded
    from orchestrator.agent.clients import keeping
    from orchestrator.agent.model import add_usage, check_response

    problems = request_problems(ctx.args)
    if problems:
        raise ArgsValidationError(problems, tool="model-call")
    stream = ctx.locals.get("stream")
    discard = getattr(stream, "discard", None)
    if discard is not None:
        discard("the request is sent again")  # an earlier attempt streamed, then a middleware ran it again
    try:
        owner = ctx.owner
        with bounded(owner.limits.model_answer), keeping(owner):  # the Manager's answer limit and reused client
            response = await provider_for(ctx.args["model"]).complete(ctx.args, run=ctx.run.id, on_delta=stream)
        add_usage(ctx.run.usage, response.get("usage"))  # a refused answer still cost its tokens
        check_response(ctx.args, response)
    except BaseException as exc:  # cancellation too: what was streamed will not be the answer
        if discard is not None:
            discard(f"{type(exc).__name__}: {exc}")
        raise
    return response
