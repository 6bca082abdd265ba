"""The official MCP Inspector's CLI for the tests (tests/test_mcp.py, tests/test_mcp_prompts.py).

``npx -y PACKAGE --cli ...`` starts npm, resolves the package in npx's cache,
then runs the package's own command, ``mcp-inspector``, with the arguments.
The tests run that command themselves: npx resolves it once per test process
(npm's start-up cost about 1.3 s of CPU on every call), and every call runs
the same Inspector code with the same arguments as through npx.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest

# Pinned: the newest releases need Node 22, and CI machines have Node 20.
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"

needs_npx = pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")


@functools.cache
def inspector() -> list[str]:
    """The command that runs the pinned Inspector (``mcp-inspector``, as npx installs it), found through npx once."""
    done = subprocess.run(
        ["npx", "-y", "-p", INSPECTOR, "-c", "command -v mcp-inspector"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    return [done.stdout.strip()]
