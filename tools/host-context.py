"""host-context: Claude Code's context injection in a command or skill (`` !`cmd` ``, `````!`` blocks, ``@file``).

The Claude Code formats add this middleware to a command or skill whose body
holds such markers (``orchestrator.formats.injection``), with the markers as
its args. It does nothing unless the command (or the agent calling it) has
``host-trust: {context: true}`` from the program or a trusted folder. Then,
before the prompt renders, it inlines each ``@file`` (confined to the run's
folder, as ``Read`` is) and runs each command through the ``Bash`` built-in,
the path a model's call takes: the command must list ``Bash`` in
``allowed-tools``, ``Bash(git:*)`` narrows it, it needs ``exec`` and asks for
approval unless the grant turns it off. The outputs go to
``locals['host-context']``, where the prompt puts them in the markers' places.
"""

from orchestrator import SecurityError
from orchestrator.formats.injection import FLAG, KEY, listed
from orchestrator.hosttools import confine, grant, read_text, shown

frontmatter = {
    "description": "Runs a command's !`cmd` and ```! blocks and inlines its @files, under host-trust {context: true}.",
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "marks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": {"enum": ["command", "block", "file"]},
                            "text": {"type": "string"},
                        },
                        "required": ["kind", "text"],
                    },
                }
            },
            "required": ["marks"],
        },
    },
}


def _file(target, name):
    """The file ``@name`` names, inlined; the marker's own text when no such file is in the run's folder."""
    path = confine(target, name, "@file", exists=False)
    if not path.is_file():
        return f"@{name}"
    return f'<file path="{shown(target, path)}">\n{read_text(target, path, "@file")}\n</file>'


async def main(ctx):
    target = ctx.target
    granted, _ = grant(target)
    if granted.get(FLAG) is not True:
        target.locals.pop(KEY, None)  # off by default: the markers stay text, whatever a caller's locals say
        return await target.manager.next()
    marks = ctx.args["marks"]
    if any(mark["kind"] != "file" for mark in marks) and not listed(target.meta):
        raise SecurityError(
            f"{target.tool.name} runs commands (!`...`) for its context, which run through Bash: list it in the "
            "file's allowed-tools (e.g. allowed-tools: Bash(git status:*)), as Claude Code requires",
            tool=target.tool.name,
            key="allowed-tools",
        )
    outputs = []
    for mark in marks:
        if mark["kind"] == "file":
            outputs.append(_file(target, mark["text"]))
        else:
            reason = f"context for {target.tool.name}: {mark['text'][:120]}"
            outputs.append(str(await target.manager.invoke("Bash", {"command": mark["text"], "description": reason})))
    target.locals[KEY] = outputs
    return await target.manager.next()
