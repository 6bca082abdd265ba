"""``toolcascade eval TOOL [DATASET]``: score a tool on a dataset, under one or more variants, side by side.

The cases and scorers are ``orchestrator.evalsets``'s; the harness is
``pydantic-evals`` (the ``eval`` extra): each variant is one
``Dataset.evaluate`` whose task is ``manager.invoke``, and each scorer one
of its evaluators. A **variant** is the same tool under other metadata:
``--variant NAME=OPTIONS`` where OPTIONS are any of ``--set KEY=VALUE``
(overrides), ``--path DIR`` (searched before the command's paths: another
version of the tool), ``--authority FILE`` (the tool's folder as if FILE
were its ``AUTHORITY.md``: the tool and its folder's files are staged in a
temporary folder beside it; FILE inherits ``default`` unless it says
``inherit:``). Without ``--variant`` the tool runs as it is (``base``).
Variants run at once, at most ``--concurrency`` calls in all.

The report puts the variants side by side: each case's score, the mean,
tokens, cost (``orchestrator.costs``) and mean seconds per case, and apart
from those what the LLM judges spent (``judge tokens``, ``judge cost``); and for
each variant the metadata keys whose value differs from the tool as
written, with the level each came from (``Manager.explain``, as ``show``
prints it). Every call, the judges' too, goes to the run log unless
``--no-log``. ``--min-score`` and ``--baseline REPORT.json`` (a report
written by ``--json`` or ``--output``) set the exit status: 1 when a
variant's mean score is under the minimum, or under its baseline's.
"""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from .costs import cost as price
from .display import display, plain_rows, terminal
from .errors import ConfigurationError, OrchestratorError, ToolNotFoundError
from .evalreport import load_baseline, notes, rows, summary, verdict
from .evalsets import EvalCase, EvalSet, Scorer, find_dataset, load_dataset
from .exits import reporting
from .flags import chosen_formats, debug_option, json_option, parse_sets, path_option, search_paths
from .manager import Manager
from .typos import suggest

if TYPE_CHECKING:
    from .events import Event
    from .tool import Tool

EXTRA = "toolcascade eval needs pydantic-evals: pip install 'toolcascade[eval]' (the eval extra)"
OPTIONS = ("--set", "--path", "--authority")
METER = "eval-meter"  # the extra middleware that tells which run a case's call is


@dataclass(frozen=True, slots=True)
class Variant:
    """One configuration to evaluate the tool under: ``--set`` overrides, ``--path`` folders, an authority file."""

    name: str
    spec: str = ""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    paths: tuple[Path, ...] = ()
    authority: Path | None = None


def parse_variant(text: str) -> Variant:
    """``NAME=OPTIONS`` (``small=--set model=openai:gpt-4o-mini``) as a Variant.

    Raises:
        ConfigurationError: no name, an unknown option, a bad ``--set``, or a path that does not exist.
    """
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or name.startswith("-"):
        raise ConfigurationError(f"a variant is NAME=OPTIONS (small=--set model=...), not {text!r}", key="--variant")
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ConfigurationError(f"variant {name!r}: {exc}", key="--variant") from None
    sets: list[str] = []
    paths: list[Path] = []
    authority: Path | None = None
    while words:
        option, _, value = words.pop(0).partition("=")
        if option not in OPTIONS:
            raise ConfigurationError(
                f"variant {name!r}: unknown option {option!r}{suggest(option, OPTIONS)} (use {', '.join(OPTIONS)})",
                key="--variant",
            )
        if not value:
            if not words:
                raise ConfigurationError(f"variant {name!r}: {option} needs a value", key="--variant")
            value = words.pop(0)
        if option == "--set":
            sets.append(value)
        elif option == "--path":
            if not Path(value).is_dir():
                raise ConfigurationError(f"variant {name!r}: --path {value!r} is not a folder", key="--variant")
            paths.append(Path(value))
        else:
            if not Path(value).is_file():
                raise ConfigurationError(f"variant {name!r}: --authority {value!r} is not a file", key="--variant")
            authority = Path(value)
    try:
        overrides = parse_sets(None, None, sets)  # type: ignore[arg-type]
    except click.BadParameter as exc:
        raise ConfigurationError(f"variant {name!r}: {exc.message}", key="--variant") from None
    return Variant(name, spec.strip(), overrides, tuple(paths), authority)


@dataclass(slots=True)
class Meter:
    """What the model calls of each case's run cost: run id -> [tokens, cost, the model last asked]."""

    runs: dict[str, list[Any]] = field(default_factory=dict)

    def listen(self, event: Event) -> None:
        found = self.runs.get(event.run)
        if found is None:
            return
        if event.kind == "model.request":
            found[2] = event.data.get("model")
        elif event.kind == "model.response":
            usage = event.data.get("usage") or {}
            found[0] += usage.get("total_tokens") or 0
            spent = price(found[2], usage)
            if spent is not None:
                found[1] = (found[1] or 0.0) + spent


@dataclass(slots=True)
class Outcome:
    """A variant's result: its pydantic-evals report (None when it could not run), what differs, or its error.

    ``judged``: what its cases' judges spent, case name -> [tokens, cost]
    (cost None when no answer could be priced), kept apart from the task's own.
    """

    variant: Variant
    report: Any = None
    differs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    judged: dict[str, list[Any]] = field(default_factory=dict)


async def metered(
    manager: Manager, meter: Meter, ref: str, args: Any, spent: Callable[[int, float | None], None], **options: Any
) -> Any:
    """``manager.invoke(ref, args, **options)``, telling ``spent(tokens, cost)`` what its model calls cost.

    ``meter`` listens to ``manager``'s events; an extra middleware marks the call's run for it.
    """
    seen: list[str] = []

    async def mark(ctx: Any, _args: Any) -> Any:
        seen.append(ctx.run.id)
        meter.runs[ctx.run.id] = [0, None, None]
        return await ctx.manager.next()

    try:
        return await manager.invoke(ref, args, middleware={METER: {"fn": mark}}, **options)
    finally:
        for run in seen:
            tokens, cost, _model = meter.runs.pop(run)
            spent(tokens, cost)


def stage(tool: Tool, authority: Path, into: Path) -> Path:
    """A search path where ``tool``'s folder is governed by ``authority``: the folder's files copied, FILE as its AUTHORITY.md.

    Raises:
        ConfigurationError: the tool is no file in a folder, or names its authority itself.
    """
    if tool.path is None or tool.root is None:
        raise ConfigurationError("an --authority variant needs a tool read from a file", tool=tool.name)
    if tool.authority:
        raise ConfigurationError(
            f"the tool names its authority ({tool.authority!r}), which an --authority variant cannot replace: "
            "use --set for the keys to change",
            tool=tool.name,
            path=tool.path,
        )
    folder = into / tool.path.parent.relative_to(tool.root)
    folder.mkdir(parents=True, exist_ok=True)
    for found in tool.path.parent.iterdir():
        if found.is_file() and not found.name.startswith("AUTHORITY."):
            shutil.copy2(found, folder / found.name)
    shutil.copy2(authority, folder / "AUTHORITY.md")
    return into


def differences(base: Manager, manager: Manager, ref: str, variant: Variant) -> list[dict[str, Any]]:
    """The metadata keys whose value or level differs between the tool as written and ``variant``, as explain has them.

    Each: ``key``, ``value`` and ``level`` (``authority NAME``, ``tool NAME``,
    ``--set``; the variant's authority file by its path), ``was`` and
    ``was_level`` (None when the tool as written has no such key).
    """
    before = {k.key: k for k in base.explain(ref, render=False).keys}
    after = {k.key: k for k in manager.explain(ref, render=False, overrides=variant.overrides or None).keys}
    staged = manager.find_authority(ref).name if variant.authority is not None else None
    found = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and (old.value, old.level) == (new.value, new.level):
            continue
        level = None
        if new is not None:
            level = _level(new.level_kind, new.level)
            if new.level_kind == "authority" and new.level == staged:
                level = f"authority {variant.authority}"
        found.append(
            {
                "key": key,
                "value": new.value if new is not None else None,
                "level": level,
                "was": old.value if old is not None else None,
                "was_level": _level(old.level_kind, old.level) if old is not None else None,
            }
        )
    return found


def _level(kind: str, name: str) -> str:
    return "--set" if kind == "override" else f"{kind} {name}"


async def evaluate(
    ref: str,
    evalset: EvalSet,
    variants: Sequence[Variant],
    paths: Sequence[Path],
    *,
    runlog: Any = None,
    concurrency: int = 4,
    formats: Any = None,
) -> list[Outcome]:
    """Run every case of ``evalset`` on ``ref`` under each variant, at most ``concurrency`` calls at once.

    Judges run on the tool as written (the same judge for every variant).

    Raises:
        ConfigurationError: the ``eval`` extra is missing.
        OrchestratorError: the tool cannot be found.
    """
    try:
        from pydantic_evals import Dataset
    except ImportError:
        raise ConfigurationError(EXTRA) from None
    base = Manager(paths, formats=formats, runlog=runlog)
    managers = [base]
    outcomes = [Outcome(variant) for variant in variants]
    judging = Meter()  # the judges' model calls, on the tool as written
    base.events.quiet.append(judging.listen)
    with ExitStack() as temporary:
        try:
            tool = base.find_tool(ref)
            check_judges(evalset, base)

            def dataset(judged: dict[str, list[Any]]) -> Any:
                return Dataset(name=evalset.path.name, cases=cases(evalset, base, judging, judged))

            limiter = anyio.CapacityLimiter(concurrency)
            async with anyio.create_task_group() as group:
                for outcome in outcomes:
                    variant = outcome.variant
                    folders: list[Path] = [*variant.paths]
                    if variant.authority is not None:
                        into = Path(temporary.enter_context(tempfile.TemporaryDirectory(prefix="toolcascade-eval-")))
                        try:
                            folders.append(stage(tool, variant.authority, into))
                        except OrchestratorError as exc:
                            outcome.error = f"{type(exc).__name__}: {exc}"
                            continue
                    manager = Manager([*folders, *paths], formats=formats, runlog=base.runlog)
                    managers.append(manager)
                    group.start_soon(_variant, outcome, base, manager, ref, dataset, limiter, concurrency)
        finally:
            for manager in reversed(managers):
                await manager.aclose()
    return outcomes


async def _variant(
    outcome: Outcome,
    base: Manager,
    manager: Manager,
    ref: str,
    dataset: Any,
    limiter: anyio.CapacityLimiter,
    concurrency: int,
) -> None:
    from pydantic_evals import increment_eval_metric

    variant = outcome.variant
    try:
        outcome.differs = differences(base, manager, ref, variant)
    except Exception as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"
        return
    meter = Meter()
    manager.events.quiet.append(meter.listen)

    def spent(tokens: int, cost: float | None) -> None:
        increment_eval_metric("tokens", tokens)
        if cost is not None:
            increment_eval_metric("cost", cost)

    async def task(args: Any) -> Any:
        async with limiter:
            return await metered(manager, meter, ref, copy.deepcopy(args), spent, overrides=variant.overrides or None)

    outcome.report = await dataset(outcome.judged).evaluate(
        task, name=variant.name, task_name=ref, max_concurrency=concurrency, progress=False
    )


def check_judges(evalset: EvalSet, judges: Manager) -> None:
    """Find every judge tool the dataset names before any case runs.

    Raises:
        ConfigurationError: a judge that is no tool (at its case's line, with the lookup's "did you mean").
    """
    for case in evalset.cases:
        for scorer in case.scorers:
            if scorer.kind == "judge":
                try:
                    judges.find_tool(scorer.value[0])
                except ToolNotFoundError as exc:
                    raise ConfigurationError(
                        f"case {case.name!r}: the judge is no tool: {exc}", path=evalset.path, line=case.line
                    ) from None


def cases(evalset: EvalSet, judges: Manager, meter: Meter, judged: dict[str, list[Any]]) -> list[Any]:
    """The dataset's cases as pydantic-evals cases, each scorer an evaluator.

    Judges run on ``judges`` (whose events ``meter`` hears); what a case's
    judges spent is added to ``judged[case name]`` as [tokens, cost].
    """
    from pydantic_evals import Case

    scored = evaluator_class()

    def judge_of(name: str) -> Any:
        def spent(tokens: int, cost: float | None) -> None:
            found = judged.setdefault(name, [0, None])
            found[0] += tokens
            if cost is not None:
                found[1] = (found[1] or 0.0) + cost

        async def judge(tool: str, args: Mapping[str, Any]) -> Any:
            return await metered(judges, meter, tool, dict(args), spent)

        return judge

    return [
        Case(
            name=case.name,
            inputs=case.args,
            expected_output=case.expected,
            evaluators=[scored(scorer, case, judge_of(case.name)) for scorer in case.scorers],
        )
        for case in evalset.cases
    ]


_EVALUATOR: list[Any] = []


def evaluator_class() -> Any:
    """The pydantic-evals Evaluator that runs one of our scorers (made once: pydantic-evals is imported here)."""
    if _EVALUATOR:
        return _EVALUATOR[0]
    from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext

    @dataclass
    class Scored(Evaluator):  # type: ignore[type-arg]
        scorer: Scorer
        case: EvalCase
        judge: Any

        def get_default_evaluation_name(self) -> str:
            return self.scorer.label

        async def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:  # type: ignore[type-arg]
            value, reason = await self.scorer.score(ctx.output, self.case, self.judge)
            return EvaluationReason(value=value, reason=reason)

    _EVALUATOR.append(Scored)
    return Scored


def run_variants(text: Sequence[str]) -> list[Variant]:
    """The ``--variant`` options as Variants (``base``, the tool as it is, when there are none).

    Raises:
        ConfigurationError: a malformed variant, or two with one name.
    """
    variants = [parse_variant(item) for item in text] or [Variant("base")]
    names = [variant.name for variant in variants]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigurationError(f"two variants are named {twice[0]!r}", key="--variant")
    return variants


@click.command(name="eval", short_help="Score a tool on a dataset, under variants side by side.")
@click.argument("tool")
@click.argument("dataset", required=False)
@path_option
@click.option(
    "--variant",
    "variants",
    multiple=True,
    metavar="NAME=OPTIONS",
    help="Run the cases under NAME too (repeatable); OPTIONS: --set KEY=VALUE, --path DIR, --authority FILE.",
)
@click.option(
    "--concurrency", default=4, show_default=True, type=click.IntRange(min=1), help="Calls at once, all variants."
)
@click.option("--min-score", type=click.FloatRange(0, 1), help="Exit 1 when a variant's mean score is under this.")
@click.option(
    "--baseline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="REPORT.json",
    help="Exit 1 when a variant's mean score is under its score in this earlier --json report.",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Also write the JSON report here."
)
@click.option("--no-log", is_flag=True, help="Keep these calls out of the run log (see toolcascade logs).")
@json_option
@debug_option
def eval_(
    tool: str,
    dataset: str | None,
    paths: tuple[Path, ...],
    variants: tuple[str, ...],
    concurrency: int,
    min_score: float | None,
    baseline: Path | None,
    output: Path | None,
    no_log: bool,
    as_json: bool,
    debug: bool,
) -> None:
    """Score TOOL on the cases of DATASET (YAML or JSON Lines; default: TOOL.evals.yaml beside it, or evals: in
    its frontmatter), under each --variant, and print the variants side by side.

    \b
    Examples:
      toolcascade eval summarize
      toolcascade eval summarize cases.yaml --min-score 0.8
      toolcascade eval summarize --variant mini='--set model=openai:gpt-4o-mini' \\
          --variant strict='--authority strict.md' --variant next='--path ../next/tools'
      toolcascade eval summarize --json > report.json
      toolcascade eval summarize --baseline report.json
    """
    with reporting(debug):
        chosen = run_variants(variants)
        folders = search_paths(paths)
        with Manager(folders, formats=chosen_formats()) as probe:
            found = probe.find_tool(tool)
            where, trusted = find_dataset(found, dataset)
            evalset = load_dataset(found, where, trusted=trusted)
        earlier = load_baseline(baseline) if baseline is not None else None
        running = partial(
            evaluate,
            tool,
            evalset,
            chosen,
            folders,
            runlog=not no_log,
            concurrency=concurrency,
            formats=chosen_formats(),
        )
        report = summary(tool, evalset, anyio.run(running))
        if output is not None:
            output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    show(report, as_json)
    problems = verdict(report, min_score, earlier)
    for problem in problems:
        click.echo(f"eval: {problem}", err=True)
    if problems:
        sys.exit(1)


def show(report: Mapping[str, Any], as_json: bool) -> None:
    """Print the report: JSON, a rich table on a terminal, or tab-separated rows when piped; then the notes."""
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    table_rows = rows(report)
    if terminal():
        from rich import box
        from rich.table import Table

        drawn = Table(
            box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title=f"{report['tool']}: {report['dataset']}"
        )
        for index, head in enumerate(table_rows[0]):
            drawn.add_column(head, justify="left" if index == 0 else "right")
        for cells in table_rows[1:]:
            drawn.add_row(*cells, style="bold" if cells[0] == "mean" else None)
        display(drawn)
    else:
        click.echo(plain_rows(table_rows))
    for line in notes(report):
        click.echo(line)


__all__ = ["Outcome", "Variant", "eval_", "evaluate", "parse_variant", "run_variants", "stage"]
