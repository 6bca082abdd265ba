"""validate-allowed-tools: an agent may offer and call only the tools in `allowed-tools`.

It publishes the allow-list on the target; the agent loop neither offers nor
runs anything outside it. Locked by the default authority.
"""

from orchestrator import ConfigurationError

frontmatter = {
    "when": {"meta": "allowed-tools"},  # only a target with allowed-tools has a list to publish
    "description": "Limits the tools an agent may call to its allowed-tools list.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    target = ctx.target
    allowed = target.meta.get("allowed-tools")
    if allowed is not None:
        if not isinstance(allowed, list) or not all(isinstance(name, str) for name in allowed):
            raise ConfigurationError(
                "allowed-tools must be a list of tool names", tool=target.tool.name, key="allowed-tools"
            )
        target.locals["allowed-tools"] = frozenset(allowed)
    return await target.manager.next()
