"""A plain (non-editable) install ships the built-in tools and authorities inside the package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_install_finds_builtins(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
        check=True,
        capture_output=True,
    )
    code = (
        "import orchestrator, pathlib;"
        "from orchestrator import Manager;"
        "m = Manager();"
        "print(pathlib.Path(orchestrator.__file__).parent);"
        "print(m.find_authority(m.find_tool('execute')).path);"
        "print(m.find_tool('validate-args').path)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    package, authority, tool = out.stdout.split()
    assert Path(package).is_relative_to(target)
    assert Path(authority) == Path(package) / "builtin" / "authorities" / "default.md"
    assert Path(tool) == Path(package) / "builtin" / "tools" / "validate-args.py"
