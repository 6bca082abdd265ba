"""A stray ``$order`` name warns once per Manager, at the file that wrote it (issue 25, point 10)."""

from __future__ import annotations

import os
import subprocess
import sys

from orchestrator import Manager

WRAP = "frontmatter = {'role': 'middleware'}\nasync def main(ctx):\n    return await ctx.target.manager.next()\n"
GHOST = "---\nmetadata:\n  $order:\n    ghost: {before: [execute]}\n---\n"


def folder(write) -> None:
    write("tools/AUTHORITY.md", GHOST)
    write("tools/wrap.py", WRAP)
    for name in ("a", "b"):
        write(f"tools/{name}.md", "---\nmetadata:\n  wrap: {}\n---\n" + name + "\n")


def test_an_authoritys_stray_order_name_warns_once_per_manager_at_the_authority(tools, write, caplog):
    folder(write)
    manager = Manager([tools])
    with caplog.at_level("WARNING", logger="orchestrator"):
        assert manager.invoke_sync("a") == "a"  # plans a and its middleware wrap, both under the authority
        assert manager.invoke_sync("b") == "b"
    warned = [r.getMessage() for r in caplog.records if "ghost" in r.getMessage()]
    assert warned == [
        f"{tools / 'AUTHORITY.md'}:3: $order of 'ghost' names 'ghost', which is neither a key, a tool nor a phase: "
        "the constraint is ignored"
    ]


def test_cli_run_prints_the_stray_order_warning_once_relative_to_the_current_folder(tools, write):
    folder(write)
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "a"],
        cwd=tools.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "a\n")
    assert done.stderr == (
        "tools/AUTHORITY.md:3: $order of 'ghost' names 'ghost', which is neither a key, a tool nor a phase: "
        "the constraint is ignored\n"
    )
