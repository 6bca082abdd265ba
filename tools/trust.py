"""trust: what the target may do. It can only narrow what its authorities granted."""

from orchestrator.errors import ConfigurationError

FLAGS = ("env",)

frontmatter = {
    "description": "Settles the target's trust: env (environment variables visible to templates).",
    "metadata": {
        "visibility": "hidden",
        "params": {"type": "object", "properties": {"env": {"type": "boolean"}}, "additionalProperties": False},
    },
}


async def main(ctx):
    target = ctx.target
    spec = ctx.args or {}
    unknown = set(spec) - set(FLAGS)
    if not isinstance(spec, dict) or unknown or not all(isinstance(v, bool) for v in spec.values()):
        raise ConfigurationError(
            f"trust must map {', '.join(FLAGS)} to true/false, not {spec!r}", tool=target.tool.name, key="trust"
        )
    for flag in FLAGS:
        target.trust[flag] = bool(target.trust.get(flag)) and spec.get(flag, False)
    return await target.manager.next()
