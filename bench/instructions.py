"""Instructions per invoke, counted by valgrind's callgrind: repeatable on a noisy machine.

Runs the same script with N and 5N invocations and reports the difference
per invocation, so start-up and import costs cancel out. Slow (valgrind
runs Python about 50x slower), so it is not part of `make bench`:

    .venv/bin/python bench/instructions.py
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """
import sys, anyio
from orchestrator import Manager
n, watch = int(sys.argv[1]), sys.argv[2] == "watch"
manager = Manager([sys.argv[3]], watch_builtins=watch)
async def main():
    for _ in range(n):
        await manager.invoke("noop")
anyio.run(main)
"""


def instructions(folder: Path, n: int, mode: str) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={folder / 'cg.out'}",
            sys.executable,
            "-c",
            SCRIPT,
            str(n),
            mode,
            str(folder / "tools"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))  # type: ignore[union-attr]


def main() -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "tools").mkdir()
        (folder / "tools" / "noop.py").write_text("def main(ctx):\n    return 1\n")
        for mode in ("watch", "frozen"):
            low, high = instructions(folder, 50, mode), instructions(folder, 250, mode)
            print(
                f"python tool, default pipeline, built-ins {mode:<6}: {(high - low) / 200:>10,.0f} instructions per invoke"
            )


if __name__ == "__main__":
    main()
