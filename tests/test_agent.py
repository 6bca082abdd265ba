"""The agent loop (R-AGENT-1..3) on the offline scripted provider, end to end from .md files."""

from __future__ import annotations

import textwrap

import anyio
import pytest
import yaml
from freshness_helpers import eager

from orchestrator import ConfigurationError, InvocationError, Manager, ModelError, ReturnsValidationError

pytestmark = pytest.mark.anyio

WEATHER = """
import anyio
frontmatter = {"description": "Weather for a city.", "metadata": {"params": {
    "type": "object", "properties": {"city": {"type": "string"}, "delay": {"type": "number"}}, "required": ["city"]}}}
async def main(ctx):
    await anyio.sleep(ctx.args.get("delay", 0))
    if ctx.args["city"] == "Atlantis":
        raise ValueError("no such city")
    return {"city": ctx.args["city"], "temp": len(ctx.args["city"])}
"""


def agent(write, name: str, script: list, body: str = "Weather in {{ args.city }}?", **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    text = (
        "---\n"
        + yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}, sort_keys=False)
        + "---\n"
        + body
        + "\n"
    )
    write(f"tools/{name}.md", text)


@pytest.fixture
def manager(write, tools):
    write("tools/weather.py", textwrap.dedent(WEATHER))
    write("tools/secret.py", "def main(ctx):\n    return 'classified'\n")
    return eager(Manager([tools]))  # the tests write agents between invocations


async def test_r_agent_1_tool_calls_then_answer(write, manager):
    agent(
        write,
        "forecast",
        [
            {
                "calls": [{"name": "weather", "arguments": {"city": "Paris"}}],
                "expect": {"contains": "Weather in Paris?", "tools": ["weather"]},
            },
            {
                "answer": "It is 5 in Paris.",
                "expect": {"last-role": "tool", "contains": '{"city": "Paris", "temp": 5}'},
            },
        ],
        tools=["weather"],
    )
    assert await manager.invoke("forecast", {"city": "Paris"}) == "It is 5 in Paris."


async def test_r_agent_1_without_model_a_markdown_tool_is_a_template(write, manager):
    write("tools/page.md", "---\nmetadata: {tools: [weather]}\n---\nWeather in {{ args.city }}?\n")
    assert await manager.invoke("page", {"city": "Rome"}) == "Weather in Rome?"


async def test_r_agent_1_model_from_overrides(write, manager):
    write("tools/page.md", "---\n---\nHi\n")
    assert (
        await manager.invoke("page", overrides={"model": {"provider": "scripted", "script": ["from the model"]}})
        == "from the model"
    )


MEET = """
import anyio
state = {}
async def main(ctx):
    # Both calls must be in flight at once: each waits until the other arrived.
    meeting = state.setdefault(ctx.run.id, {"arrived": 0, "event": anyio.Event()})
    meeting["arrived"] += 1
    if meeting["arrived"] == 2:
        meeting["event"].set()
    with anyio.fail_after(5):
        await meeting["event"].wait()
    await anyio.sleep(ctx.args["delay"])
    return ctx.args["city"]
"""


async def test_r_agent_1_parallel_calls_return_in_call_order(write, manager):
    write("tools/meet.py", textwrap.dedent(MEET))
    calls = [
        {"name": "meet", "arguments": {"city": "Oslo", "delay": 0.05}},
        {"name": "meet", "arguments": {"city": "Rome", "delay": 0}},
    ]
    # A model-call middleware records the transcript each request carries.
    write(
        "tools/transcript.py",
        "async def main(ctx):\n"
        "    tool_messages = [(m['tool_call_id'], m['content']) for m in ctx.target.args['messages'] if m['role'] == 'tool']\n"
        "    ctx.nonlocals.setdefault('transcripts', []).append(tool_messages)\n"
        "    return await ctx.target.manager.next()\n",
    )
    agent(write, "both", [{"calls": calls}, "done"], tools=["meet"], **{"model-pipeline": {"transcript": {}}})
    box: dict = {}
    with anyio.fail_after(10):
        assert await manager.invoke("both", {"city": "x"}, context={"nonlocals": box}) == "done"
    # Rome finished first, yet results go back in call order.
    assert box["transcripts"][-1] == [("call_1_1", "Oslo"), ("call_1_2", "Rome")]


async def test_r_agent_1_tool_errors_go_back_to_the_model(write, manager):
    agent(
        write,
        "brave",
        [
            {"calls": [{"name": "weather", "arguments": {"city": "Atlantis"}}]},
            {"answer": "sorry", "expect": {"contains": "error: ValueError: no such city"}},
        ],
        tools=["weather"],
    )
    assert await manager.invoke("brave", {"city": "x"}) == "sorry"


async def test_r_agent_1_invalid_args_are_an_error_result(write, manager):
    agent(
        write,
        "sloppy",
        [
            {"calls": [{"name": "weather", "arguments": {"town": "Paris"}}]},
            {"answer": "ok", "expect": {"contains": "ArgsValidationError"}},
        ],
        tools=["weather"],
    )
    assert await manager.invoke("sloppy", {"city": "x"}) == "ok"


async def test_r_agent_1_max_consecutive_errors(write, manager):
    bad = {"calls": [{"name": "weather", "arguments": {"city": "Atlantis"}}]}
    agent(write, "stubborn", [bad, bad, bad, "never"], tools=["weather"], **{"max-consecutive-errors": 2})
    with pytest.raises(InvocationError, match="failed 2 times in a row"):
        await manager.invoke("stubborn", {"city": "x"})


async def test_r_agent_1_max_iterations(write, manager):
    call = {"calls": [{"name": "weather", "arguments": {"city": "Rome"}}]}
    agent(write, "chatty", [call] * 5, tools=["weather"], **{"max-iterations": 3})
    with pytest.raises(InvocationError, match=r"max-iterations \(3\)") as info:
        await manager.invoke("chatty", {"city": "x"})
    assert info.value.tool == "chatty"


async def test_r_agent_1_allowed_tools_is_a_hard_limit(write, manager, caplog):
    agent(
        write,
        "limited",
        [
            {"calls": [{"name": "secret", "arguments": {}}], "expect": {"tools": ["weather"]}},
            {"answer": "refused", "expect": {"contains": "not available to this agent"}},
        ],
        tools=["weather", "secret"],
        **{"allowed-tools": ["weather"]},
    )
    ran = []
    manager.events.listeners.append(lambda e: ran.append(e.tool) if e.kind == "invoke.start" else None)
    assert await manager.invoke("limited", {"city": "x"}) == "refused"
    assert "secret" not in ran
    assert any("not among its allowed tools" in r.getMessage() for r in caplog.records)


async def test_r_agent_1_tool_choice_required_returns_the_results(write, manager):
    agent(
        write,
        "must",
        [{"calls": [{"name": "weather", "arguments": {"city": "Rome"}}]}],
        tools=["weather"],
        **{"tool-choice": "required"},
    )
    assert await manager.invoke("must", {"city": "x"}) == {"city": "Rome", "temp": 4}


async def test_r_agent_1_tool_choice_none_offers_no_tools(write, manager):
    agent(write, "mute", [{"answer": "plain", "expect": {"tools": []}}], tools=["weather"], **{"tool-choice": "none"})
    assert await manager.invoke("mute", {"city": "x"}) == "plain"


async def test_r_agent_1_tool_choice_must_be_known(write, manager):
    agent(write, "odd", ["x"], tools=["weather"], **{"tool-choice": "sometimes"})
    with pytest.raises(ConfigurationError, match="tool-choice"):
        await manager.invoke("odd", {"city": "x"})


async def test_r_agent_1_json_returns_are_parsed_and_validated(write, manager):
    returns = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}
    agent(write, "structured", [{"answer": '{"temp": 21}', "expect": {"response-format": True}}], returns=returns)
    assert await manager.invoke("structured", {"city": "x"}) == {"temp": 21}
    # a wrong answer goes back once with what is wrong (returns-retries, default 1), then is raised (issue 29)
    retry = {"contains": "/temp", "last-role": "user"}
    agent(write, "wrong", ['{"temp": "warm"}', {"answer": '{"temp": "hot"}', "expect": retry}], returns=returns)
    with pytest.raises(ReturnsValidationError, match="/temp"):
        await manager.invoke("wrong", {"city": "x"})
    agent(write, "prose", ["it is warm", {"answer": "still warm", "expect": {"contains": "not JSON"}}], returns=returns)
    with pytest.raises(ReturnsValidationError, match="not JSON"):
        await manager.invoke("prose", {"city": "x"})


async def test_r_agent_1_overrides_from_a_model_are_refused(write, manager):
    agent(
        write,
        "sneaky",
        [
            {"calls": [{"name": "weather", "arguments": {"city": "Rome", "$overrides": {"params": {}}}}]},
            {"answer": "no", "expect": {"contains": "$overrides is not accepted"}},
        ],
        tools=["weather"],
    )
    assert await manager.invoke("sneaky", {"city": "x"}) == "no"


async def test_r_agent_1_events_show_the_loop(write, manager):
    agent(write, "traced", [{"calls": [{"name": "weather", "arguments": {"city": "Rome"}}]}, "done"], tools=["weather"])
    seen = []
    manager.events.listeners.append(
        lambda e: (
            seen.append((e.kind, e.iteration, e.data.get("call")))
            if e.tool == "traced" and e.kind != "invoke.start"
            else None
        )
    )
    await manager.invoke("traced", {"city": "x"})
    # Each answer streams before its response: the call (announced, then its arguments
    # {"city": "Rome"} in two 8-character pieces), then the word "done".
    assert seen[1:4] == [("model.delta", 1, "weather")] * 3
    assert seen[8] == ("model.delta", 2, None)
    seen = [s for s in seen if s[0] != "model.delta"]
    assert seen == [
        ("model.request", 1, None),
        ("model.response", 1, None),
        ("tool.start", 1, "weather"),
        ("tool.end", 1, "weather"),
        ("model.request", 2, None),
        ("model.response", 2, None),
        ("invoke.end", None, None),
    ]


async def test_r_agent_2_model_strings_and_bad_specs(write, manager):
    for value, needle in [
        ("gpt-4x", "unknown model provider 'gpt-4x'"),  # gpt-4o is an alias (openai:gpt-4o), gpt-4x is nothing
        ("openai", "needs a name"),
        ({"provider": "scripted", "temperature": 1}, "unknown model field"),
        (42, "model must be"),
    ]:
        write("tools/bad.md", "---\n" + yaml.safe_dump({"metadata": {"model": value}}) + "---\nx\n")
        with pytest.raises(ConfigurationError, match=needle) as info:
            await manager.invoke("bad")
        assert info.value.key == "model"


async def test_r_agent_2_script_file_beside_the_tool(write, manager):
    write("tools/replies.yaml", "- from the file\n")
    write("tools/filed.md", "---\nmetadata:\n  model: {provider: scripted, file: replies.yaml}\n---\nHi\n")
    assert await manager.invoke("filed") == "from the file"


async def test_r_agent_2_scripted_asserts_what_it_was_sent(write, manager):
    agent(write, "picky", [{"answer": "x", "expect": {"contains": "Tokyo"}}])
    with pytest.raises(ModelError, match="expected the messages to contain 'Tokyo'"):
        await manager.invoke("picky", {"city": "Paris"})
    agent(write, "short", [{"calls": [{"name": "weather", "arguments": {"city": "Rome"}}]}], tools=["weather"])
    with pytest.raises(ModelError, match="script has 1 turn"):
        await manager.invoke("short", {"city": "x"})


async def test_r_agent_2_retry_on_the_model_call_pipeline(write, manager):
    agent(
        write,
        "flaky",
        [{"answer": "finally", "fail": 2, "error": "rate limited"}],
        **{"model-pipeline": {"retry": {"attempts": 3, "backoff": 0}}},
    )
    box: dict = {}
    assert await manager.invoke("flaky", {"city": "x"}, context={"nonlocals": box}) == "finally"
    assert box["retries"] == [
        "ModelError: rate limited (turn 1, attempt 1)",
        "ModelError: rate limited (turn 1, attempt 2)",
    ]
    agent(
        write,
        "doomed",
        [{"answer": "never", "fail": 5}],
        **{"model-pipeline": {"retry": {"attempts": 2, "backoff": 0}}},
    )
    with pytest.raises(ModelError, match="attempt 2"):
        await manager.invoke("doomed", {"city": "x"})


async def test_r_agent_2_fallback_to_another_model(write, manager):
    backup = {"provider": "scripted", "name": "backup", "script": ["from the backup"]}
    agent(write, "primary", [{"answer": "never", "fail": 9}], **{"model-pipeline": {"fallback": {"models": [backup]}}})
    assert await manager.invoke("primary", {"city": "x"}) == "from the backup"


async def test_r_agent_2_model_call_pipeline_is_explainable(manager):
    explanation = manager.explain(
        "model-call",
        {"model": {"provider": "scripted"}, "messages": []},
        overrides={"retry": {"attempts": 2}},
    )
    assert explanation.key("retry").verdict == "middleware"
    assert "retry" in [e.name for e in explanation.chain]


async def test_r_agent_3_markdown_middleware_continues_its_target(write, manager):
    write("tools/base.py", "frontmatter = {'metadata': {'reviewer': {}}}\ndef main(ctx):\n    return 'draft text'\n")
    agent(
        write,
        "reviewer",
        [
            {"calls": [{"name": "next", "arguments": {}}], "expect": {"tools": ["next"]}},
            {"answer": "reviewed: draft text", "expect": {"contains": "draft text"}},
        ],
        body="Review the result.",
    )
    assert await manager.invoke("base") == "reviewed: draft text"


async def test_r_agent_3_without_next_the_answer_ends_the_target_chain(write, manager):
    write(
        "tools/base.py",
        "frontmatter = {'metadata': {'gate': {}}}\ndef main(ctx):\n    raise AssertionError('body must not run')\n",
    )
    agent(write, "gate", ["blocked by the gate"], body="Decide.")
    assert await manager.invoke("base") == "blocked by the gate"


async def test_r_agent_1_tool_pipeline_wraps_every_tool_call(write, manager):
    write(
        "tools/audit.py",
        "async def main(ctx):\n"
        "    t = ctx.target\n"
        "    t.nonlocals.setdefault('audit', []).append((t.tool.name, dict(t.args), ctx.args['tag']))\n"
        "    if t.args.get('city') == 'Forbidden':\n"
        "        raise PermissionError('not approved')\n"
        "    return await t.manager.next()\n",
    )
    calls = [
        {"name": "weather", "arguments": {"city": "Rome"}},
        {"name": "weather", "arguments": {"city": "Forbidden"}},
    ]
    agent(
        write,
        "audited",
        [{"calls": calls}, {"answer": "ok", "expect": {"contains": ["Rome", "PermissionError: not approved"]}}],
        tools=["weather"],
        **{"tool-pipeline": {"audit": {"tag": "agent"}}},
    )
    box: dict = {}
    assert await manager.invoke("audited", {"city": "x"}, context={"nonlocals": box}) == "ok"
    assert sorted(box["audit"], key=repr) == [
        ("weather", {"city": "Forbidden"}, "agent"),
        ("weather", {"city": "Rome"}, "agent"),
    ]


async def test_r_agent_1_json_in_code_fences_and_empty_answers(write, manager):
    returns = {"type": "object", "properties": {"temp": {"type": "integer"}}}
    agent(write, "fenced", ['```json\n{"temp": 3}\n```'], returns=returns)
    assert await manager.invoke("fenced", {"city": "x"}) == {"temp": 3}
    agent(write, "silent", [{"content": None}])
    with pytest.raises(ModelError, match="neither text nor tool calls"):
        await manager.invoke("silent", {"city": "x"})


async def test_r_agent_1_models_cannot_reach_outside_their_tools(write, manager):
    calls = [
        {"name": "weather", "arguments": {"city": "Rome", "$middleware": {"delegate": {"args": "secret"}}}},
        {"name": "weather", "arguments": {"city": "Rome", "$context": {"paths": ["/"]}}},
        {"name": "weather", "arguments": {"city": "Rome", "$middleware": {"weather": {"remove": True}}}},
    ]
    agent(
        write,
        "contained",
        [
            {"calls": calls},
            {
                "answer": "ok",
                "expect": {
                    "contains": [
                        "$middleware from a model may add or override only tools it can call, not 'delegate'",
                        "$context.paths is not accepted from a model",
                        '{"city": "Rome", "temp": 4}',
                    ]
                },
            },
        ],
        tools=["weather"],
    )
    assert await manager.invoke("contained", {"city": "x"}) == "ok"


# -- structured answers with tools, truncation, tool-choice ---------------------------

RETURNS = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}


async def test_r_agent_1_returns_with_tools_asks_for_the_format_only_to_answer(write, manager):
    # A server that enforces the JSON format would never let the model call a tool:
    # the format is asked for only on the turn where the model must answer.
    agent(
        write,
        "shaped",
        [
            {
                "calls": [{"name": "weather", "arguments": {"city": "Rome"}}],
                "expect": {"response-format": False, "tools": ["weather"], "tool-choice": "auto"},
            },
            {"answer": "It is 4 degrees in Rome.", "expect": {"response-format": False}},
            {
                "answer": '{"temp": 4}',
                "expect": {"response-format": True, "tool-choice": "none", "contains": "only JSON"},
            },
        ],
        tools=["weather"],
        returns=RETURNS,
    )
    assert await manager.invoke("shaped", {"city": "x"}) == {"temp": 4}


async def test_r_agent_1_returns_with_tools_needs_no_extra_turn_for_a_matching_answer(write, manager):
    agent(
        write,
        "direct",
        [
            {"calls": [{"name": "weather", "arguments": {"city": "Rome"}}], "expect": {"response-format": False}},
            {"answer": '```json\n{"temp": 4}\n```', "expect": {"response-format": False}},
        ],
        tools=["weather"],
        returns=RETURNS,
    )
    assert await manager.invoke("direct", {"city": "x"}) == {"temp": 4}
    # JSON of the wrong shape gets the extra turn too
    agent(
        write,
        "reshaped",
        ['{"temperature": 4}', {"answer": '{"temp": 4}', "expect": {"response-format": True}}],
        tools=["weather"],
        returns=RETURNS,
    )
    assert await manager.invoke("reshaped", {"city": "x"}) == {"temp": 4}


async def test_r_agent_1_a_truncated_answer_is_an_error_not_a_result(write, manager):
    agent(
        write,
        "cut",
        [{"answer": "It was a dark and", "finish": "length", "usage": {"completion_tokens": 4096}}],
        **{"model-pipeline": {"retry": {"backoff": 0}}},
    )
    box: dict = {}
    with pytest.raises(ModelError, match=r"cut off at max-tokens \(4096\); raise max-tokens") as info:
        await manager.invoke("cut", {"city": "x"}, context={"nonlocals": box})
    assert info.value.retryable is False and "retries" not in box  # the same request would be cut again
    write(
        "tools/short.md",
        "---\nmetadata:\n  model: {provider: scripted, max-tokens: 12, script: [{answer: a, finish: length, "
        "usage: {completion_tokens: 12}}]}\n---\nx\n",
    )
    with pytest.raises(ModelError, match=r"max-tokens \(12\)"):
        await manager.invoke("short")


async def test_r_agent_1_tool_choice_required_is_enforced(write, manager):
    agent(write, "lazy", ["I would rather not."], tools=["weather"], **{"tool-choice": "required"})
    with pytest.raises(ModelError, match="tool-choice is 'required' but the model answered without calling a tool"):
        await manager.invoke("lazy", {"city": "x"})


async def test_r_agent_1_a_named_tool_choice_is_enforced(write, manager):
    write("tools/other.py", "def main(ctx):\n    return 'other'\n")
    agent(
        write,
        "named",
        [{"calls": [{"name": "other", "arguments": {}}], "expect": {"tool-choice": "weather"}}],
        tools=["weather", "other"],
        **{"tool-choice": "weather"},
    )
    with pytest.raises(ModelError, match="tool-choice is 'weather' but the model called other"):
        await manager.invoke("named", {"city": "x"})


async def test_r_agent_1_required_with_a_failing_call_goes_back_to_the_model(write, manager):
    agent(
        write,
        "persistent",
        [
            {"calls": [{"name": "weather", "arguments": {"city": "Atlantis"}}]},
            {"calls": [{"name": "weather", "arguments": {"city": "Oslo"}}], "expect": {"contains": "no such city"}},
        ],
        tools=["weather"],
        **{"tool-choice": "required"},
    )
    assert await manager.invoke("persistent", {"city": "x"}) == {"city": "Oslo", "temp": 4}


async def test_r_agent_3_several_next_calls_continue_the_chain_once(write, manager):
    write(
        "tools/base.py",
        "frontmatter = {'metadata': {'checker': {}}}\n"
        "def main(ctx):\n"
        "    ctx.nonlocals['runs'] = ctx.nonlocals.get('runs', 0) + 1\n"
        "    return 'draft'\n",
    )
    agent(
        write,
        "checker",
        [{"calls": [{"name": "next", "arguments": {}}, {"name": "next", "arguments": {}}]}],
        body="Check.",
        **{"tool-choice": "required"},
    )
    box: dict = {}
    assert await manager.invoke("base", context={"nonlocals": box}) == "draft"  # not ["draft", "draft"]
    assert box["runs"] == 1


async def test_r_agent_2_timeout_and_max_tokens_are_checked(write, manager):
    for field, value, needle in [
        ("timeout", 0, "timeout must be a number of seconds above 0"),
        ("timeout", "soon", "timeout must be"),
        ("max-tokens", 1.5, "max-tokens must be a whole number above 0"),
        ("max-tokens", True, "max-tokens must be"),
    ]:
        write(
            "tools/bad.md",
            "---\n" + yaml.safe_dump({"metadata": {"model": {"provider": "scripted", field: value}}}) + "---\nx\n",
        )
        with pytest.raises(ConfigurationError, match=needle):
            await manager.invoke("bad")


async def test_r_agent_2_retry_skips_errors_that_cannot_succeed(write, manager):
    agent(
        write,
        "rejected",
        [{"answer": "x", "fail": 5, "status": 400, "error": "context length exceeded"}],
        **{"model-pipeline": {"retry": {"attempts": 5, "backoff": 0}}},
    )
    box: dict = {}
    with pytest.raises(ModelError, match="HTTP 400: context length exceeded") as info:
        await manager.invoke("rejected", {"city": "x"}, context={"nonlocals": box})
    assert "retries" not in box and info.value.status == 400
    agent(
        write,
        "limited",
        [{"answer": "finally", "fail": 1, "status": 429, "retry-after": 0.01}],
        **{"model-pipeline": {"retry": {"backoff": 0}}},
    )
    box = {}
    assert await manager.invoke("limited", {"city": "x"}, context={"nonlocals": box}) == "finally"
    assert box["retry-waits"] == [0.01]


async def test_a_model_script_file_is_read_within_limits(write, tools):
    write("tools/replies.yaml", "- &a [*a]\n")
    write("tools/looped.md", "---\nmetadata:\n  model: {provider: scripted, file: replies.yaml}\n---\nHi\n")
    with pytest.raises(ConfigurationError, match="cannot read model script: .*itself|recursive|repeats"):
        await Manager([tools]).invoke("looped")
