"""The built-in fallback middleware: the next model when one fails."""

from __future__ import annotations

import pytest

from orchestrator import Manager, ModelError

pytestmark = pytest.mark.anyio


def request(script):
    return {"model": {"provider": "scripted", "script": script}, "messages": [{"role": "user", "content": "hi"}]}


async def test_fallback_walks_the_list_of_models(tools):
    manager = Manager([tools])
    bad = {"provider": "scripted", "script": [{"answer": "x", "fail": 9}]}
    good = {"provider": "scripted", "name": "good", "script": ["from good"]}
    box: dict = {}
    response = await manager.invoke(
        "model-call",
        request([{"answer": "x", "fail": 9}]),
        overrides={"fallback": {"models": [bad, good]}},
        context={"nonlocals": box},
    )
    assert response["content"] == "from good" and response["model"] == "good"
    assert len(box["fallbacks"]) == 2


async def test_fallback_raises_the_last_error(tools):
    bad = {"provider": "scripted", "script": [{"answer": "x", "fail": 9, "error": "down"}]}
    with pytest.raises(ModelError, match="down"):
        await Manager([tools]).invoke(
            "model-call", request([{"answer": "x", "fail": 9}]), overrides={"fallback": {"models": [bad]}}
        )
