"""What a model server sends back is not trusted (issue 24): garbage, oversized answers, greedy turns.

A real HTTP/1.1 server on 127.0.0.1 answers each test's requests with raw
bytes: an HTML error page with status 200, the body ``null``, server-sent
events to an unstreamed request, broken chunks, answers far past
``Limits.model_answer``. Each is a ``ModelError`` naming the URL, the status
and an excerpt of what came back; ``retry`` retries only what another try
can fix, and ``fallback`` answers from the next model. Also: untrusted
callers cannot remove ``agent-execute`` (the locked guard that keeps a
prompt hidden), and ``max-tool-calls`` bounds one turn's parallel calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import yaml
from servers import Reply, serve

from orchestrator import ConfigurationError, Limits, Manager, ModelError, SecurityError
from orchestrator.callers import Caller

pytestmark = pytest.mark.anyio

HTML = b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1> upstream gone</body></html>"
BIG = 50_000_000
LIMIT = 100_000


def raw(body: bytes, content_type: str, status: int = 200) -> Reply:
    """A reply of exactly these bytes."""

    async def send(stream: anyio.abc.ByteStream) -> None:
        head = f"HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: {content_type}\r\n"
        await stream.send((head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body)

    return send


def sse(*events: Any) -> Reply:
    """Server-sent events (``data:`` of each event: a string as it is, anything else as JSON), ending at close."""
    text = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    return raw(text.encode(), "text/event-stream")


class Endless:
    """A reply of ``start`` then ``piece`` repeated up to ``total`` bytes, sent as fast as the client reads.

    ``sent`` counts the body's bytes written so far, so a test sees how much went out before the client hung up.
    """

    def __init__(self, start: bytes, piece: bytes, content_type: str, total: int = BIG) -> None:
        self.start, self.piece, self.content_type, self.total = start, piece, content_type, total
        self.sent = 0

    async def __call__(self, stream: anyio.abc.ByteStream) -> None:
        head = f"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: {self.content_type}\r\n\r\n"
        await stream.send(head.encode() + self.start)
        self.sent = len(self.start)
        while self.sent < self.total:
            await stream.send(self.piece)
            self.sent += len(self.piece)


def completion(text: str) -> Reply:
    message = {"role": "assistant", "content": text}
    body = {"model": "m-1", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return raw(json.dumps(body).encode(), "application/json")


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "m-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai(url: str, stream: bool = True) -> dict[str, Any]:
    model = {"provider": "openai", "name": "m", "base-url": f"{url}/v1", "api-key-env": "TC_KEY"}
    return model if stream else {**model, "options": {"stream": False}}


def anthropic(url: str, stream: bool = True) -> dict[str, Any]:
    model = {"provider": "anthropic", "name": "claude-x", "base-url": url, "api-key-env": "TC_KEY"}
    return model if stream else {**model, "options": {"stream": False}}


def agent(write: Callable[[str, str], Path], name: str, model: dict[str, Any], body: str = "Hi", **meta: Any) -> None:
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": {"model": model, **meta}}) + "---\n" + body + "\n")


@pytest.fixture
def manager(tools: Path, monkeypatch: pytest.MonkeyPatch) -> Manager:
    monkeypatch.setenv("TC_KEY", "sk-test")
    return Manager([tools], limits=Limits(model_answer=LIMIT))


async def fails(manager: Manager, ref: str, **options: Any) -> ModelError:
    with anyio.fail_after(30):
        with pytest.raises(ModelError) as info:
            await manager.invoke(ref, **options)
    return info.value


def named(error: ModelError, url: str, *excerpts: str) -> None:
    """The error names the URL the answer came from, its status and an excerpt of it."""
    text = str(error)
    assert url in text and "HTTP 200" in text and error.status == 200, text
    for excerpt in excerpts:
        assert excerpt in text, text
    assert len(text) < 1_000, text  # an excerpt, not the whole answer


# -- garbage with status 200 ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_an_html_page_with_status_200_is_a_retryable_model_error(write, manager, stream):
    async with serve(raw(HTML, "text/html")) as s:
        agent(write, "gated", openai(s.url, stream))
        error = await fails(manager, "gated")
    named(error, f"{s.url}/v1/chat/completions", "502 Bad Gateway")
    assert error.retryable is True  # a gateway's page: the next try may get through


@pytest.mark.parametrize("stream", [False, True])
async def test_retry_retries_a_gateway_page_and_gets_the_answer(write, manager, stream):
    good = completion("fine") if not stream else sse(chunk({"content": "fine"}, "stop"), "[DONE]")
    async with serve(raw(HTML, "text/html"), good) as s:
        agent(write, "gated", openai(s.url, stream), **{"model-pipeline": {"retry": {"backoff": 0}}})
        box: dict[str, Any] = {}
        assert await manager.invoke("gated", context={"nonlocals": box}) == "fine"
    assert len(s.requests) == 2 and "Bad Gateway" in box["retries"][0]


@pytest.mark.parametrize("body", [b"null", b"[1, 2]", b'{"id": "x"}', b'{"choices": [{"message": "hi"}]}'])
async def test_json_of_the_wrong_shape_is_a_model_error_retry_leaves_alone(write, manager, body):
    async with serve(raw(body, "application/json")) as s:
        agent(write, "odd", openai(s.url, stream=False), **{"model-pipeline": {"retry": {"backoff": 0}}})
        error = await fails(manager, "odd")
    named(error, f"{s.url}/v1/chat/completions", body.decode()[:20])
    assert error.retryable is False and len(s.requests) == 1  # another try gets the same shape


async def test_an_error_object_with_status_200_is_a_retryable_model_error(write, manager):
    body = json.dumps({"error": {"message": "upstream overloaded", "code": 503}}).encode()
    async with serve(raw(body, "application/json")) as s:
        agent(write, "busy", openai(s.url, stream=False))
        error = await fails(manager, "busy")
    named(error, s.url, "upstream overloaded")
    assert error.retryable is True


async def test_server_sent_events_to_an_unstreamed_request_is_a_model_error(write, manager):
    async with serve(sse(chunk({"content": "hi"}, "stop"), "[DONE]")) as s:
        agent(write, "chatty", openai(s.url, stream=False), **{"model-pipeline": {"retry": {"backoff": 0}}})
        error = await fails(manager, "chatty")
    named(error, s.url, "data: ", "stream")
    assert error.retryable is False and len(s.requests) == 1


@pytest.mark.parametrize(
    ("events", "excerpt", "retryable"),
    [
        ([chunk({"content": "par"}), '{"choices": [{"delta": {"cont'], '{"choices"', True),  # cut mid-chunk
        ([chunk({"content": "par"}), {"choices": [{"index": 0, "delta": "tial"}]}], "tial", False),
        ([{"choices": 5}], "5", False),
        ([chunk({"tool_calls": "weather"})], "weather", False),
        ([chunk({"tool_calls": [{"index": 0, "function": {"name": 7}}]})], "7", False),
        (["null"], "null", False),
    ],
)
async def test_a_broken_stream_chunk_is_a_model_error(write, manager, events, excerpt, retryable):
    async with serve(sse(*events, "[DONE]")) as s:
        agent(write, "broken", openai(s.url))
        error = await fails(manager, "broken")
    named(error, f"{s.url}/v1/chat/completions", excerpt)
    assert error.retryable is retryable


async def test_a_stream_without_any_event_names_what_came_instead(write, manager):
    body = json.dumps({"model": "m", "choices": []}).encode()
    async with serve(raw(body, "application/json")) as s:
        agent(write, "flat", openai(s.url))
        error = await fails(manager, "flat")
    named(error, s.url, '{"model"', "stream: false")
    assert error.retryable is False  # the server does not stream: it will not next time either


@pytest.mark.parametrize(
    ("stream", "reply", "excerpt", "retryable"),
    [
        (False, raw(HTML, "text/html"), "Bad Gateway", True),
        (False, raw(b"null", "application/json"), "null", False),
        (False, raw(b'{"type": "message", "content": "hi"}', "application/json"), "content", False),
        (False, raw(b'{"type": "message", "content": [{"type": "text", "text": 5}]}', "application/json"), "5", False),
        (True, raw(HTML, "text/html"), "Bad Gateway", True),
        (True, sse({"type": "message_start", "message": "m"}), "message_start", False),
        (True, sse({"type": "message_start", "message": {}}, '{"type": "content_block_delta", "ind'), "ind", True),
    ],
)
async def test_anthropic_garbage_is_a_model_error(write, manager, stream, reply, excerpt, retryable):
    async with serve(reply) as s:
        agent(write, "claude", anthropic(s.url, stream))
        error = await fails(manager, "claude")
    named(error, f"{s.url}/v1/messages", excerpt)
    assert error.retryable is retryable


async def test_fallback_answers_from_the_next_model_after_garbage(write, manager):
    scripted = {"provider": "scripted", "script": ["from the backup"]}
    async with serve(raw(HTML, "text/html"), raw(b"null", "application/json")) as s:
        for name, stream in (("html", False), ("null", False)):
            agent(write, name, openai(s.url, stream), **{"model-pipeline": {"fallback": {"models": [scripted]}}})
            box: dict[str, Any] = {}
            assert await manager.invoke(name, context={"nonlocals": box}) == "from the backup"
            assert s.url in box["fallbacks"][0]
    assert len(s.requests) == 2


# -- the size of an answer ------------------------------------------------------------


async def test_a_streamed_answer_past_the_limit_is_cut_off_while_it_is_read(write, manager):
    piece = ("data: " + json.dumps(chunk({"content": "x" * 2_000})) + "\n\n").encode()
    flood = Endless(b"", piece, "text/event-stream")
    async with serve(flood) as s:
        agent(write, "flood", openai(s.url), **{"model-pipeline": {"retry": {"backoff": 0}}})
        error = await fails(manager, "flood")
    assert "Limits.model_answer" in str(error) and f"{LIMIT:,}" in str(error)
    named(error, f"{s.url}/v1/chat/completions")
    assert error.retryable is False and len(s.requests) == 1
    assert flood.sent < BIG // 5  # the client hung up early: the answer was never all read


async def test_a_programs_own_model_call_reads_at_most_its_managers_limit(manager):
    # model-call sets the limit around its request (issue 29): an agent's requests and a program's alike
    from orchestrator.agent.model import grant_model

    piece = ("data: " + json.dumps(chunk({"content": "x" * 2_000})) + "\n\n").encode()
    flood = Endless(b"", piece, "text/event-stream")
    async with serve(flood) as s:
        request = {"model": grant_model(openai(s.url)), "messages": [{"role": "user", "content": "Hi"}]}
        with anyio.fail_after(30), pytest.raises(ModelError) as info:
            await manager.invoke("model-call", request)
    assert "Limits.model_answer" in str(info.value) and f"{LIMIT:,}" in str(info.value)
    assert flood.sent < BIG // 5


async def test_an_unstreamed_answer_past_the_limit_is_cut_off_while_it_is_read(write, manager):
    start = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'
    flood = Endless(start, b"y" * 65_536, "application/json")
    async with serve(flood) as s:
        agent(write, "flood", openai(s.url, stream=False))
        error = await fails(manager, "flood")
    assert "Limits.model_answer" in str(error)
    named(error, s.url, '{"choices"')
    assert flood.sent < BIG // 5


async def test_one_endless_line_is_bounded_too(write, manager):
    flood = Endless(b"data: ", b"z" * 65_536, "text/event-stream")
    async with serve(flood) as s:
        agent(write, "flood", anthropic(s.url))
        error = await fails(manager, "flood")
    assert "Limits.model_answer" in str(error) and flood.sent < BIG // 5


async def test_an_answer_within_the_limit_is_read_whole(write, tools, monkeypatch):
    monkeypatch.setenv("TC_KEY", "sk-test")
    text = "w" * 50_000
    async with serve(sse(chunk({"content": text}, "stop"), "[DONE]")) as s:
        agent(write, "long", openai(s.url))
        assert await Manager([tools]).invoke("long") == text  # the default limit is far above this
    assert Limits().model_answer == 32_000_000


# -- agent-execute is a locked guard ----------------------------------------------------


async def test_an_untrusted_caller_cannot_remove_agent_execute_to_read_a_hidden_prompt(write, tools):
    agent(write, "secret", {"provider": "scripted", "script": ["public answer"]}, body="The launch code is 1234.")
    manager = Manager([tools])
    caller = Caller("MCP callers", frozenset({"secret"}))
    for options in (
        {"$middleware": {"agent-execute": {"remove": True}}},
        {"$middleware": [{"name": "agent-execute", "remove": True}]},
    ):
        with pytest.raises(SecurityError, match="agent-execute"):
            await manager.invoke("secret", options, caller=caller)
    assert await manager.invoke("secret", caller=caller) == "public answer"


# -- parallel tool calls per turn ----------------------------------------------------------


def counter(write: Callable[[str, str], Path]) -> None:
    write(
        "tools/count.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'n': {'type': 'integer'}}}}}\n"
        "def main(ctx):\n    return ctx.args['n']\n",
    )


async def test_a_turn_runs_at_most_max_tool_calls_and_the_model_hears_about_the_rest(write, tools):
    counter(write)
    calls = [{"name": "count", "arguments": {"n": i}} for i in range(50)]
    script = [{"calls": calls}, {"answer": "done", "expect": {"contains": "max-tool-calls is 5"}}]
    agent(write, "greedy", {"provider": "scripted", "script": script}, tools=["count"], **{"max-tool-calls": 5})
    manager = Manager([tools])
    ran: list[Any] = []
    manager.events.listeners.append(lambda e: ran.append(e.data["arguments"]) if e.kind == "tool.start" else None)
    sent: list[Any] = []
    manager.events.listeners.append(lambda e: sent.append(e.data) if e.kind == "model.request" else None)
    assert await manager.invoke("greedy") == "done"
    assert sorted(args["n"] for args in ran) == [0, 1, 2, 3, 4]  # the model's first five (they run at once)
    assert len(sent[1]["messages"]) == 2 + 50  # every call has its result: 5 values, 45 errors


async def test_max_tool_calls_has_a_default_and_must_be_a_positive_integer(write, tools):
    counter(write)
    calls = [{"name": "count", "arguments": {"n": i}} for i in range(100)]
    script = [{"calls": calls}, "done"]
    agent(write, "greedy", {"provider": "scripted", "script": script}, tools=["count"])
    manager = Manager([tools])
    ran: list[Any] = []
    manager.events.listeners.append(lambda e: ran.append(e) if e.kind == "tool.start" else None)
    assert await manager.invoke("greedy") == "done"
    assert len(ran) == 64
    for bad in (0, -1, "5", True):
        agent(write, "odd", {"provider": "scripted", "script": ["x"]}, **{"max-tool-calls": bad})
        manager.refresh()
        with pytest.raises(ConfigurationError, match="max-tool-calls"):
            await manager.invoke("odd")
