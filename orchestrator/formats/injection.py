"""Claude Code's context injection in commands and skills: `` !`cmd` ``, `````!`` blocks and ``@file``.

Claude Code runs a command's `` !`git status` `` and `````!`` blocks before
it sends the prompt, putting their output in their place, and inlines the
files ``@path`` names. Here that is **off by default**: the markers stay
text, and ``check`` says how to turn it on. A program (or a tool or
authority in a folder it trusts) turns it on with ``host-trust: {context:
true}`` on the command (or on the agent that calls it):

- ``@path`` inlines the file, confined to the run's folder as ``Read`` is
  (``orchestrator.hosttools``: symlinks followed, at most ``MAX_FILE``
  bytes); a name that is no file there stays text;
- `` !`cmd` `` and a `````!`` block (its lines, run as one script) run
  through the ``Bash`` built-in, the same path a model's call takes: the
  command must list ``Bash`` in ``allowed-tools`` (as Claude Code requires),
  its ``Bash(git:*)`` patterns narrow what runs, it needs the ``exec`` grant
  too, asks for approval unless the grant turns it off, runs in the run's
  folder and is bounded by Bash's timeout and output limit.

The adapter finds the markers (``marks``) in the author's body only and
writes each as a choice in the template (``template_piece``): the output the
``host-context`` middleware (``tools/host-context.py``) put in
``locals['host-context']``, else the marker's own text. Outputs are data,
never rendered or searched for markers again; arguments never reach a
command (``$ARGUMENTS`` inside a marker is left as written).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .fences import Code, shell_blocks
from .fields import literal

KEY = "host-context"
"""The middleware (and the local holding its outputs) that runs a command's context injection."""
FLAG = "context"
"""The ``host-trust`` flag that turns injection on."""
ENABLE = (
    "runs only when the program grants host-trust: {context: true, exec: true} and allowed-tools lists Bash "
    "(e.g. Bash(git status:*)); until then it stays text"
)
ENABLE_FILE = "is inlined only when the program grants host-trust: {context: true}; until then it stays text"

_FILE_REF = re.compile(r"(?<![\w@/.`])@(?=[\w./~-]*[/.][\w~-])[\w./~-]*[\w/~-]")  # a sentence's full stop is not in it
# An npm package with its scope (``@axe-core/puppeteer``, ``@types/node@20``): no file extension, one slash.
_PACKAGE = re.compile(r"^@[a-z0-9][\w.-]*/[a-z0-9][\w-]*(?:@[\w.^~-]+)?$")
_SHELL = re.compile(r"!`([^`\n]+)`")
_END = "{% endif %}{# " + KEY + " #}"
_PIECE = re.compile(
    re.escape("{% if '" + KEY + "' in locals %}{{ locals['" + KEY + "'][")
    + r"\d+"
    + re.escape("] }}{% else %}")
    + "(.*?)"
    + re.escape(_END),
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Mark:
    """One injection marker: ``kind`` (``command``, ``block`` or ``file``), what it runs or names, and where."""

    kind: str
    text: str
    start: int
    end: int

    @property
    def source(self) -> str:
        """How the marker is shown in messages."""
        if self.kind == "file":
            return f"@{self.text}"
        if self.kind == "command":
            return f"!`{self.text}`"
        shown = "; ".join(line.strip() for line in self.text.splitlines() if line.strip())[:80]
        return f"the ```! block ({shown or '(empty)'})"


def marks(body: str) -> list[Mark]:
    """The injection markers of ``body``, in order: never inside other code, never an npm scope."""
    found: list[Mark] = []
    code = Code(body) if "`" in body or "~~~" in body else None
    for match in _FILE_REF.finditer(body):
        if _PACKAGE.match(match.group(0)) or (code is not None and code.covers(match.start())):
            continue
        found.append(Mark("file", match.group(0)[1:], match.start(), match.end()))
    for match in _SHELL.finditer(body):
        if code is not None and code.covers(match.start()):
            continue
        found.append(Mark("command", match.group(1).strip(), match.start(), match.end()))
    for block in shell_blocks(body):
        lines = body[block.start : block.end].split("\n")[1:]
        script = "\n".join(line for line in lines if not line.strip().startswith(("```", "~~~")))
        found.append(Mark("block", script.strip("\n"), block.start, block.end))
    found.sort(key=lambda mark: mark.start)
    kept: list[Mark] = []
    for mark in found:  # a marker inside a ```! block belongs to the block
        if kept and mark.start < kept[-1].end:
            continue
        kept.append(mark)
    return kept


def template_piece(index: int, mark: Mark, body: str) -> str:
    """The template for marker ``index``: its output when the middleware ran it, else its own text."""
    return (
        "{% if '"
        + KEY
        + "' in locals %}{{ locals['"
        + KEY
        + "']["
        + str(index)
        + "] }}{% else %}"
        + literal(body[mark.start : mark.end])
        + _END
    )


def authored(template: str) -> str:
    """A command's template with each marker's choice undone: the marker as written (for ``export``)."""
    if _END not in template:
        return template
    return _PIECE.sub(lambda match: match.group(1), template)


def arguments(found: list[Mark]) -> dict[str, Any]:
    """The ``host-context`` middleware's args for ``found``: each marker's kind and text (template-safe)."""
    return {"marks": [{"kind": mark.kind, "text": literal(mark.text)} for mark in found]}


def problem(mark: Mark) -> str:
    """What ``check`` says about a marker of a command or skill: how to turn injection on."""
    return f"{mark.source} {ENABLE_FILE if mark.kind == 'file' else ENABLE}"


def listed(meta: Mapping[str, Any]) -> bool:
    """Whether a command's metadata offers ``Bash`` (its ``allowed-tools``), which its commands run through."""
    tools = meta.get("tools")
    return isinstance(tools, list | tuple) and "Bash" in tools
