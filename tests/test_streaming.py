"""Answers stream to listeners as model.delta events through the model-call pipeline; usage adds up per run."""

from __future__ import annotations

import pytest
import yaml

from orchestrator import Manager, ModelError

pytestmark = pytest.mark.anyio

WEATHER = (
    "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'city': {'type': 'string'}}}}}\n"
    "def main(ctx):\n    return {'temp': len(ctx.args['city'])}\n"
)


def agent(write, name: str, script: list, **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nWeather?\n")


@pytest.fixture
def manager(write, tools):
    write("tools/weather.py", WEATHER)
    return Manager([tools])


def record(manager: Manager, prefix: str = "model.") -> list:
    seen: list = []
    manager.events.listeners.append(lambda e: seen.append(e) if e.kind.startswith(prefix) else None)
    return seen


async def test_deltas_carry_text_and_tool_call_arguments(write, manager):
    calls = [{"name": "weather", "arguments": {"city": "Reykjavik"}}]
    agent(write, "forecast", [{"calls": calls}, "It is nine degrees."], tools=["weather"])
    seen = record(manager)
    assert await manager.invoke("forecast") == "It is nine degrees."
    deltas = [e for e in seen if e.kind == "model.delta"]
    assert {(e.tool, e.depth, e.run) for e in deltas} == {("forecast", 0, deltas[0].run)}
    first = [e.data for e in deltas if e.iteration == 1]
    assert first[0] == {"call": "weather", "arguments": "", "index": 0}  # the call is announced first
    assert "".join(d["arguments"] for d in first) == '{"city": "Reykjavik"}' and len(first) > 2
    text = [e.data["text"] for e in deltas if e.iteration == 2]
    assert text == ["It", " is", " nine", " degrees."]
    kinds = [e.kind for e in seen if e.iteration == 2]
    assert kinds == ["model.request", *["model.delta"] * 4, "model.response"]
    response = seen[-1].data
    assert response["streamed"] == 4 and response["content"] == "It is nine degrees."


async def test_nothing_streams_when_nobody_listens(write, manager):
    write(
        "tools/spy.py",
        "async def main(ctx):\n"
        "    ctx.nonlocals.setdefault('streams', []).append(ctx.target.locals.get('stream'))\n"
        "    return await ctx.target.manager.next()\n",
    )
    agent(write, "quiet", ["hello there"], **{"model-pipeline": {"spy": {}}})
    box: dict = {}
    assert await manager.invoke("quiet", context={"nonlocals": box}) == "hello there"
    assert box["streams"] == [None]
    record(manager)
    box = {}
    await manager.invoke("quiet", context={"nonlocals": box})
    assert callable(box["streams"][0])


async def test_a_failed_attempt_is_discarded_and_the_retry_streams_again(write, manager):
    turn = {"answer": "It is warm", "fail": 1, "error": "overloaded", "partial": "It was"}
    agent(write, "flaky", [turn], **{"model-pipeline": {"retry": {"backoff": 0}}})
    seen = record(manager)
    assert await manager.invoke("flaky") == "It is warm"
    shown = [(e.kind, e.data.get("text"), e.data.get("deltas")) for e in seen[1:]]
    assert shown == [
        ("model.delta", "It", None),
        ("model.delta", " was", None),
        ("model.discarded", None, 2),
        ("model.delta", "It", None),
        ("model.delta", " is", None),
        ("model.delta", " warm", None),
        ("model.response", None, None),
    ]
    assert "ModelError: overloaded (turn 1, attempt 1)" in seen[3].data["why"]


async def test_a_middleware_that_runs_the_request_again_discards_the_first_answer(write, manager):
    write(
        "tools/twice.py",
        "async def main(ctx):\n"
        "    mark = ctx.target.manager.checkpoint()\n"
        "    await ctx.target.manager.next()\n"
        "    ctx.target.manager.rewind(mark)\n"
        "    return await ctx.target.manager.next()\n",
    )
    agent(write, "again", ["one two"], **{"model-pipeline": {"twice": {}}})
    seen = record(manager)
    await manager.invoke("again")
    kinds = [e.kind for e in seen]
    assert kinds == ["model.request", "model.delta", "model.delta", "model.discarded"] + [
        "model.delta",
        "model.delta",
        "model.response",
    ]
    assert seen[3].data == {"why": "the request is sent again", "deltas": 2}
    assert seen[-1].data["streamed"] == 2


async def test_a_request_that_fails_for_good_discards_what_it_streamed(write, manager):
    agent(write, "doomed", [{"answer": "x", "fail": 9, "partial": "half an"}])
    seen = record(manager)
    with pytest.raises(ModelError, match="scripted failure"):
        await manager.invoke("doomed")
    assert [e.kind for e in seen] == ["model.request", "model.delta", "model.delta", "model.discarded"]


async def test_a_cached_answer_streams_nothing_and_costs_nothing(write, manager):
    agent(write, "cached", ["from the model"], **{"model-pipeline": {"cache": {"ttl": 60}}})
    seen = record(manager)
    usage: list = []
    manager.events.listeners.append(lambda e: usage.append(e.data["run_usage"]) if e.kind == "model.response" else None)
    await manager.invoke("cached")
    first = len(seen)
    assert await manager.invoke("cached") == "from the model"
    again = [e.kind for e in seen[first:]]
    assert again == ["model.request", "model.response"]
    assert seen[-1].data["streamed"] == 0 and seen[-1].data["content"] == "from the model"
    assert usage[0]["calls"] == 1 and usage[1] == {}  # the second run asked no provider


async def test_usage_adds_up_over_a_run_and_code_reads_it_after(write, manager):
    write(
        "tools/meter.py",
        "async def main(ctx):\n"
        "    result = await ctx.target.manager.next()\n"
        "    ctx.nonlocals['usage'] = dict(ctx.run.usage)\n"
        "    return result\n",
    )
    script = [
        {
            "calls": [{"name": "weather", "arguments": {"city": "Oslo"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4},
        },
        {"answer": "Cold.", "usage": {"prompt_tokens": 20, "completion_tokens": 2}},
    ]
    agent(write, "metered", script, tools=["weather"], meter={})
    responses = record(manager, "model.response")
    box: dict = {}
    assert await manager.invoke("metered", context={"nonlocals": box}) == "Cold."
    total = {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36, "calls": 2}
    assert box["usage"] == total  # a middleware reads the run's totals after the agent ran
    assert [r.data["usage"]["total_tokens"] for r in responses] == [14, 22]
    assert responses[-1].data["run_usage"] == total  # the last model.response of a run carries its totals


async def test_usage_of_nested_agents_is_one_run(write, manager):
    agent(write, "inner", [{"answer": "deep", "usage": {"prompt_tokens": 5, "completion_tokens": 5}}])
    outer = [
        {"calls": [{"name": "inner", "arguments": {}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
        {"answer": "done", "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    ]
    agent(write, "outer", outer, tools=["inner"])
    responses = record(manager, "model.response")
    await manager.invoke("outer")
    assert [r.tool for r in responses] == ["outer", "inner", "outer"]
    assert responses[-1].data["run_usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 7,
        "total_tokens": 14,
        "calls": 3,
    }


async def test_deltas_reach_an_event_stream(write, manager):
    agent(write, "streamed", ["a b c"])
    async with manager.events.stream() as stream:
        await manager.invoke("streamed")
        texts = []
        while True:
            event = stream.receive_nowait()
            if event.kind == "model.delta":
                texts.append(event.data["text"])
            if event.kind == "model.response":
                break
    assert texts == ["a", " b", " c"]


async def test_model_request_names_the_model_and_what_was_offered(write, manager):
    returns = {"type": "object", "properties": {"temp": {"type": "integer"}}}
    agent(write, "asked", ['{"temp": 1}'], returns=returns)
    agent(write, "tooled", ["plain"], tools=["weather"])
    seen = record(manager, "model.request")
    await manager.invoke("asked")
    await manager.invoke("tooled")
    asked = [{k: v for k, v in e.data.items() if k != "messages"} for e in seen]
    assert asked == [
        {"model": "scripted", "tools": [], "response_format": True},
        {"model": "scripted", "tools": ["weather"], "response_format": False},
    ]
    assert [[m["role"] for m in e.data["messages"]] for e in seen] == [["user"], ["user"]]  # as sent
