"""Error handlers as an onion: the inner one recovers a LookupError, the outer one logs and re-raises."""

import logging
import sys

import anyio

from orchestrator import Manager


async def main() -> None:
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="  log: %(message)s")
    manager = Manager(paths=["tools"])
    for item in ("tea", "unicorn", "coffee"):
        print(f"price {item}:")
        try:
            print("  ->", await manager.invoke("price", {"item": item}))
        except ConnectionError as error:  # a tool's own exception reaches the caller as it is
            print(f"  -> the caller gets {type(error).__name__}: {error}")

    explanation = manager.explain("price", {"item": "tea"})
    print("chain:", " -> ".join(entry.name for entry in explanation.chain))


if __name__ == "__main__":
    anyio.run(main)
