"""The SPEC section 9 tools, verbatim, for tests that need a small real project."""

GREET = """\
---
description: Greets someone.
metadata:
  params: {type: object, properties: {name: {type: string}}, required: [name]}
  shout: {times: 2}
  $order:
    shout: {after: [$pre-execute], before: [execute]}
---
Hello, {{ args.name }}!
"""

SHOUT = """\
frontmatter = {"metadata": {"params": {"type": "object"}}}

async def main(ctx):
    target = ctx.target
    result = await target.manager.next()
    return str(result).upper() + "!" * ctx.args.get("times", 1)
"""
