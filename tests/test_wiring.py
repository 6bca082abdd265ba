"""Built-ins wired to the features around them: a program's own ``model-call`` reuses the Manager's clients (issue 29)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_model_clients import built, fakellm, http  # noqa: F401 - fixtures shared with the client tests

from orchestrator import Manager
from orchestrator.agent.model import grant_model, parse_model

pytestmark = pytest.mark.anyio


async def test_a_program_calling_model_call_itself_reuses_the_managers_client(
    tools: Path,
    fakellm: str,  # noqa: F811
    built: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TC_CLIENT_KEY", "sk-test")
    http(f"{fakellm}/_fakellm/reset", "POST")
    spec = grant_model(
        parse_model({"provider": "openai", "name": "m", "base-url": f"{fakellm}/v1", "api-key-env": "TC_CLIENT_KEY"})
    )
    async with Manager([tools]) as manager:
        for _ in range(3):
            answer = await manager.invoke(
                "model-call", {"model": spec, "messages": [{"role": "user", "content": "hi"}]}
            )
            assert answer["content"] == "done"
        assert len(built["openai"]) == 1
        assert not built["openai"][0].is_closed()
    assert built["openai"][0].is_closed()  # Manager.close() closed it
