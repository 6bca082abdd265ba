"""Any JSON as ref, args or invoke option gives a result or a typed error, in bounded time.

Each property invokes real tools (a python tool, a markdown template tool
with ``params`` behind a python middleware) through ``await manager.invoke``,
on asyncio or trio (drawn per example), with values of every JSON type at
every level, including ``$`` keys and the keys the engine gives meaning to:
only ``OrchestratorError`` may escape, and every example finishes well within
hypothesis' deadline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from samples import GREET, SHOUT

from orchestrator import ConfigurationError, InvocationError, Manager, ToolNotFoundError
from orchestrator.errors import OrchestratorError
from orchestrator.options import SEED_KEYS
from orchestrator.ordering import FIELDS

BACKENDS = st.sampled_from(["asyncio", "trio"])
REAL_TOOLS = st.sampled_from(["echo", "greet"])
OPTIONS = ("context", "middleware", "overrides", "timeout")

# Keys the engine gives meaning to, so that examples reach past the first type check.
# ``paths`` and ``cwd`` are seeded through CONTEXTS only: as middleware names they
# would reach the built-in tools' own argument handling, which is not under test here.
MEANINGFUL = [
    "locals",
    "nonlocals",
    "envelope",
    "parent",
    "target",
    "signal",
    "middleware",
    "result",
    "prompt",
    "name",
    "args",
    "before",
    "after",
    "remove",
    "fn",
    "params",
    "returns",
    "times",
    "shout",
    "execute",
    "validate-args",
    "validate-returns",
    "trust",
    "env",
    "files",
    "echo",
    "greet",
    "$order",
    "$static",
    "$dynamic",
    "$locked",
    "$remove",
    "$private",
    "$inherit",
    "$configure",
    "$execute",
    "$context",
    "$middleware",
    "$overrides",
    "$timeout",
]

KEYS = st.one_of(st.sampled_from(MEANINGFUL), st.text(max_size=8), st.text(max_size=8).map(lambda s: "$" + s))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(MEANINGFUL),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=16,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=5)
# Args beside an option: mostly valid for greet, never with '$' keys (those are options of their own).
PLAIN_ARGS = st.one_of(
    st.fixed_dictionaries({"name": st.text(max_size=10)}),
    st.dictionaries(st.sampled_from([k for k in MEANINGFUL if not k.startswith("$")]) | st.text(max_size=8), JSON),
).filter(lambda args: not any(key.startswith("$") for key in args))

# Strings for folders: short, long, deep, with NUL or a lone surrogate (JSON can carry both).
FOLDERS = st.one_of(
    st.text(max_size=20),
    st.text(alphabet="ab/.\x00\ud800", max_size=12),
    st.integers(min_value=1, max_value=12).map(lambda n: "a" * 100 * n),
    st.integers(min_value=1, max_value=1_500).map(lambda n: "a/" * n),
    st.integers(min_value=1, max_value=3).map(lambda n: ("a" * 300 + "/") * n + "b"),
)
CONTEXTS = st.dictionaries(
    st.sampled_from([*sorted(SEED_KEYS), "signal", "globals"]),
    st.one_of(JSON, OBJECTS, FOLDERS, st.lists(st.one_of(FOLDERS, JSON), max_size=3)),
    max_size=4,
)
SPEC_NAMES = st.one_of(
    st.sampled_from(["echo", "greet", "shout", "execute", "validate-args", "trust", "nope", "$configure", ""]),
    st.text(max_size=8),
)
SPECS = st.dictionaries(st.sampled_from([*FIELDS, "times"]), JSON, max_size=4)
MIDDLEWARE = st.one_of(
    st.dictionaries(SPEC_NAMES, st.one_of(SPECS, JSON), max_size=3),
    st.lists(st.one_of(SPECS, st.builds(lambda n, s: {**s, "name": n}, SPEC_NAMES, SPECS), JSON), max_size=3),
)
OPTION_VALUES = {
    "context": st.one_of(
        JSON, CONTEXTS, st.fixed_dictionaries({"locals": st.fixed_dictionaries({"middleware": MIDDLEWARE})})
    ),
    "middleware": st.one_of(JSON, MIDDLEWARE),
    "overrides": st.one_of(JSON, OBJECTS),
    "timeout": st.one_of(JSON, st.floats(), st.integers(), st.floats(min_value=1e-9, max_value=0.01)),
}

REFS = st.one_of(
    JSON,
    st.sampled_from(["echo", "greet", "shout", "execute", "team/echo", "nope", "a/b/c"]),
    st.text(alphabet="ab/.\\\x00\ud800 ~$", max_size=12),
    st.text(min_size=200, max_size=2_000),
    st.integers(min_value=1, max_value=20).map(lambda n: "a" * 300 * n),
    st.integers(min_value=1, max_value=2_000).map(lambda n: "a/" * n + "b"),
)

ECHO = """\
frontmatter = {"description": "Returns what it was given."}

def main(ctx):
    return {"args": ctx.args}
"""

PROPERTY = settings(
    max_examples=100,  # hypothesis' default, as for the suite's other properties (issue 25)
    deadline=30_000,  # a hang fails it; a loaded machine stalls an example for seconds (3 s seen), never 30
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def manager(write: Callable[[str, str], Path], tools: Path) -> Manager:
    write("tools/echo.py", ECHO)
    write("tools/team/echo.py", ECHO)
    write("tools/greet.md", GREET)
    write("tools/shout.py", SHOUT)
    return Manager([tools])


def run(backend: str, manager: Manager, ref: Any, args: Any = None, **options: Any) -> Any:
    """Invoke through ``await manager.invoke``: the result, or the typed error raised."""

    async def call() -> Any:
        try:
            return await manager.invoke(ref, args, **options)
        except OrchestratorError as exc:
            assert str(exc)  # a one-line message saying what to fix
            return exc
        except Exception as exc:
            # A tool's own code may fail on args its schema lets through (SPEC §9's shout multiplies by
            # `times`): that error is the tool's, raised as it is, and names the tool's file and line.
            notes = getattr(exc, "__notes__", [])
            assert any(note.startswith("(tool ") and ".py:" in note for note in notes), exc
            return exc

    return anyio.run(call, backend=backend)


@PROPERTY
@given(backend=BACKENDS, ref=REFS, args=st.one_of(JSON, OBJECTS))
def test_any_ref_gives_a_result_or_a_typed_error(manager: Manager, backend: str, ref: Any, args: Any) -> None:
    result = run(backend, manager, ref, args)
    if not isinstance(ref, str) or len(ref) > manager.limits.ref_length:
        # $ options are checked first: a malformed $middleware spec is a ConfigurationError (options.check_option)
        assert isinstance(result, (ToolNotFoundError, InvocationError, ConfigurationError))


@PROPERTY
@given(backend=BACKENDS, ref=REAL_TOOLS, args=st.one_of(JSON, OBJECTS))
def test_any_args_give_a_result_or_a_typed_error(manager: Manager, backend: str, ref: str, args: Any) -> None:
    result = run(backend, manager, ref, args)
    plain = not isinstance(args, dict) or not any(key.startswith("$") for key in args)
    if ref == "echo" and plain:
        assert _same(result["args"], {} if args is None else args)  # args are data, returned as given


@pytest.mark.parametrize("option", OPTIONS)
@PROPERTY
@given(data=st.data(), backend=BACKENDS, ref=REAL_TOOLS, args=PLAIN_ARGS)
def test_any_dollar_option_in_args_gives_a_result_or_a_typed_error(
    manager: Manager, option: str, data: st.DataObject, backend: str, ref: str, args: dict[str, Any]
) -> None:
    value = data.draw(OPTION_VALUES[option], label=option)
    run(backend, manager, ref, {**args, "$" + option: value})


@pytest.mark.parametrize("option", OPTIONS)
@PROPERTY
@given(data=st.data(), backend=BACKENDS, ref=REAL_TOOLS, args=PLAIN_ARGS)
def test_any_keyword_option_gives_a_result_or_a_typed_error(
    manager: Manager, option: str, data: st.DataObject, backend: str, ref: str, args: dict[str, Any]
) -> None:
    value = data.draw(OPTION_VALUES[option], label=option)
    run(backend, manager, ref, args, **{option: value})


# -- examples the properties found, each with the error it now gives -------------------------


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("a" * 10_000, r"at most 1024 characters \(Limits.ref_length\)"),
        ("a" * 256, "at most 255 bytes"),
        ("team/" + "é" * 128, "at most 255 bytes"),
        ("\ud800", "text a file name can hold"),
        (["echo"], "a ref must be a non-empty string, not list"),
        ({"$context": 5}, "a ref must be a non-empty string, not dict"),
        (5, "a ref must be a non-empty string, not int"),
    ],
)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_bad_refs_are_refused_before_any_file_is_touched(
    manager: Manager, monkeypatch: pytest.MonkeyPatch, backend: str, ref: Any, needle: str
) -> None:
    def no_stat(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused ref reached the file system")

    with monkeypatch.context() as patch:
        patch.setattr("os.stat", no_stat)
        patch.setattr("os.lstat", no_stat)
        result = run(backend, manager, ref)
    assert isinstance(result, ToolNotFoundError)
    assert result.searched == []
    assert re.search(needle, str(result)), str(result)
    assert len(str(result)) < 300  # a long ref is cut in the message


@pytest.mark.parametrize(
    ("args", "options", "error", "needle"),
    [
        (
            {"$context": 5},
            {},
            InvocationError,
            r"\$context must be a mapping of locals, nonlocals, envelope, .* not int",
        ),
        ({}, {"context": [1]}, InvocationError, "context must be a mapping of locals, .* not list"),
        ({"$context": {"locals": 5}}, {}, InvocationError, r"\$context.locals must be a mapping, not int"),
        ({"$context": {"nonlocals": []}}, {}, InvocationError, r"\$context.nonlocals must be a dict"),
        ({"$context": {"envelope": "x"}}, {}, InvocationError, r"\$context.envelope must be a mapping, not str"),
        ({"$context": {"parent": {}}}, {}, InvocationError, r"\$context.parent must be a Context"),
        ({"$context": {"paths": [1]}}, {}, InvocationError, r"\$context.paths must be a folder or a list"),
        ({"$context": {"paths": "a\x00"}}, {}, InvocationError, "without NUL"),
        ({"$context": {"paths": ["a" * 300 + "/b"]}}, {}, InvocationError, "255 per name"),
        ({"$context": {"cwd": 5}}, {}, InvocationError, r"\$context.cwd must be a folder"),
        ({"$context": {"globals": 1}}, {}, InvocationError, "unknown context key"),
        ({"$context": {"locals": {"middleware": 5}}}, {}, ConfigurationError, "a middleware spec is"),
        ({"$middleware": 5}, {}, ConfigurationError, "mapping or a list: a middleware spec is"),
        ({"$middleware": {"shout": 5}}, {}, ConfigurationError, r"a middleware spec is \{args: ...\}?.*got 5"),
        ({"$middleware": [{"name": 5}]}, {}, ConfigurationError, "needs a 'name'"),
        ({"$middleware": {"shout": {"remove": "yes"}}}, {}, ConfigurationError, "'remove' must be true or false"),
        ({"$overrides": [1]}, {}, InvocationError, r"\$overrides must be a mapping"),
        ({}, {"overrides": "x"}, InvocationError, "overrides must be a mapping"),
        ({"$timeout": math.nan}, {}, InvocationError, "positive number of seconds or null, not nan"),
        ({"$timeout": True}, {}, InvocationError, "positive number"),
        ({}, {"timeout": -1}, InvocationError, "positive number"),
        ({}, {"timeout": "1"}, InvocationError, "positive number"),
    ],
)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_bad_options_say_what_was_expected(
    manager: Manager, backend: str, args: Any, options: dict[str, Any], error: type[Exception], needle: str
) -> None:
    result = run(backend, manager, "greet", {"name": "Ada", **args}, **options)
    assert type(result) is error
    assert re.search(needle, str(result)), str(result)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_timeout_beyond_any_clock_means_no_timeout(manager: Manager, backend: str) -> None:
    assert run(backend, manager, "echo", {"x": 1, "$timeout": 10**400}) == {"args": {"x": 1}}
    assert run(backend, manager, "echo", {"x": 1}, timeout=math.inf) == {"args": {"x": 1}}


def _same(a: Any, b: Any) -> bool:
    """Equality that treats nan as equal to itself (the echo returns the very values it got)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
