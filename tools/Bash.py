"""Bash: Claude Code's Bash tool. Runs a command in the project folder.

Args as Claude Code's: ``command``, ``timeout`` (milliseconds, default
120,000, at most 600,000) and ``description``. It needs the ``exec`` grant
(``host-trust: {exec: true}`` on the agent, from a program or a trusted file)
and, by default, an approver's yes for each call. A file that lists
``Bash(git:*)`` narrows it: only commands whose words start with ``git``
run, without a shell (``;``, ``&&``, pipes and redirections are refused).
The output (stdout, then stderr) is bounded to 30,000 characters.
"""

from orchestrator import SecurityError
from orchestrator.hosttools import allowed, command_words, permit, root, rules, run_command

frontmatter = {
    "description": "Runs a shell command in the project folder and returns its output and exit code.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run."},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Milliseconds."},
                "description": {"type": "string", "description": "What the command does, in a few words."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
}


def _words(ctx, command):
    """The command's words when a permission pattern narrows Bash (None: not narrowed)."""
    patterns = rules(ctx, "Bash")
    if patterns is None:
        return None
    words = command_words(ctx, command)
    if not any(allowed(words, pattern) for pattern in patterns):
        shown = ", ".join(f"Bash({p})" for p in patterns)
        raise SecurityError(
            f"command {command[:200]!r} is not allowed: this agent may run only {shown}",
            tool=ctx.tool.name,
            key="command",
        )
    return words


async def main(ctx):
    _words(ctx, ctx.args["command"])
    await permit(ctx, "exec", ctx.args.get("description") or "runs a command in the project folder")
    command = ctx.args["command"]  # an approver may have edited it: check it again
    words = _words(ctx, command)
    return await run_command(command, words, root(ctx), ctx.args.get("timeout", 120_000) / 1000)
