"""Streaming: an agent's answer arrives as model.delta events while the model writes it."""

import anyio

from orchestrator import Manager


async def main() -> None:
    manager = Manager(paths=["tools"])
    pieces = []
    async with manager.events.stream() as events:  # every event while the block is open
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                async for event in events:
                    if event.kind == "model.delta" and event.data.get("text"):
                        pieces.append(event.data["text"])
                        print(f"delta {len(pieces):>2}: {event.data['text']!r}")
                    elif event.kind == "model.response":
                        print(f"response: {event.data['streamed']} deltas, usage {event.data['usage']}")
                    elif event.kind == "invoke.end" and event.depth == 0:
                        break  # the run is over (events are buffered: none is missed)

            group.start_soon(watch)
            answer = await manager.invoke("haiku", {"topic": "a late build"})
    assert "".join(pieces) == answer  # the deltas are the answer, piece by piece
    print(f"answer: {answer}")


if __name__ == "__main__":
    anyio.run(main)
