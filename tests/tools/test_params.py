"""The built-in params middleware: schema defaults fill args."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_params_fills_defaults_before_validation(write, tools):
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {\n"
        "    'n': {'type': 'integer', 'default': 3},\n"
        "    'opts': {'type': 'object', 'properties': {'deep': {'default': True}}}},\n"
        "    'required': ['n']}}}\n"
        "def main(ctx):\n    return ctx.args\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("t") == {"n": 3}
    assert await manager.invoke("t", {"n": 1, "opts": {}}) == {"n": 1, "opts": {"deep": True}}


async def test_params_does_not_touch_the_callers_args(write, tools):
    write(
        "tools/t.py",
        "frontmatter = {'metadata': {'params': {'properties': {'n': {'default': 1}}}}}\ndef main(ctx):\n    return ctx.args\n",
    )
    args: dict = {}
    assert await Manager([tools]).invoke("t", args) == {"n": 1}
    assert args == {}
