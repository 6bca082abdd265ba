"""What ``check`` reports: a ``Problem``, the ``Report`` that collects them, and where in a file a key is set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import OrchestratorError

if TYPE_CHECKING:
    from .cascade import Plan
    from .tool import Tool


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding of ``check``: where it is, what it is, and whether it fails the check."""

    path: str | None
    line: int | None
    message: str
    severity: str = "error"  # 'error' | 'warning'

    def __str__(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        if self.path is None:
            return f"{label}{self.message}"
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {label}{self.message}"


class Report:
    """Collects problems, with paths shown relative to the working directory when inside it."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.found: dict[Problem, None] = {}

    def add(self, path: Path | str | None, line: int | None, message: str, severity: str = "error") -> None:
        self.found.setdefault(Problem(self._show(path), line, message, severity))

    def warn(self, path: Path | str | None, line: int | None, message: str) -> None:
        self.add(path, line, message, "warning")

    def error(self, exc: Exception, path: Path | None, line: int | None = None) -> None:
        """Report an exception; its own file and line win over the fallback ``path``/``line``."""
        if not isinstance(exc, OrchestratorError):
            self.add(path, line, f"internal error while checking: {type(exc).__name__}: {exc}")
            return
        message = str(exc)
        if exc.where and message.startswith(exc.where + ": "):
            message = message[len(exc.where) + 2 :]
        if exc.path is not None:
            path, line = Path(exc.path), exc.line
        self.add(path, line, message)

    def shown(self, path: Path | str) -> str:
        """A path as problems show it."""
        return self._show(path) or str(path)

    def problems(self) -> list[Problem]:
        """The problems found, sorted by file and line."""
        return sorted(self.found, key=lambda p: (p.path or "", p.line or 0))

    def _show(self, path: Path | str | None) -> str | None:
        if path is None:
            return None
        try:
            return str(Path(path).relative_to(self.cwd))
        except ValueError:
            return str(path)


def name_line(path: Path) -> int | None:
    """The line of a top-level ``name:`` in a file's frontmatter (or ``"name":`` in a python tool), if any."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, 1):
                if line.startswith("name:") or line.lstrip().startswith(('"name":', "'name':")):
                    return number
                if number > 200:
                    break
    except OSError:
        return None
    return None


def where_key(tool: Tool, plan: Plan, key: str) -> tuple[Path | None, int | None]:
    """The file and line of the level whose value of ``key`` the merge kept (else the tool's own line)."""
    source = plan.raw.sources.get(key)
    for level in reversed(plan.levels):
        if source is not None and level.name == source.level and key in level.data:
            return level.path, level.lines.get(key)
    return tool.path, tool.line_of(key)
