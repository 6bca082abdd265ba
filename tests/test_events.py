"""Events for progress and tracing, and list_tools for listings."""

from __future__ import annotations

import anyio
import pytest

from orchestrator import Manager, ToolDefinitionError

pytestmark = pytest.mark.anyio


async def test_invoke_events_nest_with_depth(write, tools):
    write("tools/inner.md", "---\nmetadata: {$inherit: false}\n---\ninner\n")
    write(
        "tools/outer.py",
        "frontmatter = {'metadata': {'$inherit': False}}\nasync def main(ctx):\n    return await ctx.manager.invoke('inner')\n",
    )
    seen = []
    manager = Manager([tools], on_event=lambda e: seen.append((e.kind, e.tool, e.depth, e.data.get("error"))))
    assert await manager.invoke("outer") == "inner"
    assert seen == [
        ("invoke.start", "outer", 0, None),
        ("invoke.start", "inner", 1, None),
        ("invoke.end", "inner", 1, None),
        ("invoke.end", "outer", 0, None),
    ]


async def test_invoke_end_carries_the_error_and_a_broken_listener_is_ignored(write, tools):
    write(
        "tools/bad.py", "frontmatter = {'metadata': {'$inherit': False}}\ndef main(ctx):\n    raise ValueError('x')\n"
    )
    seen = []

    def listener(event):
        seen.append(event)
        raise RuntimeError("listener bug")

    manager = Manager([tools], on_event=listener)
    with pytest.raises(ValueError):
        await manager.invoke("bad")
    assert seen[-1].kind == "invoke.end" and seen[-1].data["error"] == "ValueError: x"
    assert seen[-1].data["seconds"] >= 0


async def test_event_stream(write, tools):
    write("tools/t.md", "---\nmetadata: {$inherit: false}\n---\nx\n")
    manager = Manager([tools])
    async with manager.events.stream() as stream:
        await manager.invoke("t")
        kinds = []
        with anyio.move_on_after(1):
            async for event in stream:
                kinds.append(event.kind)
                if event.kind == "invoke.end":
                    break
    assert kinds == ["invoke.start", "invoke.end"]
    assert not manager.events


def test_list_tools_skips_hidden_and_reports_broken(write, tools):
    write("tools/a.md", "---\ndescription: A.\nmetadata: {params: {type: object}}\n---\nx\n")
    write("tools/secret.md", "---\nmetadata: {visibility: hidden}\n---\nx\n")
    write("tools/broken.md", "---\nmetadata: [\n---\n")
    infos = {i.ref: i for i in Manager([tools]).list_tools()}
    assert infos["a"].description == "A." and infos["a"].params == {"type": "object"} and infos["a"].kind == "markdown"
    assert "secret" not in infos
    assert isinstance(infos["broken"].error, ToolDefinitionError)
    assert "execute" not in infos  # built-ins are hidden
    everything = {i.ref for i in Manager([tools]).list_tools(hidden=True)}
    assert {"secret", "execute", "validate-args"} <= everything


async def test_a_quiet_listener_hears_the_model_turns_but_no_call_nor_chain_entry_is_observed_for_it(write, tools):
    write(
        "tools/talks.py",
        "frontmatter = {'metadata': {'params': {'type': 'object'}}}\n"
        "def main(ctx):\n"
        "    ctx.owner.emit('model.request', ctx, 1, model='scripted:x', messages=[])\n"
        "    return 'said'\n",
    )
    loud: list[tuple[str, int]] = []
    quiet: list[tuple[str, int]] = []
    manager = Manager([tools], on_event=lambda e: loud.append((e.kind, e.depth)))
    assert await manager.invoke("talks", {}) == "said"
    assert ("invoke.start", 1) in loud  # a listener observes the chain's entries (validate-args here)
    manager.events.listeners.clear()
    manager.events.quiet.append(lambda e: quiet.append((e.kind, e.depth)))
    assert manager.events  # something listens: events are built
    assert await manager.invoke("talks", {}) == "said"
    assert quiet == [("model.request", 0)]  # neither the call's start and end nor any entry's
    quiet.clear()
    manager.events.listeners.append(lambda e: loud.append((e.kind, e.depth)))
    loud.clear()
    assert await manager.invoke("talks", {}) == "said"
    assert ("invoke.start", 0) in loud and ("invoke.end", 0) in loud  # a listener beside it is told
    assert quiet == [("model.request", 0)]  # a quiet listener still hears no start or end
