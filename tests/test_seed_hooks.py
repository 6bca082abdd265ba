"""The reference frameworks' hooks that are not plain middleware (issue 29), each from a markdown agent on the
scripted model: MAF's MiddlewareTermination (``Termination``), Eino's AfterModelRewriteState
(``Conversation.rewrite_answer``) and the C# framework's WaitForResponse (``ask_caller``, tests/test_questions.py).
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from orchestrator import ConfigurationError, InvocationError, Manager
from orchestrator.memorystore import MemoryStore

pytestmark = pytest.mark.anyio

WEATHER = """
frontmatter = {"description": "Weather for a city.", "metadata": {"params": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
def main(ctx):
    return {"city": ctx.args["city"], "temp": len(ctx.args["city"])}
"""
# A tool-pipeline middleware: ends the loop before the call (skip) or after it (with its result).
STOPPER = """
from orchestrator.agent import Termination
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    target = ctx.target
    if ctx.args.get("when") == "before":
        raise Termination(f"stopped before {target.tool.name}")
    result = await target.manager.next()
    if target.args.get("city") == ctx.args.get("city"):
        raise Termination({"final": result})
    return result
"""
# A model-pipeline middleware: the stored answer says [redacted] where the model said "secret".
REDACT = """
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    target = ctx.target
    response = await target.manager.next()
    text = response.get("content") or ""
    if "secret" in text:
        target.locals["conversation"].rewrite_answer(text.replace("secret", "[redacted]"))
    return response
"""


def agent(write, name: str, script: list, body: str = "Weather in {{ args.city }}?", **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    text = "---\n" + yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}) + "---\n" + body + "\n"
    write(f"tools/{name}.md", text)


def requests(manager: Manager) -> list:
    """The model.request events of the manager's runs, as they happen."""
    seen: list = []
    manager.events.listeners.append(lambda e: seen.append(e) if e.kind == "model.request" else None)
    return seen


@pytest.fixture
def manager(write, tools):
    write("tools/weather.py", textwrap.dedent(WEATHER))
    write("tools/stopper.py", textwrap.dedent(STOPPER))
    write("tools/redact.py", textwrap.dedent(REDACT))
    return Manager([tools], sessions=MemoryStore())


CALL_TWO = {
    "calls": [{"name": "weather", "arguments": {"city": "Paris"}}, {"name": "weather", "arguments": {"city": "Oslo"}}]
}


async def test_termination_after_the_call_ends_the_loop_without_another_model_request(write, manager):
    agent(
        write,
        "forecast",
        [CALL_TWO, "never asked"],
        tools=["weather"],
        **{"tool-pipeline": {"stopper": {"city": "Oslo"}}},
    )
    sent = requests(manager)
    ended = []
    manager.events.listeners.append(lambda e: ended.append(e.data) if e.kind == "tool.end" else None)
    result = await manager.invoke("forecast", {"city": "Paris", "$context": {"session": "s"}})
    assert result == {"final": {"city": "Oslo", "temp": 4}}
    assert len(sent) == 1  # the one request that made the calls: none after the termination
    assert sorted(bool(e.get("terminated")) for e in ended) == [False, True]
    stored = await manager.sessions.messages("s")
    # both calls' results are kept, so the session can continue: every call has its result
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool"]
    assert stored[2]["content"] == '{"city": "Paris", "temp": 5}' and '"final"' in stored[3]["content"]


async def test_termination_before_the_call_skips_it_and_returns_the_value(write, manager):
    write(
        "tools/counted.py",
        "frontmatter = {'metadata': {'params': {'type': 'object'}}}\nRUNS = []\ndef main(ctx):\n    RUNS.append(1)\n    return 'ran'\n",
    )
    agent(
        write,
        "guarded",
        [{"calls": [{"name": "counted", "arguments": {}}]}, "never asked"],
        tools=["counted"],
        **{"tool-pipeline": {"stopper": {"when": "before"}}},
    )
    sent = requests(manager)
    assert await manager.invoke("guarded", {"city": "x"}) == "stopped before counted"
    assert len(sent) == 1


async def test_termination_ends_only_the_nearest_agent(write, manager):
    agent(
        write,
        "inner",
        [{"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}, "never asked"],
        tools=["weather"],
        **{"tool-pipeline": {"stopper": {"city": "Oslo"}}},
    )
    outer = [
        {"calls": [{"name": "inner", "arguments": {"city": "Oslo"}}]},
        {"answer": "outer done", "expect": {"last-role": "tool", "contains": '{"final": {"city": "Oslo"'}},
    ]
    agent(write, "outer", outer, tools=["inner"])
    sent = requests(manager)
    assert await manager.invoke("outer", {"city": "Oslo"}) == "outer done"
    assert [e.tool for e in sent] == ["outer", "inner", "outer"]


async def test_termination_outside_an_agent_is_an_invocation_error(write, manager):
    write(
        "tools/plain.md",
        "---\nmetadata: {stopper: {when: before}, $order: {stopper: {after: [$pre-execute], before: [execute]}}}\n---\nhi\n",
    )
    with pytest.raises(InvocationError, match="ended the agent loop outside an agent's tool call"):
        await manager.invoke("plain")


async def test_rewrite_answer_is_what_the_next_request_and_the_session_see(write, manager):
    script = [
        {"content": "my secret plan", "calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        {"answer": "The secret is 5.", "expect": {"contains": "my [redacted] plan", "last-role": "tool"}},
    ]
    agent(write, "spy", script, tools=["weather"], **{"model-pipeline": {"redact": {}}})
    sent = requests(manager)
    # the caller gets the answer as the model gave it; the conversation keeps the rewrite
    assert await manager.invoke("spy", {"city": "Paris", "$context": {"session": "r"}}) == "The secret is 5."
    second = [m.get("content") for m in sent[1].data["messages"]]
    assert "my [redacted] plan" in second and not any("secret" in str(c) for c in second)
    stored = await manager.sessions.messages("r")
    assert [m["content"] for m in stored if m["role"] == "assistant"] == ["my [redacted] plan", "The [redacted] is 5."]
    # the next turn of the session sends the rewritten answers
    agent(
        write,
        "spy",
        [{"answer": "ok", "expect": {"contains": ["The [redacted] is 5.", "again"]}}] * 3,
        body="{{ args.q }}",
    )
    manager.clear_cache()
    assert await manager.invoke("spy", {"q": "again", "$context": {"session": "r"}}) == "ok"
    assert not any("secret" in str(m.get("content")) for m in sent[-1].data["messages"])


async def test_rewrite_answer_refuses_what_is_not_text(write, manager):
    write(
        "tools/bad.py",
        "frontmatter = {'role': 'middleware', 'metadata': {'params': {'type': 'object'}}}\n"
        "async def main(ctx):\n    r = await ctx.target.manager.next()\n    ctx.target.locals['conversation'].rewrite_answer(3)\n    return r\n",
    )
    agent(write, "broken", ["hello"], **{"model-pipeline": {"bad": {}}})
    with pytest.raises(ConfigurationError, match="rewrite_answer takes the text to store"):
        await manager.invoke("broken", {"city": "x"})
