"""Run a tool over a JSON Lines file with `toolcascade batch`, resume it, and delegate a tool to an executor."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from orchestrator import Manager

# delegate's engine form: the rest of report's pipeline runs as a unit on an executor
# (in process here; `engine: ray` sends it to a Ray cluster).
print(Manager(["tools"]).invoke_sync("report", {"title": "weekly"}))

with tempfile.TemporaryDirectory() as tmp:
    results = Path(tmp) / "results.jsonl"
    command = [sys.executable, "-m", "orchestrator", "batch", "count", "args.jsonl", "-o", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    print("exit status:", done.returncode, "|", done.stderr.strip().split(" -> ")[0])
    for line in results.read_text().splitlines():
        print(line)

    # Interrupted after two lines, the third torn in half: a second run finishes the rest.
    kept = results.read_text().splitlines()[:3]
    results.write_text(kept[0] + "\n" + kept[1] + "\n" + kept[2][:10])
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    print("resumed:", done.stderr.strip().split(" -> ")[0])
    print("lines:", [json.loads(line)["line"] for line in results.read_text().splitlines()])
