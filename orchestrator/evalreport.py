"""What ``toolcascade eval`` reports: the variants side by side, as JSON, as a table, and the verdict.

``summary`` turns each variant's pydantic-evals report into plain JSON (the
``--json`` report): per case its score (the mean of its scorers', 0 for a
call that failed), each scorer's score and reason, the output or error,
tokens, cost and seconds, and what its LLM judges spent (``judge_tokens``,
``judge_cost``: None when no judge ran); per variant the mean score, total
tokens and cost, the judges' totals apart (``judge_tokens``, ``judge_cost``),
mean seconds per case, and the metadata keys that differ from the tool as
written. ``lines`` draws it (a rich table on a terminal, tab-separated rows
when piped); ``verdict`` compares it with ``--min-score`` and a baseline
report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .costs import table
from .errors import ConfigurationError
from .logs import dollars

if TYPE_CHECKING:
    from .evals import Outcome
    from .evalsets import EvalSet

SLACK = 1e-9  # a score equal to its bound passes, whatever the float arithmetic


def summary(ref: str, evalset: EvalSet, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The report of an eval run as plain JSON (what ``--json`` prints and ``--baseline`` reads)."""
    names = [case.name for case in evalset.cases]
    return {
        "tool": ref,
        "dataset": str(evalset.path),
        "cases": names,
        "prices": table(),
        "variants": [_variant(outcome, names) for outcome in outcomes],
    }


def _variant(outcome: Outcome, names: list[str]) -> dict[str, Any]:
    variant = outcome.variant
    found: dict[str, Any] = {
        "name": variant.name,
        "spec": variant.spec,
        "differs": outcome.differs,
        "error": outcome.error,
        "score": None,
        "tokens": None,
        "cost": None,
        "judge_tokens": None,
        "judge_cost": None,
        "seconds": None,
        "cases": [],
    }
    report = outcome.report
    if report is None:
        return found
    cases: dict[str, dict[str, Any]] = {}
    for case in report.cases:
        scores = {name: float(result.value) for name, result in case.scores.items()}
        reasons = {name: result.reason for name, result in case.scores.items() if result.reason}
        judged = outcome.judged.get(case.name)
        for failure in case.evaluator_failures:  # a scorer that could not score: 0, and why
            scores[failure.name] = 0.0
            reasons[failure.name] = failure.error_message
        cases[case.name] = {
            "name": case.name,
            "score": sum(scores.values()) / len(scores) if scores else 0.0,
            "scores": scores,
            "reasons": reasons,
            "output": _plain(case.output),
            "error": None,
            "tokens": case.metrics.get("tokens"),
            "cost": case.metrics.get("cost"),
            "judge_tokens": judged[0] if judged is not None else None,
            "judge_cost": judged[1] if judged is not None else None,
            "seconds": case.task_duration,
        }
    for failure in report.failures:
        cases[failure.name] = {
            "name": failure.name,
            "score": 0.0,
            "scores": {},
            "reasons": {},
            "output": None,
            "error": failure.error_message,
            "tokens": None,
            "cost": None,
            "judge_tokens": None,
            "judge_cost": None,
            "seconds": None,
        }
    ordered = [cases[name] for name in names if name in cases]
    found["cases"] = ordered
    found["score"] = sum(c["score"] for c in ordered) / len(ordered) if ordered else 0.0
    found["tokens"] = sum(c["tokens"] or 0 for c in ordered)
    found["cost"] = _total(c["cost"] for c in ordered)
    found["judge_tokens"] = _total(c["judge_tokens"] for c in ordered)
    found["judge_cost"] = _total(c["judge_cost"] for c in ordered)
    timed = [c["seconds"] for c in ordered if c["seconds"] is not None]
    found["seconds"] = sum(timed) / len(timed) if timed else None
    return found


def _total(values: Iterable[Any]) -> Any:
    """The sum of the known values; None when none is known."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def rows(report: Mapping[str, Any]) -> list[list[str]]:
    """The side-by-side table: a head, a row per case, then mean, tokens, cost (when known), the judges' tokens
    and cost (when a judge ran, when known) and seconds."""
    variants = report["variants"]
    out = [["CASE", *(v["name"] for v in variants)]]
    for name in report["cases"]:
        cells = []
        for variant in variants:
            case = next((c for c in variant["cases"] if c["name"] == name), None)
            cells.append("-" if case is None else "error" if case["error"] else f"{case['score']:.2f}")
        out.append([name, *cells])
    out.append(["mean", *("-" if v["score"] is None else f"{v['score']:.2f}" for v in variants)])
    out.append(["tokens", *("-" if v["tokens"] is None else str(v["tokens"]) for v in variants)])
    if any(v["cost"] is not None for v in variants):
        out.append(["cost", *(dollars(v["cost"]) for v in variants)])
    if any(v.get("judge_tokens") is not None for v in variants):  # an older report has no judge totals
        out.append(
            ["judge tokens", *("-" if v.get("judge_tokens") is None else str(v["judge_tokens"]) for v in variants)]
        )
    if any(v.get("judge_cost") is not None for v in variants):
        out.append(["judge cost", *(dollars(v.get("judge_cost")) for v in variants)])
    out.append(["seconds", *("-" if v["seconds"] is None else f"{v['seconds']:.3f}" for v in variants)])
    return out


def notes(report: Mapping[str, Any]) -> list[str]:
    """What the table leaves out, per variant: the keys that differ, the failed calls, the scores under 1 and why."""
    lines = []
    for variant in report["variants"]:
        head = f"{variant['name']}" + (f" ({variant['spec']})" if variant["spec"] else "")
        if variant["error"]:
            lines.append(f"{head}: could not run: {variant['error']}")
            continue
        if variant["differs"]:
            lines.append(f"{head}: differs from the tool as written in")
        else:
            lines.append(f"{head}: the metadata of the tool as written")
        for item in variant["differs"]:
            was = "unset" if item["was_level"] is None else f"{_short(item['was'])} from {item['was_level']}"
            now = "removed" if item["level"] is None else f"{_short(item['value'])} from {item['level']}"
            lines.append(f"  {item['key']} = {now} (was {was})")
        for case in variant["cases"]:
            if case["error"]:
                lines.append(f"  {case['name']}: error: {case['error']}")
            for scorer, why in case["reasons"].items():
                if case["scores"].get(scorer, 1.0) < 1.0:
                    lines.append(f"  {case['name']}: {scorer}: {case['scores'][scorer]:.2f}, {why}")
    return lines


def _short(value: Any, limit: int = 70) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_baseline(path: Path) -> dict[str, Any]:
    """A report written by ``toolcascade eval --json`` (or ``--output``).

    Raises:
        ConfigurationError: unreadable, not JSON, or not such a report.
    """
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the baseline report: {exc}", path=path, key="--baseline") from None
    if not isinstance(found, dict) or not isinstance(found.get("variants"), list):
        raise ConfigurationError(
            "the baseline is not a report of toolcascade eval --json (no variants)", path=path, key="--baseline"
        )
    return found


def verdict(report: Mapping[str, Any], min_score: float | None, baseline: Mapping[str, Any] | None) -> list[str]:
    """Why the run fails (one line each): a variant that could not run, under ``min_score``, or under its baseline."""
    problems = []
    before = {v.get("name"): v.get("score") for v in (baseline or {}).get("variants", []) if isinstance(v, dict)}
    for variant in report["variants"]:
        name, score = variant["name"], variant["score"]
        if score is None:
            problems.append(f"variant {name!r} could not run")
            continue
        if min_score is not None and score < min_score - SLACK:
            problems.append(f"variant {name!r} scored {score:.2f}, under --min-score {min_score:.2f}")
        old = before.get(name)
        if isinstance(old, (int, float)) and score < old - SLACK:
            problems.append(f"variant {name!r} scored {score:.2f}, under its baseline's {old:.2f}")
    return problems


__all__ = ["load_baseline", "notes", "rows", "summary", "verdict"]
