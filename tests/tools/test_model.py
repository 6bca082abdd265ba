"""The built-in model middleware: it parses `model` for agent-execute."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_model_middleware_publishes_the_parsed_spec(write, tools):
    write(
        "tools/look.py",
        "async def main(ctx):\n    return ctx.target.locals['model']\n",  # ends the chain before agent-execute
    )
    write(
        "tools/t.md",
        "---\nmetadata: {model: 'openai:gpt-4o-mini', look: {}, $order: {look: {after: [model]}}}\n---\nx\n",
    )
    spec = await Manager([tools]).invoke("t")
    assert spec["provider"] == "openai" and spec["name"] == "gpt-4o-mini" and spec["base-url"] is None
