"""Shared fixtures: every async test runs on asyncio and trio; tools are real files in tmp_path."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from precompile import compile_project

# Hypothesis's speed checks measure the machine, not the code: on a loaded CI runner one slow draw (a collection
# pause, a busy core) failed a property test that holds. Properties are still checked on every example.
settings.register_profile("toolcascade", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolcascade")


@pytest.fixture(autouse=True, scope="session")
def _index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Listings write their on-disk index (orchestrator.index) into a temporary folder, never the user's cache."""
    import mcp.client.stdio

    folder = tmp_path_factory.mktemp("toolcascade-cache")
    # Nor does a developer's own user or managed AUTHORITY.md reach a test: both point at empty places.
    placed = tmp_path_factory.mktemp("toolcascade-config")
    chosen = {
        "TOOLCASCADE_CACHE": str(folder),
        "TOOLCASCADE_CONFIG": str(placed / "user"),
        "TOOLCASCADE_MANAGED": str(placed / "managed" / "AUTHORITY.md"),
        # The CLI's run log goes to a file of the session's own, never the developer's state folder.
        "TOOLCASCADE_RUNLOG": str(folder / "runs.db"),
    }
    before = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    # MCP's stdio client starts servers with a few variables only (HOME, PATH, ...): pass these on too.
    inherited = mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS
    mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS = (*inherited, *chosen)  # type: ignore[assignment]
    yield folder
    mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS = inherited
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own cache folder, with the on-disk index and kept check verdicts on (for the cache tests).

    It takes the place of pytest's own ``cache`` fixture, which no test here uses.
    """
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOOLCASCADE_CACHE", str(folder))
    monkeypatch.delenv("TOOLCASCADE_INDEX", raising=False)
    return folder


NOT_RUN = pytest.StashKey[list[str]]()


@pytest.fixture
def not_run(request: pytest.FixtureRequest) -> list[str]:
    """Documentation blocks a test could not run here, with why: listed once in the summary, not among the dots."""
    return request.config.stash.setdefault(NOT_RUN, [])


def pytest_configure(config: pytest.Config) -> None:
    """Write the project's bytecode once, before xdist starts its workers: the suite's child processes read it."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist; not each worker again
        compile_project()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    reasons = config.stash.get(NOT_RUN, [])
    if reasons:
        terminalreporter.section("documentation blocks not run here")
        for reason in reasons:
            terminalreporter.line(f"not run: {reason}")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


Write = Callable[[str, str], Path]


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """write('tools/greet.md', text) creates the file (dedented) under tmp_path and returns its path."""

    def _write(rel: str, text: str) -> Path:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Point model aliases at offline scripted models: ``scripted(sonnet=turns, ...)`` (as other formats' files name models)."""
    import json

    def _set(**turns: list[Any]) -> None:
        table = {alias: {"provider": "scripted", "script": script} for alias, script in turns.items()}
        monkeypatch.setenv("TOOLCASCADE_MODEL_ALIASES", json.dumps(table))

    return _set
