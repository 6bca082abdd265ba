"""The built-in validate-returns middleware."""

from __future__ import annotations

import pytest

from orchestrator import Manager, ReturnsValidationError

pytestmark = pytest.mark.anyio


async def test_validate_returns_checks_the_result(write, tools):
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'returns': {'type': 'object', 'required': ['ok']}}}\n"
        "def main(ctx):\n    return ctx.args\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("t", {"ok": 1}) == {"ok": 1}
    with pytest.raises(ReturnsValidationError) as info:
        await manager.invoke("t", {"nope": 1})
    assert [pointer for pointer, _ in info.value.errors] == [""] and "'ok'" in info.value.errors[0][1]
