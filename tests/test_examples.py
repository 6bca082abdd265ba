"""SPEC section 9 verbatim, every example under examples/ runs and prints its expected.txt, and `make demo` works.

An example whose README runs ``$ python main.py`` runs there (tests/test_docs.py checks its expected.txt);
the others run here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from samples import GREET, SHOUT
from test_docs import console_commands, parse_blocks

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


def runs_in_its_readme(folder: Path) -> bool:
    """Whether the example's README runs ``$ python main.py``: tests/test_docs.py then checks its expected.txt."""
    readme = folder / "README.md"
    blocks = parse_blocks(readme.read_text(encoding="utf-8")) if readme.is_file() else []
    runnable = [block for block in blocks if block.language == "console" and block.skip is None]
    return any(command.strip() == "python main.py" for block in runnable for command, _, _ in console_commands(block))


EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/main.py"))


@pytest.mark.parametrize("example", [name for name in EXAMPLES if not runs_in_its_readme(ROOT / "examples" / name)])
def test_example_runs(example, tmp_path):
    # An example whose README runs main.py is run once, by tests/test_docs.py, which checks expected.txt exactly.
    folder = ROOT / "examples" / example
    # A home of its own: servers the MCP client starts get HOME but not TOOLCASCADE_CACHE, and would otherwise
    # keep their index in the real ~/.cache.
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "main.py"], cwd=folder, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    expected = (folder / "expected.txt").read_text()
    assert done.stdout == expected


@pytest.mark.slow
def test_make_demo_runs_the_quickstart_then_shows_greet_then_the_agent(tmp_path):
    # A fresh stamp stands for an installed .venv: the demo uses this interpreter's bin and installs nothing.
    stamp = tmp_path / "installed"
    stamp.touch()
    os.utime(stamp, ((ROOT / "pyproject.toml").stat().st_mtime + 1,) * 2)
    done = subprocess.run(
        ["make", "--no-print-directory", "demo", f"BIN={Path(sys.executable).parent}", f"DEMO_STAMP={stamp}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160"},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    quickstart = (ROOT / "examples/quickstart/expected.txt").read_text()
    agent = (ROOT / "examples/agent/expected.txt").read_text()
    assert out.index(quickstart) < out.index("tool         greet (markdown)") < out.index("chain (run order)")
    assert out.index("chain (run order)") < out.index(agent)
    assert "HELLO, ADA!!!\n\n--- examples/quickstart: toolcascade show greet" in out  # the CLI run, before show
    assert out.index(agent) < out.index("bin/activate")  # last: how to get toolcascade on PATH


@pytest.mark.anyio
async def test_the_readme_conversation_snippet_run_twice_says_the_session_held_the_first_runs_turns(tmp_path):
    # issue 25, point 10: the README says that running its conversation snippet again on the same lesson.db runs
    # out of script and says why. The second run must not pause for a held send-note call nobody asked for.
    import shutil

    from orchestrator.errors import Interrupted, ModelError

    folder = shutil.copytree(ROOT / "examples" / "conversation", tmp_path / "conversation")
    lesson = {"session": "readme"}

    async def snippet() -> list[str]:
        manager = Manager(paths=[folder / "tools"], sessions=folder / "lesson.db")
        try:
            first = await manager.invoke("tutor", {"line": "What does ephemeral mean?"}, context=lesson)
            second = await manager.invoke("tutor", {"line": "Use it in a sentence."}, context=lesson)
        finally:
            manager.close()
        return [first, second]

    assert await snippet() == ["Ephemeral means lasting a very short time.", "Fame on the internet is often ephemeral."]
    with pytest.raises(ModelError) as again:
        await snippet()
    assert not isinstance(again.value, Interrupted)
    assert "session 'readme' already held 6 messages from earlier runs" in str(again.value)
    assert "sessions delete readme" in str(again.value)
