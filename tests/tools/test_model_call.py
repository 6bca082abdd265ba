"""The built-in model-call tool: one model request, with its own pipeline."""

from __future__ import annotations

import pytest

from orchestrator import ArgsValidationError, Manager, ModelError

pytestmark = pytest.mark.anyio


async def test_model_call_answers_through_the_provider(tools):
    response = await Manager([tools]).invoke(
        "model-call",
        {
            "model": {"provider": "scripted", "script": [{"calls": [{"name": "t", "arguments": {"a": 1}}]}]},
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert response["tool_calls"] == [{"id": "call_1_1", "name": "t", "arguments": {"a": 1}}]


async def test_model_call_validates_its_request(tools):
    with pytest.raises(ArgsValidationError, match="/messages"):
        await Manager([tools]).invoke("model-call", {"model": {"provider": "scripted"}, "messages": "hi"})


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"model": "scripted"}, "/model"),
        ({"model": {"name": "x"}}, "/model"),
        ({"messages": [{"role": "user", "content": "x"}, {"content": "no role"}]}, "/messages/1"),
        ({"messages": ["hi"]}, "/messages/0"),
        ({"tools": {"name": "t"}}, "/tools"),
        ({"tool-choice": 1}, "/tool-choice"),
        ({"response-format": "json"}, "/response-format"),
    ],
)
async def test_model_call_refuses_each_field_out_of_shape(tools, change, pointer):
    args = {**request(["never sent"]), **change}
    with pytest.raises(ArgsValidationError) as raised:
        await Manager([tools]).invoke("model-call", args)
    assert [p for p, _problem in raised.value.errors] == [pointer]
    assert raised.value.tool == "model-call"


async def test_model_call_lists_every_failing_field_in_pointer_order(tools):
    args = {"model": {}, "messages": [{}, {"role": "user"}, 3], "tools": None}
    with pytest.raises(ArgsValidationError) as raised:
        await Manager([tools]).invoke("model-call", args)
    assert [p for p, _problem in raised.value.errors] == ["/messages/0", "/messages/2", "/model", "/tools"]


async def test_model_call_still_needs_model_and_messages(tools):
    with pytest.raises(ArgsValidationError, match="/"):
        await Manager([tools]).invoke("model-call", {"messages": []})


def request(script: list, **extra) -> dict:
    return {
        "model": {"provider": "scripted", "script": script},
        "messages": [{"role": "user", "content": "x"}],
        **extra,
    }


async def test_model_call_streams_to_the_callback_trusted_code_gives_it(tools):
    pieces: list = []
    response = await Manager([tools]).invoke(
        "model-call", request(["a b"]), context={"locals": {"stream": pieces.append}}
    )
    assert pieces == [{"text": "a"}, {"text": " b"}] and response["content"] == "a b"
    assert response["finish_reason"] == "stop"


async def test_model_call_adds_usage_to_the_run(write, tools):
    write(
        "tools/meter.py",
        "async def main(ctx):\n"
        "    result = await ctx.target.manager.next()\n"
        "    ctx.nonlocals['usage'] = dict(ctx.run.usage)\n"
        "    return result\n",
    )
    box: dict = {}
    script = [{"answer": "a", "usage": {"prompt_tokens": 3, "completion_tokens": 1}}]
    await Manager([tools]).invoke("model-call", request(script), overrides={"meter": {}}, context={"nonlocals": box})
    assert box["usage"] == {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4, "calls": 1}


async def test_model_call_refuses_truncated_answers_and_missing_tool_calls(tools):
    manager = Manager([tools])
    with pytest.raises(ModelError, match="cut off at max-tokens"):
        await manager.invoke(
            "model-call", request([{"answer": "a", "finish": "length", "usage": {"completion_tokens": 4096}}])
        )
    tools_offered = [{"name": "t", "description": "", "parameters": {"type": "object"}}]
    with pytest.raises(ModelError, match="tool-choice is 'required'"):
        await manager.invoke("model-call", request(["a"], tools=tools_offered, **{"tool-choice": "required"}))
    with pytest.raises(ModelError, match="tool-choice is 't' but the model answered without calling a tool"):
        await manager.invoke("model-call", request(["a"], tools=tools_offered, **{"tool-choice": "t"}))
    answered = await manager.invoke(
        "model-call", request([{"calls": [{"name": "t"}]}], tools=tools_offered, **{"tool-choice": "t"})
    )
    assert answered["tool_calls"][0]["name"] == "t"


async def test_model_call_stream_is_an_engine_local(tools):
    # An untrusted caller cannot seed the callback the provider streams to.
    from orchestrator import SecurityError
    from orchestrator.callers import Caller

    args = {**request(["a"]), "$context": {"locals": {"stream": "anything"}}}
    with pytest.raises(SecurityError, match="stream"):
        await Manager([tools]).invoke("model-call", args, caller=Caller("a client", {"model-call"}))


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "missing required properties 'model', 'messages'"),
        ({"model": {"provider": "scripted"}}, "missing required property 'messages'"),
        (["hi"], "list is not an object (a request)"),
    ],
)
async def test_model_call_refuses_a_request_that_is_not_one_at_its_root(tools, args, problem):
    with pytest.raises(ArgsValidationError) as raised:
        await Manager([tools]).invoke("model-call", args)
    assert raised.value.errors == [("", problem)] and raised.value.tool == "model-call"


async def test_model_call_has_no_validate_args_entry_on_the_way_to_each_request(tools):
    # issue 29: its own plain check replaces validate-args, one chain entry less per model request
    started: list = []
    manager = Manager(
        [tools], on_event=lambda event: started.append(event.tool) if event.kind == "invoke.start" else None
    )
    await manager.invoke("model-call", request(["hello"]))
    assert started == ["model-call"]
