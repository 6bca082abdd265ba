"""W4: ``list`` and ``check`` over a catalog of 10,000 tools, ``import orchestrator``, the first invoke.

``list`` is ``Manager.list_tools()`` (what ``toolcascade list`` prints), in
this process (python modules imported, the OS file cache warm): the first
listing with no on-disk index (a new cache folder each round), then "cold"
on a new Manager with the index the first one wrote, and warm as the same
Manager's second listing. A fresh ``toolcascade list`` process is timed
too, interpreter start and imports included. ``check`` is
``orchestrator.check.check`` on a new Manager (index present). Imports and
the first invoke run in fresh interpreters: ``python -c 'import X'`` minus
``python -c pass``, and the time from ``import orchestrator`` returning to a
first ``invoke_sync`` returning, with a new cache folder (nothing kept) and
with the built-ins' frontmatters kept by an earlier process.

Everything this writes (the catalog, cache folders) lives in a temporary
folder: ``TOOLCASCADE_CACHE`` points there, never at the user's cache. The
catalog's files are aged 60 s (``os.utime``), as a user's tools are older
than the index's 2 s racy window; freshly written files would be listed
right but not written to the index.

    .venv/bin/python -m bench.catalog [--quick]

**CPU seconds of whole processes (issue 24).** ``--cpu`` measures what a
user waits for instead: ``toolcascade list`` (its first run over files it
never saw, with a new ``XDG_CACHE_HOME``), ``list`` again with the output
piped (not a terminal), and ``check`` after them (the index present), each the CPU seconds (user + sys, from
``getrusage(RUSAGE_CHILDREN)``) of one whole ``toolcascade`` process,
interpreter start and imports included, then ``check`` again (the verdict the first kept,
``orchestrator.verdicts``). The catalogue is a realistic one:
10,000 tools in 100 folders, each folder with an ``AUTHORITY.md``, the
markdown tools with a description, ``params`` and a few metadata keys, one
in ten a python tool. Several rounds, medians::

    .venv/bin/python -m bench.catalog --cpu [--rounds 5] [--count 10000 --folders 100] [--w4-catalogue]

``--w4-catalogue`` measures the same processes over W4's lighter catalogue
(``bench.toolsets.write_catalog``: no authorities, two params, no other
metadata), the one the issue's "today" figures were taken on; with an
earlier engine's snapshot (``--package``) it tells how this machine compares
with the one that filed the issue.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator import Manager
from orchestrator.check import check
from orchestrator.searchpath import builtin_folder

from . import baselines
from .timing import Sample, Table, fmt, measure_each, targets_markdown
from .toolsets import write_catalog, write_invoke_tools

FULL = (10_000, 100)
QUICK = (1_000, 10)

FIRST_INVOKE = """
import sys, time
start = time.perf_counter()
import orchestrator
imported = time.perf_counter()
orchestrator.Manager([sys.argv[1]]).invoke_sync("noop")
print(imported - start, time.perf_counter() - imported)
"""


def run_python(code: str, *args: str) -> float:
    """Seconds a fresh interpreter takes to run ``code``, start-up included."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True)
    return time.perf_counter() - start


def import_time(module: str, rounds: int) -> Sample:
    """µs ``import module`` adds to a bare interpreter start: interleaved rounds, median and min of the differences."""
    differences = []
    for _ in range(rounds):
        bare = run_python("pass")
        differences.append((run_python(f"import {module}") - bare) * 1e6)
    return Sample(statistics.median(differences), min(differences), rounds)


def first_invoke(tools: Path, rounds: int, cache: Path | None = None) -> tuple[Sample, Sample]:
    """(import orchestrator, first invoke after it) in µs, each measured inside a fresh interpreter.

    ``cache``: the cache folder every round shares; None, a new one per round (nothing kept).
    """
    imports, invokes = [], []
    for number in range(rounds):
        folder = cache if cache is not None else tools.parent / f"cache-invoke-{number}"
        out = subprocess.run(
            [sys.executable, "-c", FIRST_INVOKE, str(tools)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "TOOLCASCADE_CACHE": str(folder)},
        ).stdout.split()
        imports.append(float(out[0]) * 1e6)
        invokes.append(float(out[1]) * 1e6)
    return (
        Sample(statistics.median(imports), min(imports), rounds),
        Sample(statistics.median(invokes), min(invokes), rounds),
    )


def seconds(call: object) -> float:
    """Seconds one call of ``call()`` takes."""
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - start


def age(root: Path, seconds: float = 60.0) -> None:
    """Set the mtime of every file and folder under ``root`` ``seconds`` into the past."""
    when = time.time() - seconds
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (when, when))
        os.utime(folder, (when, when))


def fresh_list(catalog: Path, cache: Path, *options: str) -> float:
    """Seconds a fresh ``toolcascade list`` process takes over ``catalog`` (start-up and imports included)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "orchestrator", "list", *options, "--path", str(catalog)],
        check=True,
        capture_output=True,
        env={**os.environ, "TOOLCASCADE_CACHE": str(cache)},
    )
    return time.perf_counter() - start


def w4_table(folder: Path, quick: bool) -> Table:
    """W4 with a catalog (and the W1 tools) written under ``folder``; cache folders there too, for its duration."""
    before = os.environ.get("TOOLCASCADE_CACHE")
    try:
        return _w4_table(folder, quick)
    finally:
        if before is None:
            os.environ.pop("TOOLCASCADE_CACHE", None)
        else:
            os.environ["TOOLCASCADE_CACHE"] = before


def _w4_table(folder: Path, quick: bool) -> Table:
    count, groups = QUICK if quick else FULL
    table = Table(f"W4 list / check over {count:,} tools in {groups} folders; imports; first invoke")
    catalog = write_catalog(folder / "catalog", count, groups)
    age(catalog)
    caches = iter(range(1_000))

    def new_cache() -> Path:
        """A new, empty cache folder for this process's next Manager: no index."""
        path = folder / f"cache-{next(caches)}"
        os.environ["TOOLCASCADE_CACHE"] = str(path)
        return path

    new_cache()
    listed = Manager([catalog]).list_tools()
    broken = [info for info in listed if info.error is not None]
    if broken:
        raise SystemExit(f"the generated catalog has broken tools: {broken[0].error}")

    # Seconds per call, so one round each (two for warm): the whole W4 table stays near a minute.
    def unindexed() -> float:
        new_cache()
        return seconds(Manager([catalog]).list_tools)

    first = measure_each(unindexed, 1)
    cold = measure_each(lambda: seconds(Manager([catalog]).list_tools), 1 if quick else 2)
    warm_manager = Manager([catalog])
    warm_manager.list_tools()
    warm = measure_each(lambda: seconds(warm_manager.list_tools), 1 if quick else 2)
    shared = Path(os.environ["TOOLCASCADE_CACHE"])
    fresh_list(catalog, shared)  # the CLI's own index (its options may key another file)
    process = measure_each(lambda: fresh_list(catalog, shared), 1 if quick else 2)
    as_json = measure_each(lambda: fresh_list(catalog, shared, "--json"), 1 if quick else 2)
    problems: list[object] = []
    checked = measure_each(lambda: seconds(lambda: problems.extend(check(Manager([catalog])))), 1)
    table.add("`list`, first listing, no index (new cache folder)", first, "writes the index")
    table.add(
        "`list` cold (new Manager, index present)",
        cold,
        f"{len(listed):,} tools listed (the catalog and visible built-ins)",
        ratios={"no index": cold / first},
    )
    table.add("`list` warm (same Manager, second listing)", warm, "", ratios={"cold": warm / cold})
    table.add("`toolcascade list --json` (fresh process, index present)", as_json, "start-up and imports included")
    table.add("`toolcascade list` (fresh process, index present)", process, "as above, and the rich table printed")
    table.add("`check` (new Manager, index present)", checked, f"{len(problems)} problems found")

    rounds = 3 if quick else 7
    ours = import_time("orchestrator", rounds)
    theirs = import_time("agent_framework", rounds) if baselines.version("agent-framework-core") else None
    table.add("`import agent_framework` (fresh interpreter)", theirs)
    table.add(
        "`import orchestrator` (fresh interpreter)", ours, ratios={"agent_framework": ours / theirs} if theirs else None
    )
    tools = write_invoke_tools(folder / "first", 0)
    invoke_rounds = 3 if quick else 5
    _imported, unkept = first_invoke(tools, invoke_rounds)
    kept_cache = folder / "cache-invoke"
    first_invoke(tools, 1, kept_cache)  # keeps the built-ins' frontmatters
    imported, invoked = first_invoke(tools, invoke_rounds, kept_cache)
    table.add("`import orchestrator`, timed inside the interpreter", imported)
    table.add("first `invoke_sync('noop')` after import, new cache folder", unkept, "parses the built-ins' YAML")
    table.add("first `invoke_sync('noop')` after import (new Manager)", invoked, "built-ins' frontmatters kept")

    if theirs:
        table.target(
            "`import orchestrator` ≤ 1.5x `import agent_framework`", f"{ours / theirs:.2f}x", ours / theirs <= 1.5
        )
    else:
        table.target("`import orchestrator` ≤ 1.5x `import agent_framework`", "MAF not installed", None)
    full = count == FULL[0]
    for text, sample, bound in (
        ("`list` over 10,000 tools ≤ 1.5 s cold", cold, 1.5),
        ("`list` over 10,000 tools ≤ 0.3 s warm", warm, 0.3),
        ("`check` over 10,000 tools ≤ 5 s", checked, 5.0),
    ):
        shown = fmt(sample.median, "µs")
        table.target(
            text,
            shown if full else f"{shown} over {count:,} tools (--quick)",
            sample.median <= bound * 1e6 if full else None,
        )
    table.target("first invoke ≤ 50 ms after import", fmt(invoked.median, "µs"), invoked.median <= 50_000)
    return table


# -- issue 24: CPU seconds of whole processes -------------------------------------

AUTHORITY = """\
---
metadata:
  team: group-{f}
  tags: [group-{f}]
  $merge: {{tags: union}}
  $private: [team]
---
The authority of group {f}.
"""

MARKDOWN = """\
---
description: Tool {t} of group {f}, answering about {{{{ args.topic }}}}.
metadata:
  params:
    type: object
    properties:
      topic: {{type: string, description: What to write about.}}
      depth: {{type: integer, default: 1, minimum: 1}}
    required: [topic]
  tags: [writing, t{t}]
  owner: someone-{f}@example.com
  version: "1.{t}"
---
Write {{{{ args.depth }}}} paragraphs about {{{{ args.topic }}}} for group {f}.
"""

PYTHON = """\
frontmatter = {{
    "description": "Python tool {t} of group {f}.",
    "metadata": {{"params": {{"type": "object", "properties": {{"n": {{"type": "integer"}}}}}}, "tags": ["code"]}},
}}


def main(ctx):
    return ctx.args.get("n", 0) + {t}
"""


def write_trust_catalog(root: Path, count: int, folders: int) -> Path:
    """``count`` realistic tools in ``folders`` folders, each with an ``AUTHORITY.md``; one in ten a python tool.

    Aged 60 s (see ``age``). Written once per folder path: an existing, complete catalogue is reused.
    """
    stamp = root / f".complete-trust-{count}-{folders}"
    if stamp.exists():
        return root
    per = count // folders
    for f in range(folders):
        folder = root / f"group{f:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "AUTHORITY.md").write_text(AUTHORITY.format(f=f))
        for t in range(per):
            if t % 10 == 9:
                (folder / f"tool{t:03d}.py").write_text(PYTHON.format(f=f, t=t))
            else:
                (folder / f"tool{t:03d}.md").write_text(MARKDOWN.format(f=f, t=t))
    age(root)
    stamp.write_text("")
    return root


def snapshot(folder: Path) -> Path:
    """A byte-compiled copy of the ``orchestrator`` package under ``folder``, for ``PYTHONPATH``, laid out as the wheel.

    The index's key holds the signature of every package source file, so an
    edit to the working tree during a run (another engineer's) would make a
    "repeated" list a first one; the copy keeps the code measured fixed.
    """
    import orchestrator

    target = folder / "snapshot"
    shutil.rmtree(target, ignore_errors=True)
    package = Path(orchestrator.__file__).parent
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(package, target / "orchestrator", ignore=skip)
    for name in ("tools", "authorities"):  # the built-ins, where the wheel puts them
        shutil.copytree(builtin_folder(name), target / "orchestrator" / "builtin" / name, ignore=skip)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=True)
    return target


FLOOR = """
import os, sys
import yaml

def frontmatter(text):
    if text.startswith("---"):
        end = text.find("\\n---", 3)
        if end >= 0:
            return text[3:end]
    return ""

for root, folders, files in os.walk(sys.argv[1]):
    folders.sort()
    for name in sorted(files):
        path = os.path.join(root, name)
        os.stat(path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if name.endswith(".md"):
            loader = yaml.CSafeLoader(frontmatter(text))
            loader.get_single_node()  # composed by libyaml; building the values is left out: a lower bound
            loader.dispose()
        elif name.endswith(".py"):
            exec(compile(text, path, "exec", dont_inherit=True), {"__name__": "floor"})
"""
"""The work no listing of a catalogue can skip, in a process of its own: walk the folders, stat and read every
file, split off each frontmatter and compose it in libyaml (the loader's first step; building the values is
left out), compile and run each python tool (its ``frontmatter`` is a module global). No index, no cascade,
no orchestrator: the floor a first ``list`` is measured against."""


def toolcascade() -> list[str]:
    """The command that runs ``toolcascade``: the venv's console script, else ``python -m orchestrator``."""
    script = Path(sys.executable).with_name("toolcascade")
    return [str(script)] if script.exists() else [sys.executable, "-m", "orchestrator"]


def cpu_seconds(
    arguments: list[str], cwd: Path, cache: Path, package: Path, command: list[str] | None = None
) -> tuple[float, int]:
    """(CPU seconds, user + sys, of one ``toolcascade`` process, its exit status); stdout to a file, not a terminal.

    ``cache`` is its ``XDG_CACHE_HOME`` (``TOOLCASCADE_CACHE`` is unset: the
    platformdirs folder is used); ``package`` the folder its ``orchestrator`` is imported from;
    ``command`` another program to run with the same environment (the floor), else ``toolcascade``.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLCASCADE_CACHE", "TOOLCASCADE_INDEX")}
    env["XDG_CACHE_HOME"] = str(cache)
    env["PYTHONPATH"] = str(package)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(cwd / "out.txt", "wb") as out:
        program = toolcascade() if command is None else command
        done = subprocess.run([*program, *arguments], cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.returncode


CPU_CASES = ("floor", "help", "empty", "first", "again", "check", "recheck")
"""The processes of one round of ``cpu_table``, in the order they run (each round in a new ``XDG_CACHE_HOME``)."""


def cpu_table(
    folder: Path, count: int, folders: int, rounds: int, package: Path | None = None, w4: bool = False
) -> Table:
    """Issue 24's list / list again / check CPU seconds over a realistic catalogue written under ``folder``.

    Each round also runs the floor (``FLOOR``: the work a first list cannot skip, no orchestrator) and the
    start-up: ``toolcascade --help`` and ``list`` of an empty folder (the built-ins only, their index kept).
    ``package``: a folder holding the ``orchestrator`` to run (an earlier ``snapshot``, to compare two
    versions); None, a new snapshot of the one imported here. ``w4``: W4's lighter catalogue instead.
    """
    shape = f"{count:,} tools in {folders} folders" + (" (W4's catalogue)" if w4 else "")
    table = Table(f"L24 (issue 24): CPU seconds of a whole `toolcascade` process, {shape}")
    if w4:
        catalog = write_catalog(folder / "w4-catalog", count, folders)
        age(catalog)
    else:
        catalog = write_trust_catalog(folder / "trust-catalog", count, folders)
    work = folder / "cwd"
    work.mkdir(exist_ok=True)
    empty = folder / "empty"
    empty.mkdir(exist_ok=True)
    age(empty)  # as old as the catalogue: a folder changed within the index's racy window is never kept
    package = snapshot(folder) if package is None else package
    path = ["--path", str(catalog)]
    found: dict[str, list[float]] = {case: [] for case in CPU_CASES}
    statuses: set[int] = set()
    rows: set[int] = set()  # lines each list printed: every round lists the same catalogue
    for number in range(rounds):
        cache = folder / f"xdg-{number}"
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir()
        cpu_seconds(["list", "--path", str(empty)], work, cache, package)  # the built-ins' index, for "empty"
        for case, arguments in (
            ("floor", [str(catalog)]),
            ("help", ["--help"]),
            ("empty", ["list", "--path", str(empty)]),
            ("first", ["list", *path]),
            ("again", ["list", *path]),
            ("check", ["check", *path]),
            ("recheck", ["check", *path]),
        ):
            command = [sys.executable, "-c", FLOOR] if case == "floor" else None
            used, status = cpu_seconds(arguments, work, cache, package, command)
            found[case].append(used * 1e6)
            if case.endswith("check"):
                statuses.add(status)
            elif status != 0 and case != "empty":  # an empty folder lists nothing: exit 0, "no tools found"
                raise SystemExit(f"{case} failed (exit {status}): see {work / 'out.txt'}")
            elif case in ("first", "again"):
                rows.add((work / "out.txt").read_bytes().count(b"\n"))
        shutil.rmtree(cache, ignore_errors=True)
    samples = {case: Sample(statistics.median(v), min(v), rounds) for case, v in found.items()}
    floor = samples["floor"]
    table.add(
        "floor: walk, stat, read, compose every frontmatter (libyaml), compile and run every .py",
        floor,
        "no orchestrator",
    )
    table.add("`toolcascade --help` (start-up)", samples["help"], "CPU, user + sys")
    table.add("`toolcascade list` of an empty folder (start-up, the built-ins' index kept)", samples["empty"], "")
    table.add(
        "`toolcascade list`, files never seen (new XDG_CACHE_HOME)",
        samples["first"],
        "CPU, user + sys",
        ratios={"floor": samples["first"] / floor},
    )
    table.add("`toolcascade list` again, output piped", samples["again"], f"lines printed: {sorted(rows)}")
    table.add("`toolcascade check`", samples["check"], f"exit status {sorted(statuses)}")
    table.add("`toolcascade check` again, files unchanged", samples["recheck"], "the kept verdict")
    full = (count, folders) == FULL
    for text, sample, bound in (
        ("first `list` of 10,000 tools < 1.5 s CPU", samples["first"], 1.5),
        ("repeated `list`, piped, < 0.5 s CPU", samples["again"], 0.5),
        ("`check` < 4 s CPU", samples["check"], 4.0),
    ):
        shown = fmt(sample.median, "µs")
        table.target(
            text,
            shown if full else f"{shown} over {count:,} tools",
            sample.median < bound * 1e6 if full else None,
            issue=24,
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK[0]:,} tools, one round")
    parser.add_argument("--cpu", action="store_true", help="issue 24: CPU seconds of whole toolcascade processes")
    parser.add_argument("--rounds", type=int, default=5, help="--cpu: rounds (medians over them)")
    parser.add_argument("--count", type=int, default=FULL[0], help="--cpu: tools in the catalogue")
    parser.add_argument("--folders", type=int, default=FULL[1], help="--cpu: folders they are in")
    parser.add_argument("--keep", type=Path, help="--cpu: write the catalogue (and caches) here and keep them")
    parser.add_argument("--package", type=Path, help="--cpu: run the orchestrator in this folder (a kept snapshot)")
    parser.add_argument("--w4-catalogue", action="store_true", help="--cpu: W4's lighter catalogue (the issue's)")
    options = parser.parse_args()
    if options.cpu:
        shape = (options.count, options.folders, options.rounds, options.package, options.w4_catalogue)
        if options.keep is not None:
            options.keep.mkdir(parents=True, exist_ok=True)
            table = cpu_table(options.keep, *shape)
        else:
            with tempfile.TemporaryDirectory() as name:
                table = cpu_table(Path(name), *shape)
        sys.stdout.write(table.markdown() + "\n" + targets_markdown([table], issue=24))
        return
    with tempfile.TemporaryDirectory() as name:
        sys.stdout.write(w4_table(Path(name), options.quick).markdown())


if __name__ == "__main__":
    main()
