"""log: record start, end, duration and errors of the target through Python logging."""

import logging
import time

logger = logging.getLogger("orchestrator.log")

frontmatter = {
    "description": "Logs start, end, duration and errors of the tool (logger 'orchestrator.log').",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": ["boolean", "object"],
            "properties": {"level": {"enum": ["debug", "info", "warning"], "default": "info"}},
        },
    },
}


async def main(ctx):
    target = ctx.target
    if ctx.args is False:
        return await target.manager.next()
    level = logging.getLevelName((ctx.args if isinstance(ctx.args, dict) else {}).get("level", "info").upper())
    name = target.tool.name
    logger.log(level, "start %s depth=%d", name, target.depth)
    started = time.perf_counter()
    try:
        result = await target.manager.next()
    except BaseException as exc:
        ms = (time.perf_counter() - started) * 1000
        logger.log(logging.ERROR, "error %s after %.2f ms: %s: %s", name, ms, type(exc).__name__, exc)
        raise
    logger.log(level, "end %s in %.2f ms", name, (time.perf_counter() - started) * 1000)
    return result
