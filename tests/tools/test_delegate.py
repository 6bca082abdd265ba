"""The built-in delegate middleware."""

from __future__ import annotations

import pytest

from orchestrator import ConfigurationError, Manager

pytestmark = pytest.mark.anyio


async def test_delegate_hands_the_body_over_with_the_args(write, tools):
    write("tools/real.py", "def main(ctx):\n    return f\"real got {ctx.args['x']}\"\n")
    write(
        "tools/front.md",
        "---\nmetadata: {delegate: real, returns: {type: string, pattern: '^real'}}\n---\nnever rendered\n",
    )
    write("tools/self.md", "---\nmetadata: {delegate: self}\n---\nx\n")
    manager = Manager([tools])
    assert await manager.invoke("front", {"x": 1}) == "real got 1"
    with pytest.raises(ConfigurationError, match="delegate to itself"):
        await manager.invoke("self")
