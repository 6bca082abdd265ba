"""The built-in model-call tool: one model request, with its own pipeline."""

from __future__ import annotations

import pytest

from orchestrator import ArgsValidationError, Manager

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
