"""The built-in validate-allowed-tools middleware."""

from __future__ import annotations

import pytest

from orchestrator import ConfigurationError, Manager, SecurityError

pytestmark = pytest.mark.anyio


async def test_allowed_tools_must_be_a_list_of_names(write, tools):
    write("tools/t.md", "---\nmetadata: {allowed-tools: weather}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="allowed-tools must be a list"):
        await Manager([tools]).invoke("t")


async def test_allowed_tools_is_locked_against_callers(write, tools):
    write("tools/t.md", "---\nmetadata: {allowed-tools: []}\n---\nx\n")
    with pytest.raises(SecurityError):
        await Manager([tools]).invoke("t", {"$middleware": {"validate-allowed-tools": {"remove": True}}})
