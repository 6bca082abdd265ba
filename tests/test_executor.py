"""Executors without an engine (issue 16): units, the in-process executor, errors across the wire, delegate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator import (
    ArgsValidationError,
    ConfigurationError,
    InvocationError,
    InvocationTimeout,
    Manager,
    OrchestratorError,
    ToolNotFoundError,
)
from orchestrator import errors as errors_module
from orchestrator.executor import (
    Executor,
    InProcessExecutor,
    Managers,
    dump_error,
    executor_for,
    folder_ref,
    invoke_on,
    load_error,
    run_unit,
    unit_for,
    unwrap,
)

pytestmark = pytest.mark.anyio

SQUARE = """
    import os

    frontmatter = {"metadata": {
        "params": {"type": "object", "properties": {"n": {"type": "integer"}, "k": {"type": "integer", "default": 2}}},
        "delegate": {"engine": "inprocess"},
    }}

    async def main(ctx):
        ctx.nonlocals["touched"] = True
        return {"value": ctx.args["n"] ** ctx.args["k"], "depth": ctx.depth, "seen": ctx.locals.get("stamp"),
                "stamps": ctx.nonlocals.get("stamps"), "pid": os.getpid()}
    """
STAMP = """
    frontmatter = {"role": "middleware"}

    async def main(ctx):
        target = ctx.target
        target.locals["stamp"] = "caller"
        target.nonlocals["stamps"] = target.nonlocals.get("stamps", 0) + 1
        return await target.manager.next()
    """


@pytest.fixture
def square(write: Any, tmp_path: Path) -> Manager:
    write("tools/square.py", SQUARE)
    write("tools/stamp.py", STAMP)
    return Manager([tmp_path / "tools"])


async def test_in_process_executor_runs_a_unit_through_json(square: Manager) -> None:
    executor = InProcessExecutor()
    assert isinstance(executor, Executor)
    unit = unit_for(square, "square", {"n": 3, "k": 3})
    assert json.loads(json.dumps(unit)) == unit  # plain JSON
    assert unit["folders"] == [{"path": str(square.paths[0].folder), "trusted": True}]
    result = await executor.submit(unit)
    assert result["value"] == 27 and result["depth"] == 0


async def test_delegate_engine_form_runs_the_rest_of_the_chain_on_the_executor(square: Manager) -> None:
    nonlocals: dict[str, Any] = {}
    result = await square.invoke(
        "square",
        {"n": 4, "$middleware": {"stamp": {"before": ["delegate"], "after": ["trust"]}}},
        context={"nonlocals": nonlocals},
    )
    # params ran again on the worker (default k=2); stamp ran once, on the caller, and its local travelled
    assert result["value"] == 16 and result["seen"] == "caller" and result["stamps"] == 1
    assert nonlocals == {"stamps": 1}  # the worker changed a copy: nothing comes back


async def test_delegate_carries_the_depth_and_the_limit_holds(write: Any, square: Manager, tmp_path: Path) -> None:
    write(
        "tools/outer.py",
        """
        async def main(ctx):
            return await ctx.manager.invoke("square", {"n": 2})
        """,
    )
    assert (await square.invoke("outer"))["depth"] == 1
    unit = unit_for(square, "square", {"n": 2})
    unit.update(depth=65, rest=[])
    with pytest.raises(InvocationError, match="depth limit"):
        await InProcessExecutor().submit(unit)


async def test_delegate_string_form_still_hands_the_body_to_another_tool(write: Any, tmp_path: Path) -> None:
    write("tools/real.md", "---\ndescription: r\n---\nreal {{ args.x }}")
    write("tools/front.md", "---\nmetadata:\n  delegate: real\n---\nnever")
    assert await Manager([tmp_path / "tools"]).invoke("front", {"x": 1}) == "real 1"


async def test_manager_executor_is_the_default_engine_of_delegate(write: Any, tmp_path: Path) -> None:
    write("tools/job.md", "---\nmetadata:\n  delegate: {}\n---\njob {{ args.x }}")
    seen: list[dict[str, Any]] = []

    class Recording:
        async def submit(self, unit: dict[str, Any]) -> Any:
            seen.append(unit)
            return await InProcessExecutor().submit(unit)

    manager = Manager([tmp_path / "tools"], executor=Recording())
    assert await manager.invoke("job", {"x": 5}) == "job 5"
    # The rest of the chain after delegate: trust has nothing to narrow, so the plan left it out and
    # nothing is replayed for it.
    rest = [e["name"] for e in seen[0]["rest"]]
    assert seen[0]["tool"] == "job" and "delegate" not in rest and "trust" not in rest


async def test_errors_come_back_as_the_same_class_with_their_fields(square: Manager, write: Any) -> None:
    write(
        "tools/raiser.py",
        """
        frontmatter = {"metadata": {"delegate": {"engine": "inprocess"}}}

        def main(ctx):
            raise KeyError("boom")
        """,
    )
    with pytest.raises(ArgsValidationError) as caught:
        await square.invoke("square", {"n": "x"})
    assert caught.value.tool == "square" and [pointer for pointer, _ in caught.value.errors] == ["/n"]
    with pytest.raises(InvocationError, match="KeyError: 'boom'") as foreign:
        await square.invoke("raiser")
    assert any("raiser.py:4" in note for note in foreign.value.__notes__)
    with pytest.raises(ToolNotFoundError) as missing:
        await InProcessExecutor().submit(unit_for(square, "nope"))
    assert missing.value.ref == "nope"


ERRORS = [
    cls
    for cls in vars(errors_module).values()
    if isinstance(cls, type) and issubclass(cls, OrchestratorError) and cls.__module__ == errors_module.__name__
]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_class_round_trips_with_its_fields(cls: type[OrchestratorError]) -> None:
    exc = cls.__new__(cls)
    OrchestratorError.__init__(exc, "what went wrong", tool="t", path="tools/t.md", line=3, level="t", key="k")
    back = load_error(json.loads(json.dumps(dump_error(exc))))
    assert type(back) is cls and str(back) == str(exc)
    assert (back.tool, back.path, back.line, back.level, back.key) == ("t", "tools/t.md", 3, "t", "k")


def test_an_unknown_subclass_becomes_its_nearest_known_base() -> None:
    class QuotaError(ConfigurationError):
        pass

    back = load_error(dump_error(QuotaError("over quota", tool="t")))
    assert type(back) is ConfigurationError and "raised on the worker as QuotaError" in back.__notes__[0]


async def test_a_timeout_cancels_the_unit_and_its_finally_runs(write: Any, tmp_path: Path) -> None:
    marker = tmp_path / "finally.txt"
    write(
        "tools/slow.py",
        f"""
        import anyio

        frontmatter = {{"metadata": {{"delegate": {{"engine": "inprocess"}}}}}}

        async def main(ctx):
            try:
                await anyio.sleep(30)
            finally:
                with open({str(marker)!r}, "w") as handle:
                    handle.write("ran")
        """,
    )
    started = time.monotonic()
    with pytest.raises(InvocationTimeout):
        await Manager([tmp_path / "tools"]).invoke("slow", {"$timeout": 0.2})
    assert time.monotonic() - started < 10 and marker.read_text() == "ran"


async def test_bad_units_get_typed_errors_never_a_crash(square: Manager, tmp_path: Path) -> None:
    managers = Managers()
    for bad in ("[1]", "{}", json.dumps({"tool": "x", "v": 99}), json.dumps({"tool": "x", "depth": -1}), "{"):
        with pytest.raises(OrchestratorError):
            unwrap(await run_unit(managers, bad))
    gone = unit_for(square, "square", {"n": 1})
    gone["folders"] = [{"path": str(tmp_path / "missing")}]
    with pytest.raises(ConfigurationError, match="working_dir"):
        unwrap(await run_unit(managers, gone))
    gone["folders"] = [{"package": "no_such_package_here", "folder": "tools"}]
    with pytest.raises(ConfigurationError, match="not installed"):
        unwrap(await run_unit(managers, gone))
    with pytest.raises(InvocationError, match="plain JSON"):
        unit_for(square, "square", {"n": object()})


async def test_a_result_json_cannot_carry_is_an_error(write: Any, tmp_path: Path) -> None:
    write(
        "tools/odd.py",
        'frontmatter = {"metadata": {"delegate": {"engine": "inprocess"}}}\n\ndef main(ctx):\n    return {1, 2}\n',
    )
    with pytest.raises(InvocationError, match="plain JSON"):
        await Manager([tmp_path / "tools"]).invoke("odd")


async def test_registered_functions_cannot_travel(tmp_path: Path) -> None:
    manager = Manager()
    manager.register("fn", lambda ctx: 1, metadata={"delegate": {"engine": "inprocess"}})
    with pytest.raises(ConfigurationError, match="registered function"):
        await manager.invoke("fn")


@pytest.mark.parametrize(
    "spec",
    ["spark", {"engine": "ray", "pool": 0}, {"engine": "ray", "address": 5}, 42, {"engine": "inprocess", "pool": True}],
)
def test_bad_executor_specs_are_configuration_errors(spec: Any) -> None:
    with pytest.raises(ConfigurationError):
        executor_for(spec)


async def test_delegate_checks_its_own_spec(write: Any, tmp_path: Path) -> None:
    write("tools/j.md", "---\nmetadata:\n  delegate: {engine: spark}\n---\nx")
    with pytest.raises(ArgsValidationError, match="engine"):
        await Manager([tmp_path / "tools"]).invoke("j")


def test_folder_refs_are_relative_to_a_shipped_root(tmp_path: Path) -> None:
    (tmp_path / "proj" / "tools").mkdir(parents=True)
    assert folder_ref(tmp_path / "proj" / "tools", tmp_path / "proj") == {"path": "tools"}
    assert folder_ref(tmp_path / "proj" / "tools") == {"path": str((tmp_path / "proj" / "tools").resolve())}
    site = Path(anyio.__file__).resolve().parent
    assert folder_ref(site / "abc") == {"package": "anyio", "folder": "abc"}


def test_import_orchestrator_never_imports_ray() -> None:
    code = "import sys, orchestrator, orchestrator.executor, orchestrator.batch; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


async def test_invoke_on_runs_a_whole_invocation_as_one_unit(square: Manager) -> None:
    result = await invoke_on("inprocess", square, "square", {"n": 5}, overrides={"$remove": ["delegate"]})
    assert result["value"] == 25 and result["pid"] == os.getpid()
