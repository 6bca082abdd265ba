"""circuit-breaker: stop a tool called again and again with the same arguments in one run.

`tool-pipeline: {circuit-breaker: {repeats: 3}}`: a tool may run with the same
arguments (compared as canonical JSON) at most `repeats` times in a run; the
next identical call fails with an error the model hears, telling it to
change the arguments or answer. `tools: [...]` limits it to those tools (a
status tool polled on purpose can be left out). Calls count whether they
succeed or fail: a failing call repeated is the commonest loop. The memory
is the run's state (`ctx.run.state`): fingerprints, not the arguments.
"""

import hashlib
import json

from orchestrator import ConfigurationError, InvocationError

frontmatter = {
    "role": "middleware",
    "description": "Refuses a call repeated with identical arguments more than `repeats` times in one run.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            # checked by the middleware, so a mistake names the tool it configures
            "properties": {
                "repeats": {"description": "identical calls allowed per run (default 3)"},
                "tools": {"description": "only these tools (default: every call)"},
            },
        },
    },
}

REPEATS = 3


def settings(args, key, tool):
    """(repeats, tools or None) from this entry's args, checked."""
    where = {"tool": tool, "key": key}
    unknown = sorted(str(k) for k in args if k not in ("repeats", "tools"))
    if unknown:
        raise ConfigurationError(f"{key}: unknown setting {unknown[0]!r}; known: repeats, tools", **where)
    repeats = args.get("repeats", REPEATS)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigurationError(f"{key}.repeats must be a whole number from 1, not {repeats!r}"[:200], **where)
    tools = args.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
        raise ConfigurationError(f"{key}.tools must be a list of tool names, not {tools!r}"[:200], **where)
    return repeats, tools


def fingerprint(tool, args):
    """The tool and its arguments as canonical JSON, hashed (keys sorted; what JSON cannot hold as text)."""
    text = json.dumps([tool, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


async def main(ctx):
    target = ctx.target
    key = ctx.tool.name
    tool = target.tool.name
    repeats, tools = settings(ctx.args, key, tool)
    if tools is not None and tool not in tools:
        return await target.manager.next()
    seen = target.run.state.setdefault(key, {})
    mark = fingerprint(tool, target.args)
    made = seen.get(mark, 0)
    if made >= repeats:
        raise InvocationError(
            f"you already called {tool!r} with these arguments {made} time(s) in this run; "
            "change the arguments or answer with what you have",
            tool=tool,
            key=key,
        )
    seen[mark] = made + 1
    return await target.manager.next()
