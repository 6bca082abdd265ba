"""The built-in trust middleware: it can only narrow what authorities granted."""

from __future__ import annotations

import pytest

from orchestrator import ConfigurationError, Manager, SecurityError

pytestmark = pytest.mark.anyio


async def test_trust_gates_env_in_the_prompt(write, tools, monkeypatch):
    monkeypatch.setenv("TC_TOKEN", "t0k")
    write("tools/open.md", "---\nmetadata: {trust: {env: true}}\n---\n{{ env.TC_TOKEN | default('none') }}\n")
    write("tools/closed.md", "---\n---\n{{ env.TC_TOKEN | default('none') }}\n")
    manager = Manager([tools])
    assert await manager.invoke("open") == "t0k"
    assert await manager.invoke("closed") == "none"
    assert await manager.invoke("open", overrides={"trust": {"env": False}}) == "none"  # narrowing works
    assert await manager.invoke("closed", overrides={"trust": {"env": True}}) == "none"  # overrides cannot widen


async def test_trust_refuses_unknown_flags(write, tools):
    write("tools/t.md", "---\nmetadata: {trust: {root: true}}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="trust must map env"):
        await Manager([tools]).invoke("t")


async def test_trust_is_locked_against_callers(write, tools):
    write("tools/t.md", "---\n---\nx\n")
    with pytest.raises(SecurityError):
        await Manager([tools]).invoke("t", {"$middleware": {"trust": {"args": {"env": True}}}})
