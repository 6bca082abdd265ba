"""``toolcascade init [DIR]``: a starter folder that ``toolcascade run`` works on at once.

The folder holds a markdown tool (``tools/hello.md``), a python middleware
(``tools/polish.py``), an authority that applies the middleware to every tool
under ``tools/`` (``tools/AUTHORITY.md``) and a README whose commands are the
next steps. Nothing is ever overwritten without ``--force``, and nothing is
written at all when a file is in the way.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from .authorities import LOCAL_FILE
from .errors import OrchestratorError

AUTHORITY = """\
---
name: project
description: House rules for every tool in this folder and the folders under it.
metadata:
  $attach: middleware           # a key runs a tool only when that tool says role: middleware; the rest is data
  tone: friendly                # data: every tool here reads it as meta.tone, even beside a tools/tone.md
  polish: {suffix: " :)"}       # tools/polish.py is role: middleware, so every tool here runs it
  $order:
    polish: {after: [$pre-execute], before: [execute]}   # wrap the body, inside validation
---
Settings for every tool under tools/. A tool overrides a key by setting it
in its own metadata, or drops it with `$remove: [polish]`.
"""

HELLO = """\
---
description: Says hello. Edit tools/hello.md to make it yours.
metadata:
  params:
    type: object
    properties:
      name: {type: string, default: world}
---
Hello, {{ args.name }}! This is a {{ meta.tone }} tool.
"""

POLISH = '''\
"""A middleware: wraps the rest of the chain and adds a suffix to its result."""

frontmatter = {
    "role": "middleware",  # hidden from `list` and MCP: it wraps other tools
    "description": "Adds a suffix to the wrapped tool's result.",
    "metadata": {"params": {"type": "object", "properties": {"suffix": {"type": "string", "default": "!"}}}},
}


async def main(ctx):
    target = ctx.target  # the invocation this entry wraps
    result = await target.manager.next()  # run the rest of the chain, the body included
    return f"{result}{ctx.args.get('suffix', '')}"
'''

README = """\
# My tools

Made by `toolcascade init`. Every command runs from this folder, where
`tools/` holds the tools:

- `tools/hello.md`: a markdown tool (YAML frontmatter and a prompt);
- `tools/polish.py`: a python middleware that adds a suffix to a result;
- `tools/AUTHORITY.md`: settings for every tool under `tools/`; its
  `polish` key names a tool declared `role: middleware`, so `polish` wraps
  every tool here. With `$attach: middleware`, a key runs only such a tool:
  `tone` stays data even if you add a `tools/tone.md`.

```console
$ toolcascade run hello '{"name": "Ada"}'
Hello, Ada! This is a friendly tool. :)
$ toolcascade run hello '{"name": "Ada", "$middleware": {"polish": {"remove": true}}}'
Hello, Ada! This is a friendly tool.
$ toolcascade run hello --set 'polish={suffix: " !!!"}'
Hello, world! This is a friendly tool. !!!
$ toolcascade list
NAME\tKIND\tDESCRIPTION
...
hello\tmarkdown\tSays hello. Edit tools/hello.md to make it yours.
$ toolcascade check
checked 2 tools in tools: ok
```

`toolcascade show hello` explains every metadata key (its value, the level
that set it, its merge policy) and the chain the call runs through;
`toolcascade serve` serves the tools over MCP (stdio).
"""

FILES: dict[str, str] = {
    "README.md": README,
    "tools/AUTHORITY.md": AUTHORITY,
    "tools/hello.md": HELLO,
    "tools/polish.py": POLISH,
}
"""What ``init`` writes, relative to the folder."""


def scaffold(folder: Path, *, force: bool = False) -> list[Path]:
    """Write the starter files into ``folder`` (created when missing) and return their paths.

    Raises:
        OrchestratorError: ``folder`` is a file, a starter file would overwrite
            an existing one (without ``force``), a starter path is a folder, or
            the files cannot be written. Nothing is written when a check fails.
    """
    if folder.exists() and not folder.is_dir():
        raise OrchestratorError("is not a folder: choose another DIR", path=folder)
    targets = [folder / rel for rel in FILES]
    blocked = [path for path in targets if path.is_dir() or (path.parent.exists() and not path.parent.is_dir())]
    if blocked:
        raise OrchestratorError(
            f"{blocked[0].relative_to(folder)} is in the way (a folder, or a file where a folder goes): "
            "move it or choose another DIR; nothing was written",
            path=folder,
        )
    existing = [path for path in targets if path.exists()]
    if existing and not force:
        names = ", ".join(str(path.relative_to(folder)) for path in existing)
        raise OrchestratorError(
            f"would overwrite {names}: pass --force to replace them, or choose another DIR; nothing was written",
            path=folder,
        )
    try:
        for path, text in zip(targets, FILES.values(), strict=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        ignore_local(folder)
    except OSError as exc:
        raise OrchestratorError(f"cannot write the starter files: {exc.strerror or exc}", path=folder) from exc
    return targets


def ignore_local(folder: Path) -> None:
    """Keep ``AUTHORITY.local.md`` (one checkout's own settings) out of git: a line in ``.gitignore``, added once.

    Raises:
        OSError: the file cannot be read or written.
    """
    ignore = folder / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.is_file() else ""
    if LOCAL_FILE not in text.splitlines():
        ignore.write_text(
            text + ("" if not text or text.endswith("\n") else "\n") + LOCAL_FILE + "\n", encoding="utf-8"
        )


@click.command(short_help="Create a starter folder: a tool, a middleware, an authority.")
@click.argument("folder", required=False, default=".", metavar="[DIR]", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite starter files that already exist (other files are kept).")
def init(folder: Path, force: bool) -> None:
    """Create a starter folder in DIR (default: here) that `toolcascade run` works on at once.

    \b
    It holds tools/hello.md (a markdown tool), tools/polish.py (a python
    middleware), tools/AUTHORITY.md (settings for every tool under tools/,
    which make polish wrap them) and a README with the next steps. Existing
    files are never overwritten without --force.

    \b
    Examples:
      toolcascade init my-tools && cd my-tools
      toolcascade run hello '{"name": "Ada"}'
    """
    try:
        written = scaffold(folder, force=force)
    except OrchestratorError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    for path in written:
        click.echo(f"created {path}")
    step = "" if folder == Path(".") else f"cd {shlex.quote(str(folder))} && "
    click.echo(f'next: {step}toolcascade run hello \'{{"name": "Ada"}}\'')
