"""Authorities: nested AUTHORITY.md files, merge policies, private keys, $inherit and a directive, explained key by key."""

import anyio

from orchestrator import Manager


async def main() -> None:
    manager = Manager(paths=["tools"])
    audit: dict = {}
    args = {"customer": "Ada", "issue": "a late parcel"}
    print(await manager.invoke("support/reply", args, context={"nonlocals": audit}))
    print("\naudit:", ", ".join(audit["audit"]))

    explanation = manager.explain("support/reply", args)
    print("\nlevels:", " -> ".join(f"{name} ({kind})" for name, kind in explanation.levels))
    for name in ("tone", "tags", "greeting", "max-length", "audit"):
        key = explanation.key(name)
        print(f"  {name:<11} = {key.value!r:<30} set by {key.level} via {key.policy}; {key.verdict}: {key.reason}")
    print(
        "  internal-note reaches only tools directly under company:",
        "internal-note" not in {k.key for k in explanation.keys},
    )
    print("chain:", " -> ".join(entry.name for entry in explanation.chain))


if __name__ == "__main__":
    anyio.run(main)
