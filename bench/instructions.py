"""Per-call costs in instructions, counted by valgrind's callgrind: repeatable on a noisy machine.

One valgrind run counts every case. The script warms each case up (its
first calls load and plan), turns the cyclic garbage collector off, then
runs each case N times and 5N times, calling ``os.getppid()`` between the
phases (and around each case's set-up: a collection, the collector on or off): callgrind's ``--dump-before=os_getppid`` writes the instructions of
each phase to its own file, and a case's per-call figure is the difference
between its 5N and N phases over 4N, so the loop and the marker cancel. The
run is deterministic: a fixed hash seed, no file watcher, no on-disk index,
and ``Limits(stat_interval=1e9)`` so no stat of a tool file falls due while
calls are counted.

The cases are issue 26's ("Speed must not regress"): W1 (the trivial async
tool, built-ins watched as in a source checkout and not, as installed), a
tool with one declared middleware, W2 (the slope per declared pass-through
middleware, 1 -> 1 + STEPS entries), W3 (the markdown page) beside its parts
counted alone (its renders, its validation, and W1 plus one W2 per further
invocation, as ``bench.invoke`` times them), and the per-entry cost of
chains of 100 and 1,000 entries, with the collector off and, as users run
them, on (a deep chain's suspended frames are walked by each collection). MAF, counted in a run of its own, is the
baseline: invoking one function tool, and per function middleware (the
same slope). Each count is compared with the same
script's count at ``REFERENCE_COMMIT`` (issue 26: none may grow by more
than 5%).

    make bench-instructions        # or: .venv/bin/python -m bench.instructions [--quick] [--engine DIR]

``--quick`` leaves out the 1,000-entry chain (loading its tools under
valgrind is most of the run). ``--engine DIR`` counts the engine
(``orchestrator/``, ``tools/``, ``authorities/``) in DIR, e.g. a ``git
archive`` of another commit, with this checkout's bench.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import baselines
from .invoke import LONG, LONGEST, write_stack
from .timing import Target, targets_markdown
from .toolsets import write_invoke_tools

STEPS = 10
CALLS = 20  # N: each case runs N, then 5N calls (a chain of LONG entries a fifth of that, of LONGEST one)
ROOT = Path(__file__).resolve().parent.parent

# argv: the tools folder, then a JSON list of [case key, kind, ref or None, N, collector on]
TOOLCASCADE = """
import gc, json, os, sys, anyio
from orchestrator import Limits, Manager
from orchestrator.errors import ArgsValidationError
from orchestrator.interpolate import render
from orchestrator.schema import check
folder, cases = sys.argv[1], json.loads(sys.argv[2])
limits = Limits(stat_interval=1e9)
watched = Manager([folder], watch_builtins=True, limits=limits)
installed = Manager([folder], watch_builtins=False, limits=limits)
page_args = {"name": "Ada"}
meta = {"greeting": "Hello, Ada", "city": "Paris"}
schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
async def renders():
    render("Hello, {{ args.name }}", {"args": page_args})
    render("{{ meta.greeting }} from {{ meta.city }}!\\nToday: [today]\\n\\n[footer]\\n", {"meta": meta})
async def validation():
    check(schema, page_args, ArgsValidationError, "page")
def call_of(kind, ref):
    if kind == "renders":
        return renders
    if kind == "validation":
        return validation
    manager = installed if kind == "installed" else watched
    args = page_args if ref == "page" else None
    return lambda: manager.invoke(ref, args)
plan = [(call_of(kind, ref), n, collect) for _, kind, ref, n, collect in cases]
async def main():
    for call, _, _ in plan:
        await call()
        await call()
    for call, n, collect in plan:
        os.getppid()
        gc.collect()
        gc.enable() if collect else gc.disable()
        os.getppid()
        for _ in range(n):
            await call()
        os.getppid()
        for _ in range(5 * n):
            await call()
    os.getppid()
anyio.run(main)
"""

# argv: N, then a JSON list of middleware counts (each one MAF pipeline of that many pass-through middleware)
MAF = """
import gc, json, os, sys, anyio
from bench.baselines import maf_call
n, calls = int(sys.argv[1]), [maf_call(count) for count in json.loads(sys.argv[2])]
async def main():
    for call in calls:
        await call()
        await call()
    for call in calls:
        os.getppid()
        gc.collect()
        gc.disable()
        os.getppid()
        for _ in range(n):
            await call()
        os.getppid()
        for _ in range(5 * n):
            await call()
    os.getppid()
anyio.run(main)
"""

# This script's counts at ae99e01 (the commit issue 26 measures against): `python -m bench.instructions
# --engine DIR` on `git archive ae99e01 orchestrator tools authorities`.
REFERENCE_COMMIT = "ae99e01"
GUARDED = ("w1", "w1-installed", "one-middleware", "w2", "w3")  # the counts issue 26 says must not grow
REFERENCE: dict[str, float] = {  # measured 2026-11-26; a rerun repeats each within 0.1%
    "w1": 49_341,
    "w1-installed": 49_523,
    "one-middleware": 85_950,
    "w2": 20_495,
    "w3": 595_752,
    "renders": 77_712,
    "validation": 72_058,
    "w3-parts": 281_093,
    "per-entry-100": 20_741,
    "per-entry-100-gc": 20_547,
    "per-entry-1000": 21_588,
    "per-entry-1000-gc": 25_545,
}


@dataclass(frozen=True, slots=True)
class Count:
    """Instructions per call of one case; ``key`` names it in ``REFERENCE``."""

    key: str
    case: str
    instructions: float
    note: str = ""

    @property
    def reference(self) -> float | None:
        return REFERENCE.get(self.key)


def phases(script: str, args: Sequence[str], engine: Path | None = None) -> list[int]:
    """Instructions of each phase of ``script`` between two ``os.getppid()`` calls, in order.

    Raises:
        SystemExit: valgrind or the script failed.
    """
    env = {
        **os.environ,
        # The file watcher would start after a second of use, during some phases and not others.
        # The on-disk index would make the built-ins' loading depend on what an earlier run left.
        # A fixed hash seed: with random ones the same count moves by up to ~20% (dict and set layouts).
        "TOOLCASCADE_WATCH": "off",
        "TOOLCASCADE_INDEX": "off",
        "PYTHONHASHSEED": "0",
    }
    if engine is not None:  # the engine from ``engine`` (the cwd of ``-c`` is first on sys.path), bench from here
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="toolcascade-callgrind-") as name:
        out = Path(name) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "--dump-before=os_getppid",
                sys.executable,
                "-c",
                script,
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=engine or ROOT,
            env=env,
        )
        if done.returncode != 0:
            raise SystemExit(f"the callgrind run failed:\n{done.stderr[-3000:]}")
        # out.1 is start-up up to the first marker; out.2 ... each phase after it; out itself what followed.
        dumps = sorted(Path(name).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        totals = []
        for dump in dumps[1:]:
            found = re.search(r"^totals: (\d+)", dump.read_text(), re.MULTILINE)
            if found is None:
                raise SystemExit(f"callgrind wrote no total in {dump.name}")
            totals.append(int(found.group(1)))
    return totals


def per_call(totals: Sequence[int], calls: Sequence[int]) -> list[float]:
    """Instructions per call of each case from its three phases (set-up, N calls, 5N calls): (5N - N) / 4N."""
    return [(totals[3 * i + 2] - totals[3 * i + 1]) / (4 * n) for i, n in enumerate(calls)]


def count(longest: bool = True, engine: Path | None = None) -> list[Count]:
    """Every case's instructions per call (``longest``: also the 1,000-entry chain, minutes more)."""
    with tempfile.TemporaryDirectory(prefix="toolcascade-instructions-") as name:
        tools = write_invoke_tools(Path(name) / "tools", LONGEST if longest else LONG)
        cases: list[tuple[str, str, str | None, int, bool]] = [
            ("w1", "watched", "noop", CALLS, False),
            ("w1-installed", "installed", "noop", CALLS, False),
            ("one-middleware", "watched", write_stack(tools, 1), CALLS, False),
            ("high", "watched", write_stack(tools, 1 + STEPS), CALLS, False),
            ("w3", "watched", "page", CALLS, False),
            ("renders", "renders", None, CALLS, False),
            ("validation", "validation", None, CALLS, False),
            ("chain-100", "watched", write_stack(tools, LONG), CALLS // 5, False),
            ("w1-gc", "watched", "noop", CALLS, True),
            ("chain-100-gc", "watched", write_stack(tools, LONG), CALLS // 5, True),
        ]
        if longest:
            cases.append(("chain-1000", "watched", write_stack(tools, LONGEST), 1, False))
            cases.append(("chain-1000-gc", "watched", write_stack(tools, LONGEST), 1, True))
        totals = phases(TOOLCASCADE, [str(tools), json.dumps(cases)], engine)
        figures = dict(zip([c[0] for c in cases], per_call(totals, [c[3] for c in cases]), strict=True))
        invocations = page_invocations(tools, engine)
    maf = maf_w2 = None
    if baselines.version("agent-framework-core"):
        maf, maf_low, maf_high = per_call(phases(MAF, [str(CALLS), json.dumps([0, 1, 1 + STEPS])], engine), [CALLS] * 3)
        maf_w2 = (maf_high - maf_low) / STEPS
    w1, one = figures["w1"], figures["one-middleware"]
    w2 = (figures["high"] - one) / STEPS
    parts = w1 + (invocations - 1) * w2 + figures["renders"] + figures["validation"]
    at_100 = (figures["chain-100"] - w1) / LONG
    found = [Count("maf", "MAF: FunctionMiddlewarePipeline + FunctionTool.invoke", maf)] if maf else []
    if maf_w2:
        found.append(Count("maf-w2", f"MAF: per function middleware (slope 1 -> {1 + STEPS})", maf_w2))
    versus = (lambda x: f"{x / maf:.2f}x MAF") if maf else (lambda x: "")
    found += [
        Count("w1", "W1: async tool, default pipeline, built-ins watched", w1, versus(w1)),
        Count("w1-installed", "W1: same, built-ins not watched (installed)", figures["w1-installed"]),
        Count("one-middleware", "a tool with 1 declared middleware", one),
        Count(
            "w2",
            f"W2: per declared pass-through middleware (slope 1 -> {1 + STEPS})",
            w2,
            f"{w2 / maf_w2:.2f}x MAF's" if maf_w2 else "",
        ),
        Count("w3", "W3: the markdown page", figures["w3"], f"{figures['w3'] / parts:.2f}x its parts"),
        Count("renders", "  W3 part: its 2 templates rendered", figures["renders"]),
        Count("validation", "  W3 part: its args validated", figures["validation"]),
        Count(
            "w3-parts",
            f"  W3 parts together: W1 + {invocations - 1} x W2 + renders + validation",
            parts,
        ),
        Count("per-entry-100", f"per entry in a chain of {LONG}: ({LONG} entries - W1) / {LONG}", at_100),
    ]
    at_100_gc = (figures["chain-100-gc"] - figures["w1-gc"]) / LONG
    found.append(Count("per-entry-100-gc", f"per entry in a chain of {LONG}, the cyclic collector on", at_100_gc))
    if "chain-1000" in figures:
        at_1000 = (figures["chain-1000"] - w1) / LONGEST
        found.append(
            Count(
                "per-entry-1000",
                f"per entry in a chain of {LONGEST:,}: ({LONGEST:,} entries - W1) / {LONGEST:,}",
                at_1000,
                f"{at_1000 / at_100:.2f}x the per-entry count at {LONG}",
            )
        )
        at_1000_gc = (figures["chain-1000-gc"] - figures["w1-gc"]) / LONGEST
        found.append(
            Count(
                "per-entry-1000-gc",
                f"per entry in a chain of {LONGEST:,}, the cyclic collector on",
                at_1000_gc,
                f"{at_1000_gc / at_100_gc:.2f}x the per-entry count at {LONG}, collector on",
            )
        )
    return found


def page_invocations(tools: Path, engine: Path | None) -> int:
    """How many invocations the page runs (invoke.start events), asked of the engine counted."""
    script = (
        "import sys, anyio\nfrom orchestrator import Manager\nseen = []\n"
        "m = Manager([sys.argv[1]], on_event=lambda e: seen.append(e) if e.kind == 'invoke.start' else None)\n"
        "anyio.run(lambda: m.invoke('page', {'name': 'Ada'}))\nprint(len(seen))\n"
    )
    env = {**os.environ, "TOOLCASCADE_WATCH": "off", "TOOLCASCADE_INDEX": "off"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tools)], capture_output=True, text=True, cwd=engine or ROOT, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"counting the page's invocations failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.strip())


def targets(counts: Sequence[Count]) -> list[Target]:
    """Issue 26's targets in instructions: no count above ``REFERENCE_COMMIT``'s by more than 5%; W3; chains."""
    found: list[Target] = []
    by_key = {c.key: c for c in counts}
    for key in GUARDED:
        if (c := by_key.get(key)) is None:
            continue
        text = f"{c.case}: ≤ 1.05x its count at {REFERENCE_COMMIT}"
        if c.reference is None:
            found.append(Target("callgrind", text, f"{c.instructions:,.0f} (no count at {REFERENCE_COMMIT})", None, 26))
            continue
        ratio = c.instructions / c.reference
        shown = f"{c.instructions:,.0f} vs {c.reference:,.0f}: {ratio:.3f}x"
        found.append(Target("callgrind", text, shown, ratio <= 1.05, 26))
    if "w2" in by_key and "maf-w2" in by_key:
        ratio = by_key["w2"].instructions / by_key["maf-w2"].instructions
        shown = f"{ratio:.2f}x ({by_key['w2'].instructions:,.0f} vs {by_key['maf-w2'].instructions:,.0f})"
        found.append(Target("callgrind", "W2 ≤ 3x MAF's per-middleware cost, in instructions", shown, ratio <= 3, 26))
    if "w3" in by_key and "w3-parts" in by_key:
        ratio = by_key["w3"].instructions / by_key["w3-parts"].instructions
        shown = f"{ratio:.2f}x ({by_key['w3'].instructions:,.0f} vs {by_key['w3-parts'].instructions:,.0f})"
        found.append(Target("callgrind", "W3 ≤ 2x the sum of its parts, in instructions", shown, ratio <= 2, 26))
    for suffix, collector in (("", "off"), ("-gc", "on")):
        low, high = by_key.get(f"per-entry-100{suffix}"), by_key.get(f"per-entry-1000{suffix}")
        if low is None or high is None:
            continue
        ratio = high.instructions / low.instructions
        found.append(
            Target(
                "callgrind",
                f"a chain of {LONGEST:,} ≤ 1.2x {LONGEST:,} x the per-entry count at {LONG} (collector {collector})",
                f"{ratio:.2f}x ({high.instructions:,.0f} vs {low.instructions:,.0f} per entry)",
                ratio <= 1.2,
                26,
            )
        )
    return found


def markdown(counts: Sequence[Count]) -> str:
    """The counts as a markdown table, beside ``REFERENCE``."""
    lines = [
        f"### Instructions per call (callgrind, {CALLS} vs {5 * CALLS} calls; chains fewer)",
        "",
        f"| case | instructions | at {REFERENCE_COMMIT} | change | note |",
        "|---|---:|---:|---:|---|",
    ]
    for c in counts:
        ref = c.reference
        change = f"{(c.instructions / ref - 1) * 100:+.1f}%" if ref else ""
        lines.append(f"| {c.case} | {c.instructions:,.0f} | {f'{ref:,.0f}' if ref else ''} | {change} | {c.note} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"leave out the {LONGEST:,}-entry chain")
    parser.add_argument("--engine", type=Path, help="count the engine in this folder (orchestrator/, tools/, ...)")
    options = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    counts = count(not options.quick, options.engine.resolve() if options.engine else None)
    sys.stdout.write(markdown(counts) + "\n")

    sys.stdout.write(targets_markdown([], 26, targets(counts)))


if __name__ == "__main__":
    main()
