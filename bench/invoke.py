"""Invoke benchmarks: the default pipeline, and the cost of each extra middleware entry.

Run with `make bench`. Times are per invoke, medians of several rounds; the
baseline (a bare async function call on the same loop) is measured in the
same run, so ratios compare across noisy machines.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from orchestrator import Manager

PASS = "async def main(ctx):\n    return await ctx.target.manager.next()\n"
LEAF = "frontmatter = {'metadata': {'$inherit': False}}\n" + PASS


def write_tools(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "noop.py").write_text("def main(ctx):\n    return 1\n")
    (root / "page.md").write_text(
        "---\nmetadata:\n  params: {type: object, properties: {name: {type: string}}}\n---\nHello, {{ args.name }}!\n"
    )
    for i in range(20):
        (root / f"pass{i}.py").write_text(PASS)
        (root / f"leaf{i}.py").write_text(LEAF)


async def per_call(call, n: int, rounds: int = 5) -> float:
    for _ in range(min(n, 200)):
        await call()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            await call()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tools = Path(folder) / "tools"
        write_tools(tools)
        manager = Manager([tools])

        async def bare() -> int:
            return 1

        baseline = await per_call(bare, 20000)
        plain = await per_call(lambda: manager.invoke("noop"), 2000)
        page = await per_call(lambda: manager.invoke("page", {"name": "Ada"}), 2000)
        frozen = Manager([tools], watch_builtins=False)
        installed = await per_call(lambda: frozen.invoke("noop"), 2000)
        rows = [("bare async call (baseline)", baseline, None), ("python tool, default pipeline", plain, None)]
        rows.append(("  same, built-ins not watched (installed)", installed, None))
        rows.append(("markdown tool with params + template", page, None))
        for kind in ("leaf", "pass"):
            for count in (5, 20):
                mw = {f"{kind}{i}": {} for i in range(count)}
                took = await per_call(lambda mw=mw: manager.invoke("noop", middleware=mw), 500)
                rows.append((f"+{count} {kind} middleware", took, (took - plain) / count))
    print(f"python {sys.version.split()[0]}, anyio backend asyncio")
    print(f"{'case':<40} {'us/invoke':>10} {'x baseline':>11} {'us/extra entry':>15}")
    for name, took, extra in rows:
        per = f"{extra:15.1f}" if extra is not None else " " * 15
        print(f"{name:<40} {took:10.1f} {took / baseline:11.0f} {per}")
    print("leaf: a pass-through python middleware with `$inherit: false` (no pipeline of its own);")
    print("pass: the same middleware under the default authority (trust, validate-args, execute, validate-returns).")


if __name__ == "__main__":
    anyio.run(main)
