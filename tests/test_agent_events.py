"""What the agent loop tells listeners (issue 29): the model.request event carries the messages as sent."""

from __future__ import annotations

import pytest
import yaml

from orchestrator import Manager

pytestmark = pytest.mark.anyio

# A model-pipeline middleware that adds a message to the very list model-call is given.
ADD = """
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    ctx.target.args["messages"].append({"role": "user", "content": "added in the pipeline"})
    return await ctx.target.manager.next()
"""


async def test_model_request_event_carries_the_list_model_call_is_given(write, tools):
    write("tools/add.py", ADD)
    script = [{"answer": "It is 5.", "expect": {"contains": ["Weather in Paris?", "added in the pipeline"]}}]
    metadata = {
        "model": {"provider": "scripted", "script": script},
        "system": "Be brief.",
        "model-pipeline": {"add": {}},
    }
    write("tools/ask.md", "---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nWeather in {{ args.city }}?\n")
    manager = Manager([tools])
    events = []
    manager.events.listeners.append(lambda e: events.append(e) if e.kind == "model.request" else None)
    assert await manager.invoke("ask", {"city": "Paris"}) == "It is 5."
    (event,) = events
    # the same list, not a copy: what the pipeline added after the event is in it, as the provider got it
    assert event.data["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "user", "content": "added in the pipeline"},
    ]
