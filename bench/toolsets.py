"""Tool folders the workloads run: written once per run into a temporary folder.

Every tool is a real file, as a user would write it: the trivial tool, the
pass-through middleware, a templated page with directives (``invoke``), a
catalog of thousands of tools (``catalog``), parked tools (``load``) and
rings of tools that reference each other (``graph``).
"""

from __future__ import annotations

from pathlib import Path

NOOP = "async def main(ctx):\n    return 1\n"
NOOP_SYNC = "def main(ctx):\n    return 1\n"
# A pass-through middleware under the default authority: itself plus its own 7 built-ins per entry.
PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"
STAMP = "async def main(ctx):\n    return f\"[{ctx.args['label']}]\"\n"
PAGE = """\
---
description: A page with interpolated metadata and two directives.
metadata:
  params: {type: object, properties: {name: {type: string}}, required: [name]}
  greeting: "Hello, {{ args.name }}"
  city: Paris
---
{{ meta.greeting }} from {{ meta.city }}!
Today: :stamp[today]

::stamp[footer]
"""
# Parked until the gate the caller seeds into locals opens: every invocation in flight at once.
PARKED = """\
frontmatter = {"metadata": {"pass0": {}, "pass1": {}}}


async def main(ctx):
    ctx.locals["arrived"]()
    await ctx.locals["gate"].wait()
    return 1
"""


def write_invoke_tools(root: Path, passes: int) -> Path:
    """The W1-W3 and W5 tools, and ``passes`` pass-through middleware ``pass0`` ... in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "noop.py").write_text(NOOP)
    (root / "noop-sync.py").write_text(NOOP_SYNC)
    (root / "stamp.py").write_text(STAMP)
    (root / "page.md").write_text(PAGE)
    (root / "parked.py").write_text(PARKED)
    for i in range(passes):
        (root / f"pass{i}.py").write_text(PASS)
    return root


def write_catalog(root: Path, count: int, folders: int) -> Path:
    """``count`` tools in ``folders`` folders: nine markdown tools with params to one python tool.

    Written once per folder path: an existing, complete catalog is reused.
    """
    stamp = root / f".complete-{count}-{folders}"
    if stamp.exists():
        return root
    per = count // folders
    for f in range(folders):
        folder = root / f"group{f:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for t in range(per):
            name = f"tool{t:03d}"
            if t % 10 == 9:
                (folder / f"{name}.py").write_text(
                    f'frontmatter = {{"description": "Python tool {f}/{t}."}}\n\n\n' + NOOP
                )
                continue
            (folder / f"{name}.md").write_text(
                "---\n"
                f"description: Tool {t} of group {f}, answering about {{{{ args.topic }}}}.\n"
                "metadata:\n"
                "  params:\n"
                "    type: object\n"
                "    properties: {topic: {type: string}, depth: {type: integer, default: 1}}\n"
                "    required: [topic]\n"
                "---\n"
                f"Write {{{{ args.depth }}}} paragraphs about {{{{ args.topic }}}} for group {f}.\n"
            )
    stamp.write_text("")
    return root


def write_ring(root: Path, size: int) -> Path:
    """``top`` (the trivial async tool) and a ring of ``size - 1`` markdown tools back to it.

    ``top``'s metadata names ``g0``, each ``g<i>`` names the next and the last
    names ``top``: the reachable tool graph has ``size`` tools (and the
    built-ins) in one strongly connected component, so every ring key is
    auto-static data (R-CAS-8) and ``top``'s chain is the default pipeline,
    exactly as with a small ring. Only the size of the graph differs.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "top.py").write_text('frontmatter = {"metadata": {"g0": {}}}\n\n\n' + NOOP)
    for i in range(size - 1):
        after = f"g{i + 1}" if i < size - 2 else "top"
        (root / f"g{i}.md").write_text(f"---\nmetadata:\n  {after}: {{}}\n---\nMember {i} of the ring.\n")
    return root
