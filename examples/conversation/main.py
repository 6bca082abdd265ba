"""A conversation kept in a session: each call continues it, a held call pauses it, and it resumes later."""

import tempfile
from pathlib import Path

import anyio

from orchestrator import Manager
from orchestrator.errors import Interrupted

LESSON = {"session": "lesson-1"}  # the conversation these calls continue


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "sessions.db"  # one SQLite file; Manager(sessions=None) uses ~/.local/state
        manager = Manager(paths=["tools"], sessions=store)
        for line in ("What does ephemeral mean?", "Use it in a sentence."):
            print(f"you:   {line}")
            print(f"tutor: {await manager.invoke('tutor', {'line': line}, context=LESSON)}")

        print("you:   Send that sentence to my teacher.")
        try:
            await manager.invoke("tutor", {"line": "Send that sentence to my teacher."}, context=LESSON)
        except Interrupted as paused:  # nobody to approve here: the run is saved under a token
            print(f"paused: {paused.request['tool']} waits for approval")
            token = paused.token

        later = Manager(paths=["tools"], sessions=store)  # say, another process, after someone approved
        print(f"tutor: {await later.resume(token, 'approve')}")

        info = await later.sessions.info("lesson-1")
        print(f"session {info.id}: {info.messages} messages, last by {info.agent}")
        for message in await later.sessions.messages("lesson-1"):
            calls = [call["name"] for call in message.get("tool_calls") or []]
            print(f"  {message['role']:<9} {message['content'] or 'calls ' + ', '.join(calls)}")


if __name__ == "__main__":
    anyio.run(main)
