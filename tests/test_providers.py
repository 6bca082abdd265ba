"""Providers over real HTTP on 127.0.0.1: errors, retries, timeouts, usage, anthropic, plugins (R-AGENT-2).

A tiny HTTP/1.1 server started in each test answers with what fakellm cannot:
500, 429 with Retry-After, 400, a server that never answers or stalls
mid-stream, and the Anthropic Messages API (JSON and SSE).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import yaml
from servers import Reply, free_port, serve

from orchestrator import ConfigurationError, Manager, ModelError
from orchestrator.agent import parse_model
from orchestrator.agent.anthropic import messages as anthropic_messages
from orchestrator.agent.http import retry_after

pytestmark = pytest.mark.anyio


def head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def reply_json(body: Any, status: int = 200, **headers: str) -> Reply:
    async def send(stream: anyio.abc.ByteStream) -> None:
        data = json.dumps(body).encode()
        extra = {k.replace("_", "-"): v for k, v in headers.items()}
        await stream.send(head(status, {"Content-Type": "application/json", "Content-Length": str(len(data)), **extra}))
        await stream.send(data)

    return send


def reply_sse(events: list[tuple[str | None, Any]], stall: bool = False) -> Reply:
    """Server-sent events, the body ending when the connection closes; ``stall`` stops answering midway."""

    async def send(stream: anyio.abc.ByteStream) -> None:
        await stream.send(head(200, {"Content-Type": "text/event-stream"}))
        for index, (event, data) in enumerate(events):
            if stall and index == len(events) // 2:
                await anyio.sleep_forever()
            text = data if isinstance(data, str) else json.dumps(data)
            await stream.send(((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode())

    return send


async def hang(stream: anyio.abc.ByteStream) -> None:
    await anyio.sleep_forever()


def openai_error(status: int, message: str, **headers: str) -> Reply:
    return reply_json({"error": {"message": message, "type": "x"}}, status, **headers)


def openai_stream(text: str = "", calls: list[dict[str, Any]] | None = None, usage: dict | None = None) -> list:
    chunks: list[tuple[str | None, Any]] = []

    def chunk(delta: dict, finish: str | None = None) -> None:
        chunks.append((None, {"model": "m-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))

    chunk({"role": "assistant"})
    for word in text.split(" ") if text else []:
        chunk({"content": word + " "})
    for index, call in enumerate(calls or []):
        chunk(
            {"tool_calls": [{"index": index, "id": f"c{index}", "function": {"name": call["name"], "arguments": ""}}]}
        )
        raw = json.dumps(call["arguments"])
        for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    chunk({}, "tool_calls" if calls else "stop")
    if usage:
        chunks.append((None, {"model": "m-1", "choices": [], "usage": usage}))
    chunks.append((None, "[DONE]"))
    return chunks


def agent(write, name: str, model: dict, body: str = "Hi", **meta: Any) -> None:
    text = "---\n" + yaml.safe_dump({"metadata": {"model": model, **meta}}) + "---\n" + body + "\n"
    write(f"tools/{name}.md", text)


def openai_model(url: str, **extra: Any) -> dict:
    return {"provider": "openai", "name": "m", "base-url": f"{url}/v1", "api-key-env": "TC_KEY", **extra}


@pytest.fixture
def manager(tools, monkeypatch):
    monkeypatch.setenv("TC_KEY", "sk-test")
    monkeypatch.setenv("TC_ANTHROPIC_KEY", "sk-ant-test")
    return Manager([tools])


# -- openai: streaming, usage, what is sent ---------------------------------------


async def test_openai_streams_and_reports_usage(write, manager):
    async with serve(reply_sse(openai_stream("It is warm", usage={"prompt_tokens": 7, "completion_tokens": 3}))) as s:
        agent(write, "talk", openai_model(s.url))
        seen: list = []
        manager.events.listeners.append(lambda e: seen.append(e) if e.kind.startswith("model.") else None)
        assert await manager.invoke("talk") == "It is warm "
    sent = s.requests[0]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["max_tokens"] == 4096  # a server named by base-url gets max_tokens
    assert s.requests[0]["headers"]["authorization"] == "Bearer sk-test"
    assert [e.data["text"] for e in seen if e.kind == "model.delta"] == ["It ", "is ", "warm "]
    response = next(e for e in seen if e.kind == "model.response")
    assert response.data["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert response.data["run_usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "calls": 1}
    assert response.data["finish_reason"] == "stop" and response.data["streamed"] == 3


async def test_openai_unstreamed_when_options_say_so_and_options_are_sent(write, manager):
    answer = {
        "model": "m-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
    }
    async with serve(reply_json(answer)) as s:
        agent(write, "calm", openai_model(s.url, options={"stream": False, "top_k": 5}, **{"max-tokens": 99}))
        assert await manager.invoke("calm") == "plain"
    sent = s.requests[0]["body"]
    assert "stream" not in sent and sent["top_k"] == 5 and sent["max_tokens"] == 99


async def test_openai_stream_option_must_be_a_boolean_and_reserved_options_are_refused(write, manager):
    agent(write, "odd", openai_model("http://127.0.0.1:9", options={"stream": "yes"}))
    with pytest.raises(ConfigurationError, match="options.stream must be true or false"):
        await manager.invoke("odd")
    agent(write, "two", openai_model("http://127.0.0.1:9", options={"n": 2}))
    with pytest.raises(ConfigurationError, match="options.n is set by toolcascade"):
        await manager.invoke("two")


async def test_openai_tool_call_arguments_stream_in_fragments(write, manager):
    write(
        "tools/weather.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'city': {'type': 'string'}}}}}\n"
        "def main(ctx):\n    return {'temp': len(ctx.args['city'])}\n",
    )
    replies = [
        reply_sse(openai_stream(calls=[{"name": "weather", "arguments": {"city": "Paris"}}])),
        reply_sse(openai_stream("Five degrees")),
    ]
    async with serve(*replies) as s:
        agent(write, "forecast", openai_model(s.url), tools=["weather"])
        deltas: list = []
        manager.events.listeners.append(lambda e: deltas.append(e.data) if e.kind == "model.delta" else None)
        assert await manager.invoke("forecast") == "Five degrees "
    calls = [d for d in deltas if "call" in d]
    assert [d["arguments"] for d in calls] == ["", '{"city":', ' "Paris"}']
    assert {(d["call"], d["index"]) for d in calls} == {("weather", 0)}
    second = s.requests[1]["body"]["messages"]
    assert second[1]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    # a tool result carries no name on the wire: strict servers refuse fields the API does not define (issue 29)
    assert second[2] == {"role": "tool", "tool_call_id": "c0", "content": '{"temp": 5}'}
    assert [sorted(m) for m in second] == [
        ["content", "role"],
        ["content", "role", "tool_calls"],
        ["content", "role", "tool_call_id"],
    ]


# -- openai: errors, retries, timeouts --------------------------------------------


async def test_retry_retries_a_5xx_and_the_client_never_retries_on_its_own(write, manager):
    async with serve(openai_error(503, "try later"), reply_sse(openai_stream("ok"))) as s:
        agent(write, "flaky", openai_model(s.url), **{"model-pipeline": {"retry": {"backoff": 0}}})
        box: dict = {}
        assert await manager.invoke("flaky", context={"nonlocals": box}) == "ok "
    assert len(s.requests) == 2
    assert box["retries"] == [f"ModelError: model openai:m at {s.url}/v1 failed: HTTP 503: try later"]


async def test_retry_honours_retry_after_capped_by_max_delay(write, manager):
    replies = [openai_error(429, "slow down", retry_after_ms="40"), openai_error(429, "slower", retry_after="60")]
    async with serve(*replies, reply_sse(openai_stream("ok"))) as s:
        pipeline = {"retry": {"attempts": 3, "backoff": 0, "max-delay": 0.05}}
        agent(write, "polite", openai_model(s.url), **{"model-pipeline": pipeline})
        box: dict = {}
        assert await manager.invoke("polite", context={"nonlocals": box}) == "ok "
    assert box["retry-waits"] == [0.04, 0.05]  # what the server asked, then the cap
    assert len(s.requests) == 3


async def test_retry_never_retries_a_client_error(write, manager):
    for status, message in [(400, "context length exceeded"), (401, "bad key"), (404, "no such model"), (422, "bad")]:
        async with serve(openai_error(status, message)) as s:
            agent(write, "doomed", openai_model(s.url), **{"model-pipeline": {"retry": {"backoff": 0}}})
            manager.refresh()  # the same file, rewritten with this server's URL: look now
            with pytest.raises(ModelError, match=f"HTTP {status}: {message}") as info:
                await manager.invoke("doomed")
        assert len(s.requests) == 1
        assert info.value.retryable is False and info.value.status == status


async def test_a_bad_key_names_the_variable_it_came_from(write, manager):
    async with serve(openai_error(401, "invalid api key")) as s:
        agent(write, "locked", openai_model(s.url))
        with pytest.raises(ModelError, match=r"HTTP 401: invalid api key \(the key comes from TC_KEY\)"):
            await manager.invoke("locked")


async def test_a_server_that_never_answers_times_out(write, manager):
    async with serve(hang) as s:
        agent(write, "stuck", openai_model(s.url, timeout=0.3))
        with anyio.fail_after(5):  # the client's own default would wait 600 s
            with pytest.raises(ModelError, match=r"no complete answer within its timeout \(0.3 s") as info:
                await manager.invoke("stuck")
    assert f"{s.url}/v1" in str(info.value) and "openai:m" in str(info.value)
    assert info.value.retryable is True


async def test_a_stream_that_stalls_times_out_and_its_deltas_are_discarded(write, manager):
    async with serve(reply_sse(openai_stream("one two three four five six"), stall=True)) as s:
        agent(write, "stalled", openai_model(s.url, timeout=0.5))
        seen: list = []
        manager.events.listeners.append(lambda e: seen.append(e) if e.kind.startswith("model.d") else None)
        with anyio.fail_after(5):
            with pytest.raises(ModelError, match="no complete answer within its timeout"):
                await manager.invoke("stalled")
    deltas = [e for e in seen if e.kind == "model.delta"]
    assert deltas and seen[-1].kind == "model.discarded"
    assert seen[-1].data["deltas"] == len(deltas) and "timeout" in seen[-1].data["why"]


async def test_a_refused_connection_names_the_model_and_url(write, manager):
    url = f"http://127.0.0.1:{free_port()}"
    agent(write, "nowhere", openai_model(url))
    with pytest.raises(ModelError, match=f"model openai:m at {url}/v1: connection failed") as info:
        await manager.invoke("nowhere")
    assert info.value.retryable is True


async def test_an_unset_key_variable_is_a_configuration_error(write, manager, monkeypatch):
    monkeypatch.delenv("TC_KEY")
    agent(write, "keyless", openai_model("http://127.0.0.1:9"))
    with pytest.raises(ConfigurationError, match="api-key-env names TC_KEY, which is unset or empty"):
        await manager.invoke("keyless")


async def test_an_error_inside_the_stream_is_a_model_error(write, manager):
    events = [(None, {"choices": [{"index": 0, "delta": {"content": "par"}}]}), (None, {"error": {"message": "boom"}})]
    async with serve(reply_sse(events)) as s:
        agent(write, "broken", openai_model(s.url))
        with pytest.raises(ModelError, match="failed while streaming: boom"):
            await manager.invoke("broken")


def test_retry_after_reads_seconds_milliseconds_and_dates():
    assert retry_after({"Retry-After": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None
    assert retry_after({"Retry-After": "99999999"}) == 3600.0


# -- anthropic ---------------------------------------------------------------------


def anthropic_stream(text: str = "", calls: list[dict] | None = None, stop: str | None = None) -> list:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-x-1",
                    "usage": {"input_tokens": 10, "cache_read_input_tokens": 2, "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if text:
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
        )
        for word in text.split(" "):
            delta = {"type": "text_delta", "text": word + " "}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for number, call in enumerate(calls or []):
        block = {"type": "tool_use", "id": f"toolu_{number}", "name": call["name"], "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        raw = json.dumps(call["arguments"])
        for piece in (raw[:5], raw[5:]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    reason = stop or ("tool_use" if calls else "end_turn")
    events.append(
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 6}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_model(url: str, **extra: Any) -> dict:
    return {"provider": "anthropic", "name": "claude-x", "base-url": url, "api-key-env": "TC_ANTHROPIC_KEY", **extra}


async def test_anthropic_tool_use_round_trip_over_http(write, manager):
    write(
        "tools/weather.py",
        "frontmatter = {'description': 'Weather.', 'metadata': {'params': {'type': 'object', "
        "'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}\n"
        "def main(ctx):\n"
        "    if ctx.args['city'] == 'Atlantis':\n"
        "        raise ValueError('no such city')\n"
        "    return {'temp': len(ctx.args['city'])}\n",
    )
    calls = [
        {"name": "weather", "arguments": {"city": "Paris"}},
        {"name": "weather", "arguments": {"city": "Atlantis"}},
    ]
    replies = [reply_sse(anthropic_stream("Let me look.", calls)), reply_sse(anthropic_stream("Paris is 5."))]
    async with serve(*replies) as s:
        agent(write, "claude", anthropic_model(s.url), body="Weather in Paris?", tools=["weather"], system="Be brief.")
        seen: list = []
        manager.events.listeners.append(lambda e: seen.append(e) if e.kind.startswith("model.") else None)
        assert await manager.invoke("claude") == "Paris is 5. "
    first, second = (r["body"] for r in s.requests)
    assert s.requests[0]["path"] == "/v1/messages" and s.requests[0]["headers"]["x-api-key"] == "sk-ant-test"
    assert first["system"] == "Be brief." and first["max_tokens"] == 4096 and first["stream"] is True
    # a turn of one text block goes as its text: a smaller body, built and read faster (issue 29)
    assert first["messages"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert first["tools"] == [
        {
            "name": "weather",
            "description": "Weather.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
    ]
    assert first["tool_choice"] == {"type": "auto"}
    assistant, results = second["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look. "},
            {"type": "tool_use", "id": "toolu_0", "name": "weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Atlantis"}},
        ],
    }
    assert results["role"] == "user"
    assert results["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_0", "content": '{"temp": 5}'}
    assert results["content"][1]["is_error"] is True and "no such city" in results["content"][1]["content"]
    deltas = [e.data for e in seen if e.kind == "model.delta" and e.iteration == 1]
    assert [d["text"] for d in deltas if "text" in d] == ["Let ", "me ", "look. "]
    assert "".join(d["arguments"] for d in deltas if d.get("index") == 1) == '{"city": "Atlantis"}'
    responses = [e.data for e in seen if e.kind == "model.response"]
    assert responses[0]["finish_reason"] == "tool_calls" and responses[1]["finish_reason"] == "stop"
    assert responses[0]["usage"] == {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
    assert responses[1]["run_usage"]["calls"] == 2 and responses[1]["run_usage"]["total_tokens"] == 36
    assert responses[0]["model"] == "claude-x-1"


async def test_anthropic_json_answer_choice_and_max_tokens(write, manager):
    returns = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}
    async with serve(reply_sse(anthropic_stream('{"temp": 21}'))) as s:
        model = anthropic_model(s.url, **{"max-tokens": 64})
        agent(write, "shaped", model, returns=returns, **{"returns-strategy": "prompted"})
        assert await manager.invoke("shaped") == {"temp": 21}
    sent = s.requests[0]["body"]
    assert sent["max_tokens"] == 64
    assert "only a JSON value" in sent["system"] and '"temp"' in sent["system"]


async def test_anthropic_truncated_answer_is_an_error(write, manager):
    async with serve(reply_sse(anthropic_stream("It was a dark and", stop="max_tokens"))) as s:
        agent(write, "cut", anthropic_model(s.url, **{"max-tokens": 5}))
        with pytest.raises(ModelError, match=r"cut off at max-tokens \(5\)"):
            await manager.invoke("cut")


async def test_anthropic_errors_are_mapped_like_openai(write, manager):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}}
    async with serve(reply_json(overloaded, 529), reply_json(bad, 400)) as s:
        agent(write, "busy", anthropic_model(s.url), **{"model-pipeline": {"retry": {"backoff": 0}}})
        box: dict = {}
        with pytest.raises(ModelError, match="HTTP 400: prompt is too long") as info:
            await manager.invoke("busy", context={"nonlocals": box})
    assert len(s.requests) == 2 and info.value.retryable is False
    assert box["retries"] == [f"ModelError: model anthropic:claude-x at {s.url} failed: HTTP 529: Overloaded"]


async def test_anthropic_error_event_mid_stream(write, manager):
    events = anthropic_stream("half")[:3] + [
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    ]
    async with serve(reply_sse(events)) as s:
        agent(write, "dropped", anthropic_model(s.url))
        with pytest.raises(ModelError, match="failed while streaming: overloaded_error: Overloaded") as info:
            await manager.invoke("dropped")
    assert info.value.retryable is True


async def test_anthropic_unstreamed_and_tool_choice(write, manager):
    write("tools/ping.py", "def main(ctx):\n    return 'pong'\n")
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x-1",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "ping", "input": {}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    async with serve(reply_json(message)) as s:
        model = anthropic_model(s.url, options={"stream": False, "temperature": 0})
        agent(write, "pinger", model, tools=["ping"], **{"tool-choice": "required"})
        assert await manager.invoke("pinger") == "pong"
    sent = s.requests[0]["body"]
    assert sent["tool_choice"] == {"type": "any"} and sent["temperature"] == 0 and "stream" not in sent


def test_anthropic_messages_merge_turns_and_skip_empty_ones():
    ours = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "name": "f", "arguments": "{bad"}]},
        {"role": "tool", "tool_call_id": "t1", "name": "f", "content": "error: TypeError: bad"},
    ]
    assert anthropic_messages(ours) == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"raw": "{bad"}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "error: TypeError: bad", "is_error": True}
            ],
        },
    ]


# -- third-party providers ---------------------------------------------------------

PLUGIN = """
class EchoProvider:
    async def complete(self, request, *, run, on_delta=None):
        text = "echo: " + request["messages"][-1]["content"]
        if on_delta is not None:
            on_delta({"text": text})
        return {"content": text, "tool_calls": [], "finish_reason": "stop",
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                "model": request["model"]["name"]}
"""


def install_plugin(folder: Path, name: str, module: str, target: str, source: str | None) -> None:
    """A distribution installed in ``folder``: its module and a dist-info naming the entry point."""
    if source is not None:
        (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{module.replace('_', '-')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[toolcascade.providers]\n{name} = {target}\n")


async def test_a_provider_from_an_entry_point(write, manager, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "echo-test", "tc_echo_plugin", "tc_echo_plugin:EchoProvider", PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    assert parse_model("echo-test:any")["provider"] == "echo-test"
    agent(write, "parrot", {"provider": "echo-test", "name": "any"}, body="Polly")
    deltas: list = []
    manager.events.listeners.append(lambda e: deltas.append(e.data) if e.kind == "model.delta" else None)
    assert await manager.invoke("parrot") == "echo: Polly"
    assert deltas == [{"text": "echo: Polly"}]


async def test_unknown_and_broken_provider_entry_points(write, manager, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "broken-test", "tc_missing_plugin", "tc_missing_plugin:Nothing", None)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ConfigurationError, match="'broken-test' .* cannot be loaded: ModuleNotFoundError"):
        parse_model("broken-test:x")
    with pytest.raises(ConfigurationError, match="unknown model provider 'nosuch'.*'toolcascade.providers' entry"):
        parse_model("nosuch:x")


# -- media args as content parts (issue 29) ----------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 32
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 32
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
MEDIA_PARAMS = {
    "type": "object",
    "properties": {
        "photo": {"format": "image"},  # a path, a data: URL or {data, media-type}
        "voice": {"format": "audio"},
        "report": {"contentMediaType": "application/pdf"},
    },
}


def b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


@pytest.fixture
def media(tmp_path, tools, monkeypatch) -> Manager:
    monkeypatch.setenv("TC_KEY", "sk-test")
    monkeypatch.setenv("TC_ANTHROPIC_KEY", "sk-ant-test")
    (tmp_path / "photo.bin").write_bytes(PNG)  # the name says nothing: the type is read from the bytes
    (tmp_path / "voice.wav").write_bytes(WAV)
    (tmp_path / "report.pdf").write_bytes(PDF)
    return Manager([tools], cwd=tmp_path)


async def test_media_args_reach_an_openai_server_as_content_parts(write, media):
    async with serve(reply_sse(openai_stream("A cat."))) as s:
        agent(write, "look", openai_model(s.url), body="What is this?", params=MEDIA_PARAMS)
        args = {"photo": "photo.bin", "voice": {"data": b64(WAV), "media-type": "audio/wav"}, "report": "report.pdf"}
        assert await media.invoke("look", args) == "A cat. "
    [user] = s.requests[0]["body"]["messages"]
    assert user["role"] == "user"
    assert user["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{b64(PDF)}"}},
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
    ]  # in the order of params (which yaml.safe_dump sorted)


async def test_media_args_reach_an_anthropic_server_as_blocks(write, media):
    async with serve(reply_sse(anthropic_stream("A cat."))) as s:
        params = {"type": "object", "properties": {k: MEDIA_PARAMS["properties"][k] for k in ("photo", "report")}}
        agent(write, "look", anthropic_model(s.url), body="What is this?", params=params)
        assert await media.invoke("look", {"photo": f"data:image/png;base64,{b64(PNG)}", "report": "report.pdf"})
    [user] = s.requests[0]["body"]["messages"]
    assert user["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}},
    ]


async def test_a_media_path_outside_the_run_folder_is_refused(write, media, tmp_path):
    from orchestrator import SecurityError

    outside = tmp_path.parent / f"{tmp_path.name}-secret.png"
    outside.write_bytes(PNG)
    (tmp_path / "link.png").symlink_to(outside)
    agent(write, "look", {"provider": "scripted", "script": ["never asked"]}, params=MEDIA_PARAMS)
    for path in (str(outside), f"../{outside.name}", "link.png"):
        with pytest.raises(SecurityError, match="outside the run's folder") as info:
            await media.invoke("look", {"photo": path})
        assert info.value.tool == "look" and info.value.key == "params.photo"
    with pytest.raises(SecurityError, match="media-urls: true"):
        await media.invoke("look", {"photo": "https://example.com/cat.png"})


async def test_media_of_the_wrong_kind_is_a_configuration_error(write, media):
    agent(write, "look", {"provider": "scripted", "script": ["never asked"]}, params=MEDIA_PARAMS)
    with pytest.raises(ConfigurationError, match="must be image, but its data is application/pdf"):
        await media.invoke("look", {"photo": "report.pdf"})
    with pytest.raises(ConfigurationError, match="not base64"):
        await media.invoke("look", {"photo": {"data": "not base64!", "media-type": "image/png"}})


async def test_a_media_url_is_passed_on_when_the_agent_allows_it(write, media):
    async with serve(reply_sse(openai_stream("A cat."))) as s:
        agent(write, "look", openai_model(s.url), params=MEDIA_PARAMS, **{"media-urls": True})
        await media.invoke("look", {"photo": "https://example.com/cat.png"})
    content = s.requests[0]["body"]["messages"][0]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
