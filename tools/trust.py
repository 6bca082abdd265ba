"""trust: what the target may do. It can only narrow what it was granted.

- env: templates see environment variables (default false; granted by
  metadata only to tools from folders the program trusts).
- files: cwd and paths may point outside the tool's own search path
  (default true for tools from trusted folders, always false otherwise).
"""

from collections.abc import Mapping

from orchestrator import ConfigurationError

DEFAULTS = {"env": False, "files": True}

frontmatter = {
    "when": {"check": "narrows"},  # only args that narrow what the target was granted (or malformed ones) need a run
    "description": "Settles the target's trust: env (environment variables in templates), files (folders outside its own).",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {"env": {"type": "boolean"}, "files": {"type": "boolean"}},
            "additionalProperties": False,
        },
    },
}


def well_formed(spec):
    """Whether ``spec`` maps known flags to true/false."""
    return (
        isinstance(spec, Mapping) and not set(spec) - set(DEFAULTS) and all(isinstance(v, bool) for v in spec.values())
    )


def narrows(target, args):
    """args that narrow the trust"""
    spec = {} if args is None else args
    if not well_formed(spec):
        return True  # main reports them
    granted = target.trust
    return any(granted.get(flag) and not spec.get(flag, default) for flag, default in DEFAULTS.items())


async def main(ctx):
    target = ctx.target
    spec = ctx.args or {}
    if not well_formed(spec):
        raise ConfigurationError(
            f"trust must map {', '.join(DEFAULTS)} to true/false, not {spec!r}", tool=target.tool.name, key="trust"
        )
    for flag, default in DEFAULTS.items():
        target.trust[flag] = bool(target.trust.get(flag)) and spec.get(flag, default)
    return await target.manager.next()
