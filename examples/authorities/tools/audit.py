"""A metadata middleware: records what ran, for the example to print."""

frontmatter = {"role": "middleware", "description": "Records each call in ctx.nonlocals['audit']."}


async def main(ctx):
    target = ctx.target
    try:
        return await target.manager.next()
    finally:
        target.nonlocals.setdefault("audit", []).append(f"{target.tool.name} ({ctx.args['level']})")
