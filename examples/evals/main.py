"""Score a prompt on a dataset with `toolcascade eval`: the tool as written beside two variants, judged by a tool."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from orchestrator.runlog import RunLog

with tempfile.TemporaryDirectory() as tmp:
    log, report = Path(tmp) / "runs.db", Path(tmp) / "report.json"
    env = {**os.environ, "TOOLCASCADE_RUNLOG": str(log), "NO_COLOR": "1"}
    command = [
        *(sys.executable, "-m", "orchestrator", "eval", "sentiment", "--min-score", "0.8"),
        *("--variant", "house=", "--variant", "cheap=--authority cheap.md", "--variant", "next=--path next"),
        *("--output", str(report)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    # Piped, the table is tab-separated rows; its seconds row differs from run to run and is left out here.
    print("\n".join(line for line in done.stdout.splitlines() if not line.startswith("seconds")))
    print(done.stderr.strip())
    print("exit status:", done.returncode)

    written = json.loads(report.read_text())
    print("report:", {v["name"]: round(v["score"], 2) for v in written["variants"]})
    tools = [run.tool for run in RunLog(log).runs(None)]
    print("run log:", tools.count("sentiment"), "sentiment runs,", tools.count("judge"), "judge runs")

    # The same tool under the house model again, compared with that report: no variant scores less, exit 0.
    again = [*command[:5], "--variant", "house=", "--variant", "next=--path next", "--baseline", str(report)]
    done = subprocess.run(again, capture_output=True, text=True, timeout=120, env=env)
    print("against the baseline: exit status", done.returncode)
