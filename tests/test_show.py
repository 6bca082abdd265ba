"""show that always explains (issue 12): cycles, private keys, the prompt, and each entry's real phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orchestrator import Manager

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"

CYCLE = """
---
metadata:
  a: {}
  b: {}
  tone: dry
  $private: [tone]
  $order:
    a: {after: [b]}
    b: {after: [a]}
---
Hello {{ args.name }}, {{ meta.tone }}.
"""


def show(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_show_explains_everything_it_can_despite_an_order_cycle(write, tmp_path):
    write("tools/a.py", PASS)
    write("tools/b.py", PASS)
    write("tools/g.md", CYCLE)
    done = show("g", '{"name": "Ada"}', cwd=tmp_path)
    assert done.returncode == 1
    assert "CANNOT BE SORTED, $order forms a cycle: a -> b -> a" in done.stdout
    assert "tone" in done.stdout and "$private     tone" in done.stdout
    assert "prompt (rendered with ARGS)" in done.stdout and "Hello Ada, dry." in done.stdout
    assert done.stderr.strip() == "error: OrderCycleError: $order constraints form a cycle: a -> b -> a (tool 'g')"
    data = json.loads(show("g", "--json", cwd=tmp_path).stdout)
    assert data["cycle"] == ["a", "b"] and {e["name"] for e in data["chain"]} >= {"a", "b", "execute"}
    assert data["prompt"] == "Hello {{ args.name }}, {{ meta.tone }}." and data["rendered"] is False
    assert data["annotations"]["$private"] == ["tone"]


def test_explain_gives_each_entry_its_real_phase(write, tools):
    write("tools/guard.py", PASS)
    write("tools/audit.py", PASS)
    write(
        "tools/page.md",
        "---\nmetadata:\n  guard: {}\n  audit: {}\n  $order:\n"
        "    guard: {after: [$pre-execute], before: [execute]}\n    audit: {after: [guard]}\n---\nx\n",
    )
    chain = {entry.name: entry for entry in Manager([tools]).explain("page").chain}
    assert chain["guard"].phase == "$pre-execute"
    assert chain["audit"].phase == "$pre-execute"  # after an entry of $pre-execute, not $configure
    assert chain["validate-args"].phase == "$post-configure"
