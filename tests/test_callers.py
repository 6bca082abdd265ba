"""The rules for untrusted callers (MCP clients, models)."""

from __future__ import annotations

import pytest

from orchestrator import InvocationError, SecurityError
from orchestrator.callers import check_untrusted


def check(options, tools=("weather",), **kwargs):
    check_untrusted(
        {"context": None, "middleware": None, "overrides": None, **options}, tools, tool="t", caller="x", **kwargs
    )


def test_callers_may_remove_and_use_their_own_tools():
    check({"middleware": {"log": {"remove": True}, "weather": {"args": {}}}})
    check({"context": {"locals": {"middleware": [{"name": "weather"}]}, "nonlocals": {}}})
    check({"overrides": {"k": 1}}, overrides=True)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"overrides": {"k": 1}}, r"\$overrides is not accepted from x"),
        ({"context": {"cwd": "/"}}, r"\$context.cwd is not accepted"),
        ({"context": {"target": {}}}, r"\$context.target is not accepted"),
        (
            {"middleware": {"paths": {"args": "/"}}},
            r"\$middleware from x may add or override only tools it can call, not 'paths'",
        ),
        ({"context": {"locals": {"middleware": {"delegate": {"args": "secret"}}}}}, r"not 'delegate'"),
    ],
)
def test_callers_may_not_reach_further(options, needle):
    with pytest.raises(SecurityError, match=needle):
        check(options)


def test_callers_context_must_be_a_mapping():
    with pytest.raises(InvocationError):
        check({"context": ["x"]})
