"""The README's examples run as written (issue 12; the docs issue extends this to every example README).

Every fenced ``python`` block runs, in order, in one namespace, in a copy of
``examples/quickstart`` (top-level ``await`` allowed, as in a notebook); a
``print(...)  # text`` line must print that text. Every indented
``toolcascade ...`` command line runs from the same folder and must succeed;
one whose comment is output (``# HELLO, ADA!!!``, capitals) must print it.
Lines that cannot run here say why in ``SKIPPED``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCED = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
COMMAND = re.compile(r"^    ((?:echo .*\| )?toolcascade .*?)(?:\s+#\s*(.*))?$", re.MULTILINE)
OUTPUT = re.compile(r"^[A-Z][A-Z ,.!]*$")  # a comment in capitals is what the command prints
SKIPPED = {
    "--http": "serves HTTP on a fixed port until stopped: tests/reliability/test_mcp_load.py runs it for real",
}


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    folder = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", folder)
    return folder


def test_readme_python_blocks_run_and_print_what_they_say(quickstart, monkeypatch):
    blocks = FENCED.findall(README)
    assert len(blocks) >= 4
    monkeypatch.chdir(quickstart)
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        expected = [m.group(1) for m in re.finditer(r"^print\(.*?\)\s+#\s*(.+)$", block, re.MULTILINE)]
        code = compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            awaited = eval(code, namespace)  # noqa: S307 - the README's own code
            if awaited is not None:
                asyncio.run(awaited)
        assert out.getvalue().splitlines() == expected, block
    assert namespace["result"] == "HELLO, ADA!!!"  # the await form, in a notebook-like namespace


@pytest.mark.parametrize(("command", "comment"), sorted(set(COMMAND.findall(README))))
def test_readme_commands_run_from_examples_quickstart(quickstart, command, comment):
    for word, why in SKIPPED.items():
        if word in command.split():
            pytest.skip(why)
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    # stdin is closed: a stdio MCP server (serve) ends when its client does
    done = subprocess.run(
        command,
        shell=True,
        capture_output=True,
        text=True,
        cwd=quickstart,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (command, done.stderr)
    if comment and OUTPUT.match(comment):
        assert done.stdout.strip() == comment, command
