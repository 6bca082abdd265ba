"""The quick start: a markdown tool, a python middleware, and a caller who removes it."""

import anyio

from orchestrator import ArgsValidationError, Manager


async def main() -> None:
    manager = Manager(paths=["tools"])

    print(await manager.invoke("greet", {"name": "Ada"}))
    print(await manager.invoke("greet", {"name": "Ada", "$middleware": {"shout": {"remove": True}}}))

    explanation = manager.explain("greet", {"name": "Ada"})
    print("\nWhy greet runs the way it does:")
    for key in explanation.keys:
        print(f"  {key.key:<22} {key.verdict:<10} from {key.level:<8} {key.reason}")
    print("  chain: " + " -> ".join(entry.name for entry in explanation.chain))

    try:
        await manager.invoke("greet", {"name": 42})
    except ArgsValidationError as error:
        print(f"\nBad args are refused: {error}")


if __name__ == "__main__":
    anyio.run(main)
