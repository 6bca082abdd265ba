"""What ``run``, ``chat`` and ``resume`` print of a run: the answer streamed on a terminal (``Screen``), the
result once, and ``--verbose``'s notes on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .errors import OrchestratorError
from .events import Event
from .events import describe as describe_event

if TYPE_CHECKING:
    from .display import Live
    from .manager import Manager


def say_stopped(event: Event) -> None:
    """``run --verbose``: name the entry that ended a chain without calling ``next()`` (a ``chain.stopped`` event)."""
    line = describe_event(event)
    if line is not None:
        click.echo(line, err=True)


class Screen:
    """What ``run``, ``chat`` and ``resume`` show of an answer on a terminal: ``display.Live``, told what to skip.

    Live streams the top-level model's text as it arrives. An agent with
    ``returns`` answers in JSON, printed once at the end, so its text does
    not stream (a prose answer it gave first would be replaced anyway); its
    tool calls still show. Streamed text ends its line before the next turn
    or tool call, and ``answer`` is the last turn's text: what of the result
    is on the screen already.
    """

    def __init__(self, live: Live, structured: Callable[[str], bool]) -> None:
        self.live = live
        self.structured = structured  # asked once, with the top-level tool's name, at the run's first event
        self.stream: bool | None = None
        self.turn = 0  # where the last turn's text begins in live.streamed
        self.open = False  # the streamed text stops mid-line

    def __call__(self, event: Event) -> None:
        top = event.depth == 0
        if top and self.stream is None:
            self.stream = not self.structured(event.tool)
        if top and event.kind == "model.delta" and not self.stream:
            return
        if top and event.kind in ("model.request", "tool.start"):
            self.end_line()
            if event.kind == "model.request":
                self.turn = len(self.live.streamed)
        self.live(event)
        if top and event.kind == "model.delta" and event.data.get("text"):
            self.open = not str(event.data["text"]).endswith("\n")
        elif top and event.kind == "model.discarded" and not self.live.streamed:
            self.turn, self.open = 0, False  # Live ended the line and forgot the text

    def end_line(self) -> None:
        """End the line the streamed text left open."""
        if self.open:
            self.open = False
            click.echo()

    @property
    def answer(self) -> str:
        """The text streamed since the last model request: the answer, when the result is text."""
        return "".join(self.live.streamed[self.turn :])


def answers_in_json(manager: Manager, ref: str, overrides: dict[str, Any] | None = None) -> bool:
    """Whether ``ref`` has ``returns``: its answer is printed at the end, never streamed."""
    try:
        explanation = manager.explain(ref, overrides=overrides or None, render=False)
    except OrchestratorError:
        return False  # the run itself reports what is wrong
    return any(item.key == "returns" for item in explanation.keys)


def echo_result(result: Any, screen: Screen | None) -> None:
    """Print a result: a string as it is (finishing what streamed of it), anything else as JSON, once."""
    shown = screen.answer if screen is not None else ""
    if isinstance(result, str) and shown and result.startswith(shown):
        rest = result[len(shown) :]  # the answer streamed already: finish it
        click.echo(rest, nl=not rest.endswith("\n"))
        return
    if screen is not None:
        screen.end_line()
    if isinstance(result, str):
        click.echo(result, nl=not result.endswith("\n"))
    else:
        click.echo(json.dumps(result, indent=2, default=str, ensure_ascii=False))
