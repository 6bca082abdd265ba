"""Human approval of an agent's tool calls: approve, edit, deny, and suspend then resume with no approver."""

import tempfile
from pathlib import Path

import anyio

from orchestrator import Manager
from orchestrator.errors import Interrupted


def show(event):
    if event.kind == "approval.decision":  # args: what the call runs with (an edit's)
        data = event.data
        reason = f" ({data['reason']})" if data["reason"] else ""
        print(f"  {data['by']}: {data['action']} {event.tool} {data['args']}{reason}")
    elif event.kind == "tool.end" and event.data["error"]:
        print(f"  {event.data['call']} refused: {event.data['error'].split(': ', 2)[-1].split(' (tool ')[0]}")
    elif event.kind == "tool.end" and event.data.get("held"):
        print(f"  {event.data['call']} is held")


def approve(request):
    print(f"  asked about {request['tool']} by {request['agent']}: {request['reason']}")
    return "approve"


def edit(request):
    return {"action": "edit", "args": {**request["args"], "subject": "Lunch at one?"}}


async def deny(request):  # approvers may be async too
    return {"action": "deny", "reason": "not today"}


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        sessions = Path(folder) / "sessions.db"  # where a suspended run waits (SQLite)
        for approver in (approve, edit, deny):
            print(f"{approver.__name__}:")
            manager = Manager(paths=["tools"], approver=approver, on_event=show, sessions=sessions)
            print(" ", await manager.invoke("assistant", {"who": "the team"}))

        print("nobody to ask:")
        manager = Manager(paths=["tools"], on_event=show, sessions=sessions)
        try:
            await manager.invoke("assistant", {"who": "the team"})
        except Interrupted as stopped:
            print(f"  suspended, waiting for a decision on {stopped.request['tool']}")
            later = Manager(paths=["tools"], on_event=show, sessions=sessions)  # say, another process
            decision = {"action": "edit", "args": {**stopped.request["args"], "to": "ada@example.com"}}
            print(" ", await later.resume(stopped.token, decision))


if __name__ == "__main__":
    anyio.run(main)
