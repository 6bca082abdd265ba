"""call-limit: how often tools may be called in one run; the call past a limit fails, naming it.

For an agent's calls: `tool-pipeline: {call-limit: {per-tool: {search: 3}, total: 20}}`;
on a tool itself: `call-limit: {total: 5}`. `each: N` limits every tool not
named in `per-tool`. Counts live in the run's state (`ctx.run.state`), so
they cover every invocation under one top-level `invoke`: nested agents and
parallel calls too. Every call that reaches this entry counts, whether it
then succeeds or not. The refusal is an error the model hears, telling it
to stop and answer. List it before `approval` so a refused call never asks.
"""

from orchestrator import ConfigurationError, InvocationError

frontmatter = {
    "role": "middleware",
    "description": "Limits calls per tool and per run; the call past a limit fails with an error naming it.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            # checked by the middleware, so a mistake names the tool it configures
            "properties": {
                "per-tool": {"description": "tool name -> most calls per run"},
                "each": {"description": "most calls per run of any tool not in per-tool"},
                "total": {"description": "most calls per run, all tools together"},
            },
        },
    },
}


def count(value, where, name):
    """A limit: a whole number from 0, or None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{name} must be a whole number from 0, not {value!r}"[:200], **where)
    return value


def limits(args, key, tool):
    """(per-tool, each, total) from this entry's args, checked."""
    where = {"tool": tool, "key": key}
    unknown = sorted(str(k) for k in args if k not in ("per-tool", "each", "total"))
    if unknown:
        raise ConfigurationError(f"{key}: unknown setting {unknown[0]!r}; known: per-tool, each, total", **where)
    per_tool = args.get("per-tool") or {}
    if not hasattr(per_tool, "items"):
        raise ConfigurationError(f"{key}.per-tool must map tool names to numbers, not {per_tool!r}"[:200], **where)
    checked = {str(name): count(n, where, f"{key}.per-tool.{name}") for name, n in per_tool.items()}
    return checked, count(args.get("each"), where, f"{key}.each"), count(args.get("total"), where, f"{key}.total")


async def main(ctx):
    target = ctx.target
    key = ctx.tool.name
    tool = target.tool.name
    per_tool, each, total = limits(ctx.args, key, tool)
    state = target.run.state.setdefault(key, {"total": 0, "tools": {}})
    made, mine = state["total"], state["tools"].get(tool, 0)
    limit = per_tool.get(tool, each)
    if limit is not None and mine >= limit:
        raise InvocationError(
            f"{key}: {tool!r} may be called {limit} time(s) per run and was called {mine} time(s); "
            "do not call it again: answer with what you have",
            tool=tool,
            key=key,
        )
    if total is not None and made >= total:
        raise InvocationError(
            f"{key}: this run may make {total} tool call(s) and made {made}; "
            "do not call any more tools: answer with what you have",
            tool=tool,
            key=key,
        )
    # counted before the call runs, so parallel calls cannot all slip under the limit
    state["total"] = made + 1
    state["tools"][tool] = mine + 1
    return await target.manager.next()
