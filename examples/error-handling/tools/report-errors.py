"""The outer error handler: logs what got past the inner one and re-raises it; its finally always runs."""

import logging

frontmatter = {"role": "middleware", "description": "Logs a failing call and re-raises; always logs the call's end."}

log = logging.getLogger("shop")


async def main(ctx):
    target = ctx.target
    try:
        return await target.manager.next()
    except Exception as error:
        log.error("%s failed: %s: %s", target.tool.name, type(error).__name__, error)
        raise  # the caller still gets the error: this handler only reports it
    finally:
        log.info("finally: %s is over (args %s)", target.tool.name, target.args)
