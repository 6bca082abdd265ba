"""The built-in cache middleware."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_cache_answers_repeated_args_from_memory(write, tools):
    write(
        "tools/counter.py",
        "frontmatter = {'metadata': {'cache': {'ttl': 60}}}\n"
        "calls = []\n"
        "def main(ctx):\n    calls.append(ctx.args)\n    return len(calls)\n",
    )
    manager = Manager([tools])
    box: dict = {}
    assert await manager.invoke("counter", {"n": 1}, context={"nonlocals": box}) == 1
    assert await manager.invoke("counter", {"n": 1}, context={"nonlocals": box}) == 1
    assert await manager.invoke("counter", {"n": 2}, context={"nonlocals": box}) == 2
    assert box["cache-hits"] == 1


async def test_cache_on_model_requests(write, tools):
    script = "[{answer: cached, fail: 0}]"
    write(
        "tools/ask.md",
        f"---\nmetadata:\n  model: {{provider: scripted, script: {script}}}\n  model-pipeline: {{cache: {{}}}}\n---\nsame question\n",
    )
    manager = Manager([tools])
    box: dict = {}
    assert await manager.invoke("ask", context={"nonlocals": box}) == "cached"
    assert await manager.invoke("ask", context={"nonlocals": box}) == "cached"
    assert box["cache-hits"] == 1


async def test_cache_keys_on_metadata_and_caller_not_only_args(write, tools):
    write(
        "tools/audience.py",
        "frontmatter = {'metadata': {'cache': {'ttl': 60}, 'audience': 'public'}}\n"
        "def main(ctx):\n    return f\"{ctx.meta['audience']} answer for {ctx.envelope.get('user')}\"\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("audience", {"q": 1}) == "public answer for None"
    internal = await manager.invoke("audience", {"q": 1}, overrides={"audience": "internal"})
    assert internal == "internal answer for None"
    alice = await manager.invoke("audience", {"q": 1}, context={"envelope": {"user": "alice"}})
    bob = await manager.invoke("audience", {"q": 1}, context={"envelope": {"user": "bob"}})
    assert (alice, bob) == ("public answer for alice", "public answer for bob")
    assert await manager.invoke("audience", {"q": 1}, context={"envelope": {"user": "alice"}}) == alice
