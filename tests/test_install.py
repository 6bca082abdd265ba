"""A plain (non-editable) install into a fresh venv ships the built-in tools and authorities."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_install_into_a_fresh_venv_finds_builtins(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # This interpreter's pip builds the wheel and installs it into the fresh venv;
    # the dependencies are borrowed from the test environment through PYTHONPATH.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(ROOT)],
        check=True,
        capture_output=True,
    )
    code = (
        "import orchestrator, pathlib;"
        "from orchestrator import Manager;"
        "m = Manager();"
        "print(pathlib.Path(orchestrator.__file__).parent);"
        "print(m.find_authority(m.find_tool('execute')).path);"
        "print(m.find_tool('validate-args').path);"
        "print(m.invoke_sync('execute') is None)"
    )
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    package, authority, tool, ran = out.stdout.split()
    assert Path(package).is_relative_to(venv)
    assert Path(authority) == Path(package) / "builtin" / "authorities" / "default.md"
    assert Path(tool) == Path(package) / "builtin" / "tools" / "validate-args.py"
    assert ran == "True"
