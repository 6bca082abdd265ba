"""The public API is exactly what the README documents."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import orchestrator

DOCUMENTED = {
    "AnswerValidationError",
    "RemoteToolError",
    "Termination",
    "answering",
    "ask_caller",
    "media_part",
    "ApprovalDenied",
    "ApprovalRequired",
    "ApproverError",
    "ArgsValidationError",
    "Authority",
    "ConfigurationError",
    "Context",
    "Entry",
    "EntryExplanation",
    "Event",
    "Explanation",
    "FolderLimitError",
    "MediaLimitError",
    "InterpolationError",
    "Interrupted",
    "InvocationError",
    "InvocationTimeout",
    "KeyExplanation",
    "Limits",
    "Manager",
    "ModelError",
    "OrchestratorError",
    "OrderCycleError",
    "RefusedAnswerError",
    "ReturnsValidationError",
    "SecurityError",
    "SessionLostError",
    "Tool",
    "ToolDefinitionError",
    "ToolInfo",
    "ToolNotFoundError",
    "ValidationError",
    "ctx_target",
}


def test_all_is_exactly_the_documented_api():
    assert set(orchestrator.__all__) == DOCUMENTED
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Public API", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`(\w+)`", section)) - {"orchestrator"} == DOCUMENTED
    assert orchestrator.__all__ == sorted(orchestrator.__all__)
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None


def test_import_stays_light():
    code = "import sys, orchestrator; print(sorted(m for m in ('mcp', 'openai', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


PACKAGE = Path(orchestrator.__file__).resolve().parent


def package_imports_inside_functions(source: str, depth: int) -> list[int]:
    """Lines where a function imports a name from the package ``__init__`` (``from . import x``, x no submodule)."""
    submodules = {path.stem for path in PACKAGE.glob("*.py")} | {
        path.parent.name for path in PACKAGE.glob("*/__init__.py")
    }
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module is None and inner.level == depth:
                    found.extend(inner.lineno for alias in inner.names if alias.name not in submodules)
    return found


def test_version_comes_from_a_leaf_module():
    """issue 26: the version lives where importing it imports nothing else of ours."""
    from orchestrator import version

    tree = ast.parse(Path(version.__file__).read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in imports)
    assert orchestrator.__version__ == version.__version__
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"$', pyproject, re.M).group(1) == version.__version__


def test_no_module_imports_the_package_init_at_run_time():
    """issue 26: a function-level ``from . import __version__`` ties every re-exported module into one import cycle."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        depth = len(path.relative_to(PACKAGE).parts)  # orchestrator/x.py: level 1; orchestrator/agent/x.py: 2
        for line in package_imports_inside_functions(path.read_text(encoding="utf-8"), depth):
            offenders.append(f"{path.relative_to(PACKAGE)}:{line}")
    assert offenders == []
