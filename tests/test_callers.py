"""The rules for untrusted callers (MCP clients, models), as orchestrator.callers states them."""

from __future__ import annotations

import pytest

from orchestrator import InvocationError, SecurityError
from orchestrator.callers import Caller, check_untrusted


def check(options, tools=("t", "weather"), overrides=False):
    asked = {"context": None, "middleware": None, "overrides": None, "timeout": None, **options}
    check_untrusted("t", asked, Caller("x", tools, overrides))


def test_callers_may_remove_and_use_their_own_tools():
    check({"middleware": {"log": {"remove": True}, "weather": {"args": {}}}})
    check({"context": {"locals": {"city": "Oslo"}, "nonlocals": {}}})
    check({"overrides": {"k": 1}}, overrides=True)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"overrides": {"k": 1}}, r"\$overrides is not accepted from x"),
        ({"overrides": {"$remove": ["k"]}}, r"\$overrides from x may not carry \$remove"),
        ({"overrides": {"model": "openai:x"}}, r"may not set 'model': it is an engine setting"),
        ({"context": {"cwd": "/"}}, r"\$context.cwd is not accepted"),
        ({"context": {"target": {}}}, r"\$context.target is not accepted"),
        ({"context": {"envelope": {"user": "admin"}}}, r"\$context.envelope is not accepted"),
        ({"context": {"locals": {"model": {"provider": "openai"}}}}, r"locals.model is read by the engine"),
        ({"context": {"locals": {"allowed-tools": ["x"]}}}, r"locals.allowed-tools is read by the engine"),
        ({"context": {"locals": {"prompt": "x"}}}, r"locals.prompt is read by the engine"),
        ({"context": {"locals": {"middleware": {"weather": {}}}}}, r"pass extra middleware as \$middleware"),
        ({"overrides": {"max-tool-calls": 5000}}, r"may not set 'max-tool-calls': it is an engine setting"),
        ({"overrides": {"max-iterations": 10**6}}, r"may not set 'max-iterations': it is an engine setting"),
        ({"overrides": {"host-trust": {"exec": True}}}, r"may not set 'host-trust': it is an engine setting"),
        ({"overrides": {"host-rules": {"Bash": ["*"]}}}, r"may not set 'host-rules': it is an engine setting"),
        ({"overrides": {"media-urls": True}}, r"may not set 'media-urls': it is an engine setting"),
        ({"overrides": {"instructions": True}}, r"may not set 'instructions': it is an engine setting"),
        ({"middleware": {"agent-execute": {"remove": True}}}, r"may not remove 'agent-execute'"),
        ({"middleware": {"model": {"remove": True}}}, r"may not remove 'model'"),
        (
            {"middleware": {"paths": {"args": "/"}}},
            r"\$middleware from x may add or override only tools it can call, not 'paths'",
        ),
    ],
)
def test_callers_may_not_reach_further(options, needle):
    with pytest.raises(SecurityError, match=needle):
        check(options, overrides="overrides" in options and options["overrides"] != {"k": 1})


def test_callers_call_only_their_tools():
    with pytest.raises(SecurityError, match="x may not call 't'"):
        check({}, tools=("weather",))


def test_callers_context_must_be_a_mapping():
    with pytest.raises(InvocationError):
        check({"context": ["x"]})
