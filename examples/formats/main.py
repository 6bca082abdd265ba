"""Claude Code agents, commands and skills beside our own tools, in one folder, run offline."""

import json
import os
from pathlib import Path

from orchestrator import Manager

HERE = Path(__file__).resolve().parent
# Point Claude Code's model alias 'sonnet' at the offline scripted model (see reviewer.replies.yaml).
os.environ["TOOLCASCADE_MODEL_ALIASES"] = json.dumps(
    {"sonnet": {"provider": "scripted", "file": str(HERE / "reviewer.replies.yaml")}}
)

manager = Manager(paths=["project/tools", "project"])

listed = set()
for info in manager.list_tools():  # each file once (project/tools is also inside project)
    tool = manager.find_tool(info.ref)
    if tool.format in (None, "claude-agent", "claude-command", "claude-skill") and info.path not in listed:
        listed.add(info.path)
        print(f"{info.ref:20} {tool.format or 'ours':15} {info.description}")

print(manager.invoke_sync("git:commit-message", {"arguments": "docs explain the formats"}))
print(manager.invoke_sync("style-guide"))
print(manager.invoke_sync("reviewer", {"prompt": "Review: toolcascade runs the markdown you already have"}))

explained = manager.explain("reviewer", {"prompt": "x"})
# word-count is ours; Read and Grep are Claude Code's own tools, which toolcascade runs as built-ins.
print("offered to the model:", ", ".join(manager.find_tool("reviewer").metadata["tools"]))
for mapped in explained.mapping:
    print(f"  {mapped['source']} -> {mapped['target']}: {mapped['note'] or 'as is'}")
