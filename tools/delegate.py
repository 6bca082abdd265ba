"""delegate: hand the target's body to another tool, or the rest of its pipeline to an executor.

- `delegate: other-tool` runs `other-tool` as the body, args passed on.
- `delegate: {engine: process, pool: 4}` marks a CPU-bound tool: the rest of
  its chain runs in a worker process (a pool of `pool`, default up to 4),
  killed when the call's deadline passes or it is cancelled, so a tool that
  spins never holds up the server (see `orchestrator.processes`).
- `delegate: {engine: ray, address: ..., pool: 2}` (or `engine: inprocess`,
  or `{}` for the program's `Manager(executor=...)`) runs the rest of the
  target's chain as a unit on that executor: entries before `delegate` ran
  here, the worker runs the ones after it (the configuration built-ins
  trust, params, cwd, paths and model run again there, where the tool's
  folder is). The worker sees a copy of the JSON part of the context;
  a timeout or cancellation here cancels the remote run. On a worker the
  engine form runs in place: a unit never delegates again.
"""

from orchestrator import ConfigurationError

frontmatter = {
    "description": "Replaces the tool's body with another tool, or runs the rest of its pipeline on an executor.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": ["string", "object"],
            "minLength": 1,
            "properties": {
                "engine": {"enum": ["inprocess", "process", "ray"]},
                "address": {"type": "string", "minLength": 1},
                "pool": {"type": "integer", "minimum": 1, "maximum": 1024},
            },
            "additionalProperties": False,
        },
    },
}


async def main(ctx):
    # Imported when called: a listing reads this file's frontmatter without it.
    from orchestrator.executor import continuation, executor_for, on_worker

    target = ctx.target
    spec = ctx.args
    if isinstance(spec, str):
        if spec == target.tool.name:
            raise ConfigurationError("a tool cannot delegate to itself", tool=spec, key="delegate")

        async def body(tctx):
            return await tctx.manager.invoke(spec, tctx.args)

        target.body = body
        return await target.manager.next()
    if on_worker():  # already on a worker: run the rest here, never delegate again
        return await target.manager.next()
    executor = executor_for(spec if spec.get("engine") else None, default=target.manager.executor)
    unit = continuation(target, root=getattr(executor, "root", None))
    result = await executor.submit(unit)
    target.manager.finish(result)
    return result
