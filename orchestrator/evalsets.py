"""Eval datasets and their scorers, for ``toolcascade eval`` (``orchestrator.evals``).

A dataset is a list of cases, in a YAML file (``cases:``, with optional
``scorers:`` for every case, or a bare list), a JSON Lines file (one case a
line), or ``evals:`` in the tool's own frontmatter (the same shape as the
YAML file). A case is ``args`` (the tool's args), an optional ``name`` and
``expected``, and ``scorers``, each one of:

- ``exact``: the output equals ``expected`` (text compared without the white
  space around it);
- ``contains: TEXT`` (or a list): the output, as text, contains each;
- ``regex: PATTERN``: the pattern is found in the output as text;
- ``schema: {...}``: the output is valid against this JSON Schema (text that
  is JSON is parsed first);
- ``python: checks.py:score`` (a file beside the dataset) or
  ``python: package.module:score``: ``score(output, case)`` returns the score;
  only a dataset in a trusted place (named on the command line, or beside a
  tool of a trusted search path) may name Python;
- ``judge: TOOL`` (or ``judge: {tool: TOOL, args: {...}}``): an LLM judge,
  itself a tool, run through the pipeline with ``{args, output, expected}``
  (and the extra args); it answers the score.

A score is a number from 0 to 1, ``true``/``false`` (1/0), or ``{score,
reason}``; a case's score is the mean of its scorers'. A case with
``expected`` and no scorer is scored ``exact``. Scorers are plain objects
here; ``orchestrator.evals`` hands them to ``pydantic-evals`` as evaluators.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .documents import parse_yaml
from .errors import ConfigurationError, SecurityError, ToolDefinitionError
from .typos import suggest

if TYPE_CHECKING:
    import yaml

    from .tool import Tool

KINDS = ("exact", "contains", "regex", "schema", "python", "judge")
CASE_KEYS = ("name", "args", "expected", "scorers")
_WORDS = {"pass": 1.0, "yes": 1.0, "true": 1.0, "fail": 0.0, "no": 0.0, "false": 0.0}

Judge = Callable[[str, Mapping[str, Any]], Awaitable[Any]]
"""How a judge scorer runs its tool: ``await judge(tool, args)`` is the tool's result."""


@dataclass(frozen=True, slots=True)
class Scorer:
    """One scorer of a case: its ``kind`` (one of ``KINDS``), its ``value`` as written, and what it needs.

    ``label`` names its score in reports (``contains 'Paris'``); ``check``
    is the Python function of a ``python`` scorer.
    """

    kind: str
    value: Any
    label: str
    check: Callable[..., Any] | None = None

    async def score(self, output: Any, case: EvalCase, judge: Judge) -> tuple[float, str | None]:
        """The score of ``output`` for ``case``, from 0 to 1, and why (None when there is nothing to add).

        Raises:
            ConfigurationError: a judge or a Python scorer answered something that is not a score.
        """
        if self.kind == "exact":
            wanted, got = case.expected, output
            if isinstance(wanted, str) and isinstance(got, str):
                wanted, got = wanted.strip(), got.strip()
            return (1.0, None) if got == wanted else (0.0, f"expected {_short(case.expected)}")
        if self.kind == "contains":
            text = as_text(output)
            missing = [piece for piece in self.value if piece not in text]
            return (0.0, f"missing {', '.join(map(repr, missing))}") if missing else (1.0, None)
        if self.kind == "regex":
            return (1.0, None) if re.search(self.value, as_text(output)) else (0.0, f"no match for {self.value!r}")
        if self.kind == "schema":
            return _valid(self.value, output)
        if self.kind == "python":
            assert self.check is not None
            found = self.check(output, {"name": case.name, "args": case.args, "expected": case.expected})
            if inspect.isawaitable(found):
                found = await found
            return as_score(found, f"python scorer {self.value!r}")
        tool, extra = self.value
        asked = {**extra, "args": case.args, "output": output}
        if case.expected is not None:
            asked["expected"] = case.expected
        return as_score(await judge(tool, asked), f"judge {tool!r}")


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One case: the tool's ``args``, what is ``expected`` (None: nothing), its scorers, and where it was written."""

    name: str
    args: Any
    expected: Any
    scorers: tuple[Scorer, ...]
    line: int | None = None


@dataclass(frozen=True, slots=True)
class EvalSet:
    """A dataset: its cases and the file they came from (the tool's own file for ``evals:`` in frontmatter)."""

    path: Path
    cases: tuple[EvalCase, ...] = field(default_factory=tuple)


def find_dataset(tool: Tool, given: str | None) -> tuple[Path | None, bool]:
    """The dataset file for ``tool`` and whether it is trusted; (None, trusted) means its frontmatter's ``evals:``.

    ``given`` is a path (from the working folder, else beside the tool);
    without it: ``NAME.evals.yaml`` or ``NAME.evals.jsonl`` beside the tool,
    else its frontmatter. A dataset named on the command line is trusted; one
    beside the tool is as trusted as the tool.

    Raises:
        ConfigurationError: ``given`` names no file, or the tool has no dataset at all.
    """
    beside = tool.path.parent if tool.path is not None else None
    if given is not None:
        if Path(given).is_file():
            return Path(given), True
        if beside is not None and (beside / given).is_file():
            return beside / given, tool.trusted
        where = f" nor beside the tool in {beside}" if beside is not None else ""
        raise ConfigurationError(f"no dataset {given!r} in the working folder{where}", tool=tool.name)
    if beside is not None and tool.path is not None:
        stem = tool.path.name.split(".")[0]
        for suffix in (".evals.yaml", ".evals.yml", ".evals.jsonl"):
            if (beside / (stem + suffix)).is_file():
                return beside / (stem + suffix), tool.trusted
    if "evals" in tool.frontmatter:
        return None, tool.trusted
    raise ConfigurationError(
        "no dataset: name one (toolcascade eval TOOL DATASET), put NAME.evals.yaml beside the tool, "
        "or add evals: to its frontmatter",
        tool=tool.name,
        path=tool.path,
    )


def load_dataset(tool: Tool, path: Path | None, *, trusted: bool) -> EvalSet:
    """The dataset in ``path`` (YAML, or JSON Lines for ``.jsonl``), or in ``tool``'s frontmatter when None.

    Raises:
        ToolDefinitionError: the file is unreadable or not valid YAML / JSON.
        ConfigurationError: a case or scorer is malformed (naming the file and line).
        SecurityError: a ``python`` scorer in a dataset that is not trusted.
    """
    if path is None:
        source = tool.path or Path(tool.uri)
        line = tool.lines.get("evals")
        data, lines = tool.frontmatter.get("evals"), None
        return _dataset(data, lines, source, line, trusted, tool.name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolDefinitionError(f"cannot read the dataset: {exc}", path=path) from exc
    if path.suffix == ".jsonl":
        cases = []
        for number, row in enumerate(text.splitlines(), 1):
            if row.strip():
                try:
                    cases.append((json.loads(row), number))
                except ValueError as exc:
                    raise ToolDefinitionError(f"the line is not JSON: {exc}", path=path, line=number) from None
        found = tuple(_case(raw, i, path, line, (), trusted) for i, (raw, line) in enumerate(cases, 1))
        return EvalSet(path, _unique(found, path))
    data, node = parse_yaml(text, path, what="eval dataset")
    return _dataset(data, _item_lines(node), path, 1, trusted, tool.name)


def _dataset(data: Any, lines: list[int] | None, path: Path, line: int | None, trusted: bool, tool: str) -> EvalSet:
    shared: tuple[Scorer, ...] = ()
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - {"cases", "scorers"})
        if unknown:
            hint = suggest(str(unknown[0]), ("cases", "scorers"))
            raise ConfigurationError(f"unknown dataset key {unknown[0]!r}{hint}", path=path, line=line, key="evals")
        shared = _scorers(data.get("scorers") or [], path, line, trusted)
        data = data.get("cases")
    if not isinstance(data, list) or not data:
        raise ConfigurationError("a dataset needs a non-empty list of cases", path=path, line=line, tool=tool)
    found = tuple(
        _case(raw, i, path, lines[i - 1] if lines and i <= len(lines) else line, shared, trusted)
        for i, raw in enumerate(data, 1)
    )
    return EvalSet(path, _unique(found, path))


def _case(raw: Any, index: int, path: Path, line: int | None, shared: tuple[Scorer, ...], trusted: bool) -> EvalCase:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"case {index} is not a mapping of args, expected and scorers", path=path, line=line)
    unknown = sorted(set(raw) - set(CASE_KEYS), key=str)
    if unknown:
        hint = suggest(str(unknown[0]), CASE_KEYS)
        raise ConfigurationError(f"case {index}: unknown key {unknown[0]!r}{hint}", path=path, line=line)
    if "args" not in raw:
        raise ConfigurationError(
            f"case {index} has no args (the tool's args: args: {{}} for none)", path=path, line=line
        )
    name = raw.get("name", f"case {index}")
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"case {index}: name must be a non-empty string", path=path, line=line)
    expected = raw.get("expected")
    scorers = (*shared, *_scorers(raw.get("scorers") or [], path, line, trusted))
    if not scorers:
        if "expected" not in raw:
            raise ConfigurationError(
                f"case {name!r} has nothing to score it: give expected (scored exact) or scorers", path=path, line=line
            )
        scorers = (Scorer("exact", True, "exact"),)
    if expected is None and any(s.kind == "exact" for s in scorers):
        raise ConfigurationError(f"case {name!r}: the exact scorer needs expected", path=path, line=line)
    return EvalCase(name, raw["args"], expected, scorers, line)


def _unique(cases: tuple[EvalCase, ...], path: Path) -> tuple[EvalCase, ...]:
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ConfigurationError(f"two cases are named {case.name!r}", path=path, line=case.line)
        seen.add(case.name)
    return cases


def _scorers(raw: Any, path: Path, line: int | None, trusted: bool) -> tuple[Scorer, ...]:
    if not isinstance(raw, list):
        raw = [raw]
    return tuple(_scorer(item, path, line, trusted) for item in raw)


def _scorer(item: Any, path: Path, line: int | None, trusted: bool) -> Scorer:
    """One scorer as written: ``exact``, or a one-key mapping ``{kind: value}``."""
    if isinstance(item, str):
        item = {item: True}
    if not isinstance(item, Mapping) or len(item) != 1:
        raise ConfigurationError(
            f"a scorer is exact or a one-key mapping ({', '.join(KINDS)}), not {_short(item)}", path=path, line=line
        )
    ((kind, value),) = item.items()
    if kind not in KINDS:
        raise ConfigurationError(f"unknown scorer {kind!r}{suggest(str(kind), KINDS)}", path=path, line=line)
    where = {"path": path, "line": line, "key": kind}
    if kind == "exact":
        return Scorer("exact", True, "exact")
    if kind == "contains":
        pieces = value if isinstance(value, list) else [value]
        if not pieces or not all(isinstance(p, str) and p for p in pieces):
            raise ConfigurationError("contains takes a text or a list of texts", **where)
        return Scorer("contains", tuple(pieces), f"contains {', '.join(map(repr, pieces))}")
    if kind == "regex":
        try:
            re.compile(str(value))
        except re.error as exc:
            raise ConfigurationError(f"regex {value!r} is not a valid pattern: {exc}", **where) from None
        return Scorer("regex", str(value), f"regex {str(value)!r}")
    if kind == "schema":
        return Scorer("schema", _schema(value, where), "schema")
    if kind == "python":
        if not trusted:
            raise SecurityError(
                "a python scorer runs code: this dataset is not in a trusted folder (name it on the command line, "
                "or keep it beside a tool of a trusted search path)",
                path=path,
                line=line,
            )
        return Scorer("python", str(value), f"python {value}", _function(str(value), path.parent, where))
    return _judge(value, where)


def _judge(value: Any, where: dict[str, Any]) -> Scorer:
    if isinstance(value, str) and value:
        return Scorer("judge", (value, {}), f"judge {value}")
    if isinstance(value, Mapping) and isinstance(value.get("tool"), str):
        extra = value.get("args") or {}
        unknown = sorted(set(value) - {"tool", "args"}, key=str)
        if unknown or not isinstance(extra, Mapping):
            raise ConfigurationError("judge takes a tool name, or {tool: NAME, args: {...}}", **where)
        return Scorer("judge", (value["tool"], dict(extra)), f"judge {value['tool']}")
    raise ConfigurationError("judge takes a tool name, or {tool: NAME, args: {...}}", **where)


def _schema(value: Any, where: dict[str, Any]) -> Any:
    from jsonschema import SchemaError, validators

    if not isinstance(value, Mapping):
        raise ConfigurationError("schema takes a JSON Schema (a mapping)", **where)
    try:
        validators.validator_for(value).check_schema(value)
    except SchemaError as exc:
        raise ConfigurationError(f"schema is not a valid JSON Schema: {exc.message}", **where) from None
    return value


def _valid(schema: Any, output: Any) -> tuple[float, str | None]:
    from jsonschema import validators

    validator = validators.validator_for(schema)(schema)
    value = output
    if isinstance(output, str) and not validator.is_valid(output):
        try:
            value = json.loads(output)
        except ValueError:
            value = output
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return 1.0, None
    where = "/" + "/".join(map(str, errors[0].absolute_path))
    return 0.0, f"{len(errors)} schema error(s), first at {where}"


def _function(value: str, folder: Path, where: dict[str, Any]) -> Callable[..., Any]:
    """The function ``module:name`` or ``file.py:name`` (a file inside ``folder``) names."""
    module_name, _, name = value.rpartition(":")
    if not module_name or not name:
        raise ConfigurationError(f"python takes module:function or file.py:function, not {value!r}", **where)
    if module_name.endswith(".py"):
        file = (folder / module_name).resolve()
        if not file.is_relative_to(folder.resolve()) or not file.is_file():
            raise ConfigurationError(f"no file {module_name!r} beside the dataset in {folder}", **where)
        spec = importlib.util.spec_from_file_location(f"toolcascade_scorer_{file.stem}", file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ConfigurationError(f"{module_name} failed to import: {type(exc).__name__}: {exc}", **where) from exc
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(f"cannot import {module_name!r}: {exc}", **where) from exc
    found = getattr(module, name, None)
    if not callable(found):
        names = [n for n in vars(module) if callable(getattr(module, n)) and not n.startswith("_")]
        raise ConfigurationError(f"{module_name} has no function {name!r}{suggest(name, names)}", **where)
    return found  # type: ignore[no-any-return]


def as_score(value: Any, who: str) -> tuple[float, str | None]:
    """``value`` (a judge's or a function's answer) as a score from 0 to 1 and its reason.

    Raises:
        ConfigurationError: the answer is not a score.
    """
    reason = None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            value = _WORDS.get(text.lower().rstrip("."), text)
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        value, reason = value
    if isinstance(value, Mapping) and "score" in value:
        value, reason = value["score"], value.get("reason")
    if isinstance(value, bool):
        return (1.0 if value else 0.0), _reason(reason)
    if isinstance(value, (int, float)) and 0 <= value <= 1:
        return float(value), _reason(reason)
    raise ConfigurationError(
        f"{who} answered {_short(value)}: a score is a number from 0 to 1, true/false, or {{score, reason}}"
    )


def as_text(output: Any) -> str:
    """The output as the text scorers search: itself when it is text, else its JSON."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)


def _reason(reason: Any) -> str | None:
    return None if reason is None else str(reason)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _item_lines(node: yaml.Node | None) -> list[int] | None:
    """The line of each case in a dataset's YAML (the root list, or the list under ``cases``)."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if getattr(k, "value", None) == "cases"), None)
    if isinstance(node, yaml.SequenceNode):
        return [item.start_mark.line + 1 for item in node.value]
    return None


__all__ = ["KINDS", "EvalCase", "EvalSet", "Judge", "Scorer", "as_score", "as_text", "find_dataset", "load_dataset"]
