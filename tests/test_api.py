"""The public API is exactly what the README documents."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orchestrator

DOCUMENTED = {
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
