"""The built-ins and features use the public API only (issue 26, point 4; STYLE.md "The core does not know its features").

A module reads another module's ``_private`` name only through a missing
public method, so the scan below is the list of missing methods: empty for
``tools/`` (files users copy) and the documented exceptions for
``orchestrator/``. The rule is the structure script's: an ``x._name`` read
counts unless ``x`` is ``self``/``cls`` or a class of the same file defines
``_name`` (a method, a class attribute or a slot).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import orchestrator
from orchestrator import Context
from orchestrator.context import BoundManager

ROOT = Path(__file__).resolve().parent.parent
# Not ours to make public: the standard library's documented ``os._exit`` (the CLI's exit past a stuck thread),
# and jinja2's name-mangled ``Namespace.__attrs`` (the sandbox bounds what a template stores in one).
EXCEPTIONS = frozenset({("os", "_exit"), ("value", "_Namespace__attrs")})


def _owned(tree: ast.Module) -> set[str]:
    """The names a file's own classes define (methods, class attributes, slots) or its code sets on self/cls."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            elif isinstance(item, ast.Assign):
                for target in item.targets:
                    if not isinstance(target, ast.Name):
                        continue
                    names.add(target.id)
                    if target.id == "__slots__" and isinstance(item.value, (ast.Tuple, ast.List)):
                        names.update(str(e.value) for e in item.value.elts if isinstance(e, ast.Constant))
    return names


def private_reads(folder: Path) -> Iterator[tuple[str, str, str]]:
    """Every cross-module ``x._name`` read under ``folder``: (file relative to it, the object's source, the name)."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owned = _owned(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in owned:
                continue
            base = ast.unparse(node.value)
            if base not in ("self", "cls"):
                yield str(path.relative_to(folder)), base, name


def test_the_built_in_tools_read_no_private_name() -> None:
    assert list(private_reads(ROOT / "tools")) == []


def test_the_package_reads_no_other_modules_private_names_but_the_documented_exceptions() -> None:
    reads = [(file, base, name) for file, base, name in private_reads(ROOT / "orchestrator")]
    assert [read for read in reads if (read[1], read[2]) not in EXCEPTIONS] == []
    assert len(reads) <= 2


def test_the_built_in_tools_import_only_public_names() -> None:
    for path in sorted((ROOT / "tools").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("orchestrator"):
                module = node.module or ""
                assert not any(part.startswith("_") for part in module.split(".")), (path.name, module)
                assert not any(alias.name.startswith("_") for alias in node.names), (path.name, module)


def test_the_scan_finds_a_private_read(tmp_path: Path) -> None:
    """The scan is not vacuous: a read of another module's private slot is reported, a read of its own is not."""
    (tmp_path / "m.py").write_text(
        "class Own:\n    __slots__ = ('_mine',)\n\ndef f(ctx, own):\n    return ctx._values, own._mine, self_._x\n"
    )
    found = {(base, name) for _file, base, name in private_reads(tmp_path)}
    assert found == {("ctx", "_values"), ("self_", "_x")}


def test_the_engine_handles_of_a_context_are_public(write: Callable[[str, str], Path], tools: Path) -> None:
    """What features need of a context is public: its Manager, the run's record, the engine's limits."""
    write("tools/t.py", "async def main(ctx):\n    return 1\n")
    manager = orchestrator.Manager([tools])
    ctx = manager.prepare("t", {})
    assert isinstance(ctx, Context) and ctx.owner is manager
    assert ctx.shared.id == ctx.run.id and ctx.shared.kept_state is None
    bound = ctx.manager
    assert isinstance(bound, BoundManager) and bound.limits is manager.limits
    assert callable(bound.invoke_entry) and callable(manager.run) and callable(manager.enter)


@pytest.mark.anyio
async def test_a_middleware_invokes_an_entry_of_its_target_and_a_cycle_is_skipped(
    write: Callable[[str, str], Path], tools: Path
) -> None:
    """``ctx.manager.invoke_entry`` runs a tool as an entry of the chain it serves (R-CHAIN-10), as directives do."""
    write(
        "tools/twice.py",
        """
        from orchestrator.chain import SKIPPED

        async def main(ctx):
            target = ctx.target
            echoed = await target.manager.invoke_entry("echo", {"x": 1})
            looped = await target.manager.invoke_entry("page", {})
            target.locals["seen"] = (echoed, looped is SKIPPED)
            return await target.manager.next()
        """,
    )
    write("tools/echo.py", "async def main(ctx):\n    return [ctx.args, ctx.parent.tool.name, ctx.target.tool.name]\n")
    write(
        "tools/page.py",
        "frontmatter = {'metadata': {'twice': {}}}\n\nasync def main(ctx):\n    return ctx.locals['seen']\n",
    )
    manager = orchestrator.Manager([tools])
    echoed, skipped = await manager.invoke("page")
    assert echoed == [{"x": 1}, "page", "page"] and skipped


@pytest.mark.anyio
async def test_prepare_then_run_is_an_invocation_and_invoke_with_a_parent_joins_its_run(
    write: Callable[[str, str], Path], tools: Path
) -> None:
    """What an executor does with a unit (``prepare``, ``run``) and what ``ctx.manager.invoke`` does (``parent=``)."""
    write("tools/t.py", "async def main(ctx):\n    return {'args': ctx.args, 'run': ctx.run.id, 'depth': ctx.depth}\n")
    manager = orchestrator.Manager([tools])
    ctx = manager.prepare("t", {"a": 1})
    assert ctx.chain is not None and await manager.run(ctx) == {"args": {"a": 1}, "run": ctx.run.id, "depth": 0}
    child = await manager.invoke("t", {"b": 2}, parent=ctx)
    assert child == {"args": {"b": 2}, "run": ctx.run.id, "depth": 1}
