"""Callers change one call's middleware with $middleware and $context: add, override, remove; a $locked entry holds."""

import anyio

from orchestrator import Manager, SecurityError


async def main() -> None:
    manager = Manager(paths=["tools"])
    text = {"text": "Rain tomorrow"}
    calls = {
        "as written": {},
        "remove upper": {"$middleware": {"upper": {"remove": True}}},
        "override upper's args": {"$middleware": {"upper": {"args": {"suffix": " (updated)"}}}},
        "add exclaim": {"$middleware": {"exclaim": {"args": {"times": 3}, "after": ["stamp"], "before": ["upper"]}}},
        "the same through $context": {
            "$context": {
                "locals": {"middleware": {"exclaim": {"args": {"times": 3}, "after": ["stamp"], "before": ["upper"]}}}
            }
        },
        "a list of specs": {"$middleware": [{"name": "upper", "remove": True}, {"name": "exclaim"}]},
    }
    for label, options in calls.items():
        print(f"{label + ':':<28} {await manager.invoke('news/headline', {**text, **options})}")

    for spec in ({"remove": True}, {"args": {"text": "not checked"}}):
        try:
            await manager.invoke("news/headline", {**text, "$middleware": {"stamp": spec}})
        except SecurityError as error:
            print(f"stamp {spec}: {type(error).__name__}: {error}")

    chain = manager.explain(
        "news/headline", text, middleware={"exclaim": {"after": ["stamp"], "before": ["upper"]}}
    ).chain
    print("chain with exclaim added:", " -> ".join(entry.name for entry in chain))


if __name__ == "__main__":
    anyio.run(main)
