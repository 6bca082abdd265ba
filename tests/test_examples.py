"""SPEC section 9 verbatim, and every example under examples/ runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from samples import GREET, SHOUT

from orchestrator import Manager

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.anyio
async def test_spec_section_9_at_a_glance(tmp_path, monkeypatch):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/greet.md").write_text(GREET)
    (tmp_path / "tools/shout.py").write_text(SHOUT)
    monkeypatch.chdir(tmp_path)
    manager = Manager(paths=["tools"])
    assert await manager.invoke("greet", {"name": "Ada"}) == "HELLO, ADA!!!"
    assert (
        await manager.invoke(
            "greet", {"name": "Ada", "$context": {"locals": {"middleware": {"shout": {"remove": True}}}}}
        )
        == "Hello, Ada!"
    )
    assert await manager.invoke("greet", {"name": "Ada", "$middleware": {"shout": {"remove": True}}}) == "Hello, Ada!"


@pytest.mark.parametrize("example", sorted(p.parent.name for p in (ROOT / "examples").glob("*/main.py")))
def test_example_runs(example):
    folder = ROOT / "examples" / example
    done = subprocess.run([sys.executable, "main.py"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    expected = (folder / "expected.txt").read_text()
    assert done.stdout == expected
