"""One SDK client per provider configuration and event loop, kept by the Manager (issue 29).

Against fakellm on 127.0.0.1, through the real ``openai`` and ``anthropic``
clients: the SDK classes are wrapped only to count how often a client is built
and to see that each one is closed.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml
from servers import fakellm_http as http
from servers import fakellm_server

from orchestrator import Manager

pytestmark = pytest.mark.anyio

RULES = {
    "rules": [
        {  # for test_structured_output: an answer through the final_answer tool, and a JSON answer
            "name": "final",
            "when": {"tools_include": "final_answer", "messages_contain": "Final please"},
            "respond": {"tool_calls": [{"name": "final_answer", "arguments": {"temp": 7}}]},
        },
        {"name": "json", "when": {"messages_contain": "as JSON"}, "respond": {"content": '{"temp": 21}'}},
        {
            "name": "rotated-key",
            "when": {"messages_contain": "Rotate", "header.authorization": "Bearer sk-new"},
            "respond": {"content": "new key seen"},
        },
        {
            "name": "tick",
            "when": {"messages_contain": "Count", "turn_in": [1, 9]},
            "respond": {"tool_calls": [{"name": "tick", "arguments": {}}]},
        },
        {"name": "answer", "when": {}, "respond": {"content": "done"}},
    ]
}


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with fakellm_server(tmp_path_factory.mktemp("fakellm-clients"), RULES) as base:
        yield base


def requests_seen(fakellm: str) -> int:
    return int(http(f"{fakellm}/_fakellm/stats")["total_requests"])


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Every AsyncOpenAI / AsyncAnthropic (and openai's HTTP client, its connection pool) built during the test."""
    made: dict[str, list[Any]] = {"openai": [], "anthropic": [], "openai-http": []}
    for module, factory, name in (
        (openai, "AsyncOpenAI", "openai"),
        (anthropic, "AsyncAnthropic", "anthropic"),
        (openai, "DefaultAsyncHttpxClient", "openai-http"),
    ):
        real = getattr(module, factory)

        class Counted(real):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, _name: str = name, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                made[_name].append(self)

        monkeypatch.setattr(module, factory, Counted)
    return made


def agent(write: Any, name: str, model: dict[str, Any], body: str, **meta: Any) -> None:
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": {"model": model, **meta}}) + f"---\n{body}\n")


@pytest.fixture
def setup(fakellm: str, write: Any, tools: Path, monkeypatch: pytest.MonkeyPatch) -> Manager:
    http(f"{fakellm}/_fakellm/reset", "POST")
    monkeypatch.setenv("TC_CLIENT_KEY", "sk-test")
    write("tools/tick.py", "def main(ctx):\n    return 'ticked'\n")
    model = {"provider": "openai", "name": "gpt-4o-mini", "base-url": f"{fakellm}/v1", "api-key-env": "TC_CLIENT_KEY"}
    agent(write, "counter", model, "Count {{ args.n }}", tools=["tick"])
    agent(write, "plain", model, "Say {{ args.n }}")
    agent(write, "patient", {**model, "timeout": 300}, "Wait {{ args.n }}")
    agent(write, "rotate", model, "Rotate {{ args.n }}")
    claude = {"provider": "anthropic", "name": "claude-x", "base-url": fakellm, "api-key-env": "TC_CLIENT_KEY"}
    agent(write, "claude", claude, "Claude {{ args.n }}", tools=["tick"])
    return Manager([tools])


async def test_one_client_serves_100_requests_over_10_invocations(setup: Manager, fakellm: str, built: Any) -> None:
    before = requests_seen(fakellm)
    async with setup as manager:
        for n in range(10):  # each run: 9 tool calls, then the answer
            assert await manager.invoke("counter", {"n": n}) == "done"
        assert requests_seen(fakellm) - before == 100
        assert len(built["openai"]) == 1
        client = built["openai"][0]
        assert not client.is_closed()
    assert client.is_closed()  # Manager.close() closed it


async def test_two_configurations_get_two_clients(setup: Manager, built: Any) -> None:
    async with setup as manager:
        for n in range(3):
            await manager.invoke("plain", {"n": n})
            await manager.invoke("patient", {"n": n})  # another timeout: another client
        assert len(built["openai"]) == 2
    assert all(client.is_closed() for client in built["openai"])


async def test_anthropic_client_is_kept_too(setup: Manager, fakellm: str, built: Any) -> None:
    async with setup as manager:
        for n in range(3):
            assert await manager.invoke("claude", {"n": n}) == "done"
        assert len(built["anthropic"]) == 1
    assert built["anthropic"][0].is_closed()


async def test_a_changed_key_is_sent_without_a_new_connection_pool(
    setup: Manager, built: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with setup as manager:
        assert await manager.invoke("rotate", {"n": 1}) == "done"
        monkeypatch.setenv("TC_CLIENT_KEY", "sk-new")
        assert await manager.invoke("rotate", {"n": 2}) == "new key seen"
        # the key is not part of what a client is kept by: a copy with the new key shares the connection pool
        assert len(built["openai-http"]) == 1


def test_invoke_sync_twice_uses_a_client_per_loop_and_leaves_nothing_open(setup: Manager, built: Any) -> None:
    manager = setup
    assert manager.invoke_sync("plain", {"n": 1}) == "done"
    assert manager.invoke_sync("plain", {"n": 2}) == "done"  # a new loop: the first loop's client is not reused
    assert len(built["openai"]) == 2
    assert all(client.is_closed() for client in built["openai"])  # each closed as its loop ended
    manager.close()  # the loops are gone: closing raises nothing
    manager.close()
    gc.collect()  # an unclosed socket would warn here (warnings are errors)


def test_a_loop_that_ended_is_not_kept(setup: Manager, fakellm: str, built: Any) -> None:
    from orchestrator.agent.clients import Clients

    manager = setup
    for n in range(3):
        assert manager.invoke_sync("plain", {"n": n}) == "done"
    key = ("model-client", "openai", f"{fakellm}/v1", "TC_CLIENT_KEY", 120.0, 10.0)
    clients = manager.resource(key, lambda: None)
    assert isinstance(clients, Clients) and clients.made == 3 and len(clients.loops) == 0
    manager.close()


def test_invoke_sync_on_trio_closes_its_client(setup: Manager, built: Any) -> None:
    with setup as manager:
        assert manager.invoke_sync("plain", {"n": 3}, backend="trio") == "done"
        assert manager.invoke_sync("plain", {"n": 4}, backend="trio") == "done"
    assert len(built["openai"]) == 2
    assert all(client.is_closed() for client in built["openai"])
    gc.collect()


async def test_a_program_calling_model_call_itself_reuses_the_managers_client(
    setup: Manager, fakellm: str, built: Any
) -> None:
    from orchestrator.agent.model import grant_model, parse_model

    spec = grant_model(
        parse_model({"provider": "openai", "name": "m", "base-url": f"{fakellm}/v1", "api-key-env": "TC_CLIENT_KEY"})
    )
    async with setup as manager:
        for _ in range(2):
            answer = await manager.invoke(
                "model-call", {"model": spec, "messages": [{"role": "user", "content": "hi"}]}
            )
            assert answer["content"] == "done"
        assert len(built["openai"]) == 1  # model-call's requests run inside keeping(ctx.owner), as an agent's do
        assert not built["openai"][0].is_closed()
    assert all(client.is_closed() for client in built["openai"])  # Manager.close() closed it
