"""Conversations (issue 14): sessions an agent continues, prior messages, compaction, the batch hook."""

from __future__ import annotations

import anyio
import pytest
import yaml

from orchestrator import ArgsValidationError, ConfigurationError, InvocationError, Manager, SecurityError
from orchestrator.callers import Caller
from orchestrator.sessions import MemoryStore

pytestmark = pytest.mark.anyio

LOOKUP = """
frontmatter = {"description": "Looks a word up.", "metadata": {"params": {
    "type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}
async def main(ctx):
    return "meaning of " + ctx.args["word"]
"""


def agent(write, name: str, script: list, body: str = "{{ args.message }}", **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    front = yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}, sort_keys=False)
    write(f"tools/{name}.md", f"---\n{front}---\n{body}\n")


def said(message: str, session: str) -> dict:
    return {"message": message, "$context": {"session": session}}


async def test_a_second_call_on_a_session_sees_the_first_exchange_over_sqlite(write, tools, tmp_path):
    script = [
        "Hello Ada.",
        {"answer": "You are Ada.", "expect": {"contains": ["My name is Ada", "Hello Ada."], "last-role": "user"}},
    ]
    agent(write, "chat", script, system="Be brief.")
    db = tmp_path / "state" / "sessions.db"
    assert await Manager([tools], sessions=db).invoke("chat", said("My name is Ada", "s1")) == "Hello Ada."
    manager = Manager([tools], sessions=db)  # another manager (another process would do the same) on the file
    requests = []
    manager.events.listeners.append(lambda e: requests.append(e.data) if e.kind == "model.request" else None)
    assert await manager.invoke("chat", said("Who am I?", "s1")) == "You are Ada."
    assert len(requests[0]["messages"]) == 4  # system, the first exchange, the new question
    stored = await manager.sessions.messages("s1")
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]  # the system message is not
    info = await manager.sessions.info("s1")
    assert info is not None and info.agent == "chat" and info.messages == 4


async def test_tool_turns_are_saved_and_sessions_stay_apart(write, tools):
    write("tools/lookup.py", LOOKUP)
    agent(write, "reader", [{"calls": [{"name": "lookup", "arguments": {"word": "cat"}}]}, "A cat."], tools=["lookup"])
    manager = Manager([tools], sessions=MemoryStore())
    await manager.invoke("reader", said("what is a cat", "a"))
    stored = await manager.sessions.messages("a")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "meaning of cat" and stored[1]["tool_calls"][0]["name"] == "lookup"
    assert await manager.sessions.messages("b") == []


async def test_a_crash_mid_run_keeps_the_turns_already_done(write, tools):
    write("tools/lookup.py", LOOKUP)
    script = [{"calls": [{"name": "lookup", "arguments": {"word": "cat"}}]}, {"fail": 9, "status": 400}]
    agent(write, "reader", script, tools=["lookup"])
    manager = Manager([tools], sessions=MemoryStore())
    with pytest.raises(InvocationError):
        await manager.invoke("reader", said("what is a cat", "a"))
    assert [m["role"] for m in await manager.sessions.messages("a")] == ["user", "assistant", "tool"]


async def test_two_sessions_run_concurrently(write, tools):
    agent(write, "chat", ["first", "second"])
    manager = Manager([tools], sessions=MemoryStore())
    answers: dict[str, str] = {}

    async def talk(session: str) -> None:
        answers[session] = await manager.invoke("chat", said(f"hi from {session}", session))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for session in ("a", "b"):
                group.start_soon(talk, session)
    assert answers == {"a": "first", "b": "first"}  # each session is its own conversation
    for session in ("a", "b"):
        assert [m["content"] for m in await manager.sessions.messages(session)] == [f"hi from {session}", "first"]


async def test_two_runs_on_one_session_are_serialised_and_lose_no_message(write, tools, tmp_path):
    write("tools/slow.py", "import anyio\nasync def main(ctx):\n    await anyio.sleep(0.2)\n    return 'slept'\n")
    script = [{"calls": [{"name": "slow"}]}, "first", {"calls": [{"name": "slow"}]}, "second"]
    agent(write, "chat", script, tools=["slow"])
    manager = Manager([tools], sessions=tmp_path / "s.db")
    answers = []

    async def talk(text: str) -> None:
        answers.append(await manager.invoke("chat", said(text, "shared")))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(talk, "one")
            group.start_soon(talk, "two")
    assert sorted(answers) == ["first", "second"]  # the second run continued the first's conversation
    stored = await manager.sessions.messages("shared")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"] * 2
    assert {stored[0]["content"], stored[4]["content"]} == {"one", "two"}


async def test_a_session_held_too_long_is_a_clear_error(write, tools, monkeypatch):
    from orchestrator import sessionlimits

    agent(write, "chat", ["hi"])
    store = MemoryStore()
    assert await store.acquire("busy", "someone else")
    monkeypatch.setattr(sessionlimits, "LEASE_WAIT", 0.1)
    with pytest.raises(InvocationError, match="session 'busy' is in use by another run"):
        await Manager([tools], sessions=store).invoke("chat", said("hi", "busy"))


async def test_messages_metadata_goes_before_the_prompt_rendered_with_args(write, tools):
    expect = {"contains": ["You answer in French.", "Say hi to Ada", "Bonjour Ada!", "Now Bob"]}
    agent(
        write,
        "french",
        ["(turn 1 is the assistant message in the metadata)", {"answer": "Bonjour Bob!", "expect": expect}],
        body="Now {{ args.name }}",
        system="You answer in French.",
        messages=[
            {"role": "user", "content": "Say hi to {{ args.first }}"},
            {"role": "assistant", "content": "Bonjour {{ args.first }}!"},
        ],
    )
    requests = []
    manager = Manager([tools], sessions=MemoryStore())
    manager.events.listeners.append(lambda e: requests.append(e) if e.kind == "model.request" else None)
    args = {"first": "Ada", "name": "Bob", "$context": {"session": "f"}}
    assert await manager.invoke("french", args) == "Bonjour Bob!"
    assert len(requests[0].data["messages"]) == 4
    assert [m["content"] for m in await manager.sessions.messages("f")] == ["Now Bob", "Bonjour Bob!"]


@pytest.mark.parametrize(
    "messages",
    [
        "not a list",
        [{"role": "tool", "content": "x"}],
        [{"role": "user", "content": 3}],
        [{"role": "user", "content": "x", "extra": 1}],
        ["text"],
    ],
)
async def test_bad_messages_metadata_is_a_configuration_error(write, tools, messages):
    agent(write, "bad", ["never"], messages=messages)
    with pytest.raises(ConfigurationError, match=r"messages.*\(tool 'bad', key 'messages'\)"):
        await Manager([tools]).invoke("bad", {"message": "hi"})


async def test_compact_trims_whole_turns_and_keeps_the_system_message(write, tools):
    write("tools/lookup.py", LOOKUP)
    call = {"calls": [{"name": "lookup", "arguments": {"word": "w"}}]}
    # Every request is compacted to the last user message and what follows it, so the script sees at most
    # one assistant message per request: turn 1 calls, turn 2 answers.
    script = [call, {"answer": "done", "expect": {"contains": ["sys", "meaning of w"], "last-role": "tool"}}]
    agent(write, "chat", script, tools=["lookup"], system="sys", **{"model-pipeline": {"compact": {"max-messages": 3}}})
    store = MemoryStore()
    await store.replace("c", [{"role": "user", "content": f"old {i}"} for i in range(3)])  # no assistant: turn 1
    seen = []
    manager = Manager([tools], sessions=store)
    manager.events.listeners.append(
        lambda e: seen.append(len(e.data["messages"])) if e.kind == "model.request" else None
    )
    assert await manager.invoke("chat", said("now", "c")) == "done"
    # before compaction (the event comes first): 1 + 4 sent; then the compacted 3 (old 1, old 2, now) + call +
    # result: 6, not 7, so the second iteration continued from the rewritten list
    assert seen == [5, 6]
    stored = await store.messages("c")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0]["content"] == "now" and stored[2]["tool_call_id"] == stored[1]["tool_calls"][0]["id"]


async def test_compact_summarises_dropped_turns_with_a_model(write, tools):
    summarizer = {
        "provider": "scripted",
        "script": [{"answer": "They said old things.", "expect": {"contains": "old 0"}}],
    }
    agent(
        write,
        "chat",
        [{"answer": "ok", "expect": {"contains": "Summary of the earlier conversation: They said"}}],
        **{"model-pipeline": {"compact": {"max-tokens": 12, "summarize": summarizer}}},
    )
    store = MemoryStore()
    await store.replace("c", [{"role": "user", "content": f"old {i} " + "words " * 20} for i in range(3)])
    manager = Manager([tools], sessions=store)
    assert await manager.invoke("chat", said("now", "c")) == "ok"
    stored = await store.messages("c")
    assert stored[0]["content"].startswith("Summary of the earlier conversation") and stored[1]["content"] == "now"


async def test_a_rewrite_that_splits_a_call_from_its_result_is_refused(write, tools):
    write(
        "tools/splitter.py",
        "frontmatter = {'role': 'middleware'}\nasync def main(ctx):\n"
        "    conv = ctx.target.locals['conversation']\n"
        "    conv.rewrite([{'role': 'tool', 'tool_call_id': 'x', 'content': 'orphan'}])\n"
        "    return await ctx.target.manager.next()\n",
    )
    agent(write, "chat", ["never"], **{"model-pipeline": {"splitter": {}}})
    with pytest.raises(ConfigurationError, match="tool result without the assistant message"):
        await Manager([tools]).invoke("chat", {"message": "hi"})


BATCH = """
frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
async def main(ctx):
    calls = await ctx.target.manager.next()
    edited = []
    for call in calls:
        if call["arguments"].get("word") == "secret":
            edited.append({"id": call["id"], "denied": "secret words are not looked up"})
        elif call["arguments"].get("word") == "colour":
            edited.append({**call, "arguments": {"word": "color"}})
        else:
            edited.append(call)
    return edited
"""


async def test_batch_pipeline_edits_and_denies_a_turns_calls(write, tools):
    write("tools/lookup.py", LOOKUP)
    write("tools/censor.py", BATCH)
    calls = [{"name": "lookup", "arguments": {"word": w}} for w in ("colour", "secret", "cat")]
    expect = {"contains": ["meaning of color", "denied: secret words are not looked up", "meaning of cat"]}
    agent(
        write,
        "reader",
        [{"calls": calls}, {"answer": "done", "expect": expect}],
        tools=["lookup"],
        **{"batch-pipeline": {"censor": {}}},
    )
    ends = []
    manager = Manager([tools])
    manager.events.listeners.append(lambda e: ends.append(e.data["error"]) if e.kind == "tool.end" else None)
    assert await manager.invoke("reader", {"message": "look up"}) == "done"
    # the calls run concurrently: their ends come in any order
    assert sorted(ends, key=str) == [None, None, "error: PermissionError: denied: secret words are not looked up"]


async def test_tool_batch_alone_returns_its_calls_and_a_bad_batch_answer_is_an_error(write, tools):
    manager = Manager([tools])
    calls = [{"id": "c1", "tool": "lookup", "arguments": {"word": "x"}}]
    assert await manager.invoke("tool-batch", {"calls": calls}) == calls
    write("tools/lookup.py", LOOKUP)
    write("tools/broken.py", "frontmatter = {'role': 'middleware'}\nasync def main(ctx):\n    return 'nope'\n")
    agent(
        write,
        "reader",
        [{"calls": [{"name": "lookup", "arguments": {"word": "a"}}]}],
        tools=["lookup"],
        **{"batch-pipeline": {"broken": {}}},
    )
    with pytest.raises(InvocationError, match="batch-pipeline must return the list of calls"):
        await Manager([tools]).invoke("reader", {"message": "x"})


async def test_untrusted_callers_may_not_name_a_session_unless_allowed(write, tools):
    agent(write, "chat", ["hi", "again"])
    manager = Manager([tools], sessions=MemoryStore())
    mcp = Caller("MCP callers", {"chat"})
    with pytest.raises(SecurityError, match=r"\$context.session is not accepted from MCP callers"):
        await manager.invoke("chat", said("hi", "someone-elses"), caller=mcp)
    for engine_local in ("session", "resume", "conversation"):
        with pytest.raises(SecurityError, match=f"locals.{engine_local} is read by the engine"):
            await manager.invoke("chat", {"message": "x", "$context": {"locals": {engine_local: "x"}}}, caller=mcp)
    allowed = Caller("MCP callers", {"chat"}, sessions=True)
    assert await manager.invoke("chat", said("hi", "mine"), caller=allowed) == "hi"


async def test_a_model_cannot_continue_a_session_through_a_tool_call(write, tools):
    agent(write, "inner", ["inner answer"])
    call = {"name": "inner", "arguments": {"message": "x", "$context": {"session": "victim"}}}
    agent(
        write,
        "outer",
        [{"calls": [call]}, {"answer": "done", "expect": {"contains": "SecurityError"}}],
        tools=["inner"],
    )
    manager = Manager([tools], sessions=MemoryStore())
    assert await manager.invoke("outer", {"message": "go"}) == "done"
    assert await manager.sessions.info("victim") is None


async def test_compact_on_a_bare_model_call_trims_that_request_only(tools):
    request = {
        "model": {"provider": "scripted", "script": ["after compaction", "without compaction"]},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    }
    manager = Manager([tools])
    assert (await manager.invoke("model-call", request))["content"] == "without compaction"
    response = await manager.invoke("model-call", request, overrides={"compact": {"max-messages": 1}})
    assert response["content"] == "after compaction"  # the assistant message was trimmed, the system kept


async def test_compact_needs_a_budget(tools):
    request = {"model": {"provider": "scripted", "script": ["x"]}, "messages": [{"role": "user", "content": "a"}]}
    with pytest.raises(ArgsValidationError, match="tool 'compact'"):
        await Manager([tools]).invoke("model-call", request, overrides={"compact": {}})
