"""The project's bytecode, compiled once before the suite's child processes start (issue 25).

Python reads a module's cached bytecode (``__pycache__/*.pyc``) when it is
there and matches its source, and compiles the source on every start when it
is not. Under ``PYTHONDONTWRITEBYTECODE=1`` (the docs harness sets it for the
commands it runs; some CI environments set it for everything) no process
writes that cache, so on a fresh clone every ``toolcascade`` command,
``python main.py``, MCP server and worker process the suite starts compiled
the package's modules it imports anew: about 0.35 s of CPU a start, a third
of a short command's cost. ``compileall`` writes the cache whatever that
variable says (~0.5 s for the package and its built-in tools, nothing when it
is current), and those processes read it.

What runs is the same code: Python checks each cache entry against its
source's modification time and size, and compiles an edited file afresh.
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("orchestrator", "tools", "bench")


def compile_project() -> None:
    """Write the bytecode of the package, its built-in tools and the bench (quietly; an unwritable folder is skipped)."""
    for folder in FOLDERS:
        if (ROOT / folder).is_dir():
            compileall.compile_dir(ROOT / folder, quiet=2)
