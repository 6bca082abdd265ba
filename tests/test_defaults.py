"""Metadata templates render with the defaults of ``params`` filled in (they render before ``params`` runs)."""

from __future__ import annotations

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio

PAGE = """\
---
metadata:
  params:
    type: object
    properties:
      depth: {type: integer, default: 2}
      topic: {type: string}
    required: [topic]
  label: "{{ args.topic }} at depth {{ args.depth }}"
---
{{ meta.label }}; body sees {{ args.depth }}
"""


async def test_a_metadata_template_sees_a_params_default(write, tools):
    write("tools/page.md", PAGE)
    manager = Manager([tools])
    assert await manager.invoke("page", {"topic": "owls"}) == "owls at depth 2; body sees 2"
    assert await manager.invoke("page", {"topic": "owls", "depth": 5}) == "owls at depth 5; body sees 5"


async def test_the_caller_args_stay_as_given_until_params_fills_them(write, tools):
    write("tools/page.md", PAGE)
    write(
        "tools/spy.py",
        "frontmatter = {'role': 'middleware'}\n\n"
        "async def main(ctx):\n    ctx.nonlocals['seen'] = dict(ctx.target.args)\n    return await ctx.target.manager.next()\n",
    )
    manager = Manager([tools])
    seen: dict[str, object] = {}
    await manager.invoke(
        "page",
        {"topic": "owls", "$context": {"nonlocals": seen}, "$middleware": {"spy": {"before": ["params"]}}},
    )
    assert seen["seen"] == {"topic": "owls"}  # a middleware before `params` still sees what the caller sent


async def test_a_missing_required_arg_is_still_a_validation_error_not_a_template_error(write, tools):
    from orchestrator import ArgsValidationError, InterpolationError

    write("tools/page.md", PAGE)
    with pytest.raises((ArgsValidationError, InterpolationError)) as caught:
        await Manager([tools]).invoke("page", {})
    assert "topic" in str(caught.value)
