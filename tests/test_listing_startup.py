"""Issue 24, the start-up of ``toolcascade``: ``--help`` describes the lazy commands without importing them.

The test suite runs ``toolcascade`` as a subprocess hundreds of times, and a
user runs ``--help`` first: each command that lives in its own module
(``cli.LAZY``) is described by ``cli.LAZY_HELP`` until it is run.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
from click.testing import CliRunner

from orchestrator.cli import LAZY, LAZY_HELP, cli

HELP = """
import json, sys
from orchestrator.cli import main
sys.argv = ["toolcascade", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("orchestrator."))))
"""


def imported(*arguments: str) -> set[str]:
    """The ``orchestrator`` modules a new ``toolcascade ARGUMENTS`` process imported."""
    done = subprocess.run(
        [sys.executable, "-c", HELP, *arguments], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_each_lazy_commands_help_is_its_own_short_help() -> None:
    assert LAZY_HELP.keys() == LAZY.keys()
    for name, target in LAZY.items():
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        assert command.short_help == LAZY_HELP[name], name


def test_help_lists_every_command_in_order_without_importing_the_lazy_ones() -> None:
    modules = imported("--help")
    lazy = {target.partition(":")[0] for target in LAZY.values()}
    assert not modules & lazy, modules & lazy
    shown = CliRunner().invoke(cli, ["--help"]).output.split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in shown if line.startswith("  ") and not line.startswith("    ")]
    assert names == ["run", "list", "show", "check", "serve", *LAZY]
    for name, text in LAZY_HELP.items():
        assert " ".join(text.split()) in " ".join(" ".join(shown).split()), name


def test_a_lazy_command_still_runs_from_the_command_line() -> None:
    assert "orchestrator.chat" in imported("sessions", "--help")
    assert "List the sessions" in CliRunner().invoke(cli, ["sessions", "--help"]).output
