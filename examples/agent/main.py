"""An agent: a markdown tool answered by a model that calls a python tool, with events."""

import anyio

from orchestrator import Manager


def show(event):
    if event.kind in ("model.request", "tool.start", "tool.end"):
        extra = event.data.get("call") or ""
        print(f"  [{event.kind:<13}] {event.tool} iteration {event.iteration} {extra}".rstrip())


async def main() -> None:
    manager = Manager(paths=["tools"], on_event=show)
    answer = await manager.invoke("forecast", {"cities": ["Paris", "Oslo"]})
    print(answer)


if __name__ == "__main__":
    anyio.run(main)
