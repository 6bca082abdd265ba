"""The conversation commands: ``chat``, ``sessions list|show|delete`` and ``resume``.

They are loaded only when used (``cli.LAZY``). Every one takes ``--store
FILE``, the session store (default: ``TOOLCASCADE_SESSIONS``, else
``~/.local/state/toolcascade/sessions.db``), and the usual ``--path DIR``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from .approval import Decision, terminal
from .cli import (
    Screen,
    answers_in_json,
    command_manager,
    debug_option,
    echo_result,
    fail,
    json_option,
    path_option,
    reporting,
    resume_options,
)
from .display import progress
from .errors import Interrupted, describe
from .exits import say_paused
from .manager import Manager
from .options import SESSION_ID
from .outputs import printable
from .questions import answering

F = TypeVar("F", bound=Callable[..., Any])
EXIT = ("/exit", "/quit")


def store_option(fn: F) -> F:
    return click.option(
        "--store",
        metavar="FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The session store, a SQLite file. Default: $TOOLCASCADE_SESSIONS, "
        "else ~/.local/state/toolcascade/sessions.db.",
    )(fn)


def check_session(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A session id as ``$context.session`` accepts it."""
    if value is not None and not SESSION_ID.fullmatch(value):
        raise click.BadParameter("letters, digits and . _ : @ - (at most 128, starting with a letter or digit)")
    return value


def watched(manager: Manager, label: str, call: Callable[[], Any], ref: str | None = None) -> tuple[Any, Screen | None]:
    """Run ``call`` with the spinner and streamed answer on a terminal; its result and what was shown.

    ``ref`` is the tool that answers (else the name of the run's tool): when it has ``returns``, its
    answer does not stream and is printed once, as JSON.
    """
    with progress(label) as live:
        screen = None
        if live is not None:
            screen = Screen(live, lambda name: answers_in_json(manager, ref or name))
            manager.events.listeners.append(screen)
        try:
            return call(), screen
        finally:
            if screen is not None:
                manager.events.listeners.remove(screen)


def input_key(manager: Manager, agent: str) -> str:
    """The argument a chat line goes in: the only property of the agent's ``params``, else ``message``."""
    params = manager.describe(agent).params
    properties = params.get("properties") if isinstance(params, dict) else None
    if isinstance(properties, dict) and len(properties) == 1:
        return str(next(iter(properties)))
    return "message"


def ask_decision(exc: Interrupted) -> Decision:
    """Ask on the terminal what to do with the call a chat turn holds."""
    request = exc.request
    shown = json.dumps(request.get("args"), ensure_ascii=False, default=str)
    click.echo(f"approval needed: {request.get('tool', '?')} {shown}", err=True)
    if request.get("description"):
        click.echo(f"  what it does: {request['description']}", err=True)
    changed = request.get("changed")
    if isinstance(changed, dict):
        before = json.dumps(changed.get("args"), ensure_ascii=False, default=str)
        click.echo(
            f"  the call changed since the last question, which was about: {changed.get('tool')} {before}", err=True
        )
    answer = click.prompt("approve? [y]es / [n]o / [e]dit", type=click.Choice(["y", "n", "e"]), err=True)
    if answer == "y":
        return Decision("approve")
    if answer == "n":
        reason = click.prompt("reason", default="denied by the user", err=True)
        return Decision("deny", reason=reason)
    edited = click.prompt("arguments (JSON)", default=shown, err=True)
    try:
        return Decision.of({"action": "edit", "args": json.loads(edited)})
    except Exception as problem:  # a typo must not end the chat: deny instead, saying why
        click.echo(f"error: {problem}; the call is denied", err=True)
        return Decision("deny", reason="the edited arguments were not valid")


@click.command(short_help="Talk with an agent on the terminal; the session keeps the conversation.")
@click.argument("agent")
@click.option("--session", "session_id", metavar="ID", callback=check_session, help="Continue this session.")
@click.option(
    "--key", metavar="NAME", help="The argument each line goes in (default: the agent's only param, else message)."
)
@store_option
@path_option
@debug_option
def chat(
    agent: str, session_id: str | None, key: str | None, store: Path | None, paths: Sequence[Path], debug: bool
) -> None:
    """Talk with AGENT: each line you type runs it in one session, and its answer streams back.

    Without --session a new session id is made and printed; pass it later
    to continue. /exit or Ctrl-D ends. A tool call that needs approval is
    asked about here, and so is a middleware's question to its caller.

    \b
    Examples:
      toolcascade chat assistant
      toolcascade chat assistant --session s-4f2a9c01d3e5
    """
    from .sessions import new_session_id

    with reporting(debug):
        manager = command_manager(paths, sessions=store)
        key = key or input_key(manager, agent)
    session = session_id or new_session_id()
    asker = terminal()
    asking = sys.stdin.isatty()
    prompt = "> " if asking else ""  # piped lines need no prompt in the output
    click.echo(f"session {session} (continue with --session {session}); /exit or Ctrl-D ends", err=True)
    while True:
        try:
            line = input(prompt)
        except EOFError:  # Ctrl-D ends the chat; Ctrl-C interrupts it (exit 130, as the group says)
            click.echo()
            return
        text = line.strip()
        if not text:
            continue
        if text in EXIT:
            return
        try:
            args = {key: text}
            with answering(asker.respond):  # a middleware's question is asked here (orchestrator.questions)
                result, screen = watched(
                    manager, agent, partial(manager.invoke_sync, agent, args, context={"session": session}), agent
                )
        except Interrupted as held:
            if not asking:  # piped lines are the conversation, not answers: the held turn waits for resume
                say_paused(held, resume_options(paths, store))
                continue
            try:
                with answering(asker.respond):
                    result, screen = resumed(manager, agent, held)
            except Exception as exc:
                click.echo(f"error: {describe(exc)}", err=True)
                continue
        except Exception as exc:  # one failed turn does not end the conversation
            click.echo(f"error: {describe(exc)}", err=True)
            continue
        echo_result(printable(result), screen)


def resumed(manager: Manager, agent: str, held: Interrupted) -> tuple[Any, Screen | None]:
    """Ask about each held call and resume until the turn answers."""
    while True:
        decision = ask_decision(held)
        try:
            return watched(manager, agent, partial(anyio.run, manager.resume, held.token, decision), agent)
        except Interrupted as again:
            held = again


@click.group(short_help="List, show or delete stored conversations.")
def sessions() -> None:
    """List, show or delete the conversations in the session store.

    \b
    Examples:
      toolcascade sessions list
      toolcascade sessions show s-4f2a9c01d3e5 --json
      toolcascade sessions delete s-4f2a9c01d3e5
    """


def _store(store: Path | None) -> Any:
    return Manager((), sessions=store).sessions


@sessions.command(name="list", short_help="List the sessions, most recent first.")
@store_option
@json_option
@debug_option
def list_sessions(store: Path | None, as_json: bool, debug: bool) -> None:
    """List the sessions: id, agent, messages, last update (most recent first)."""
    with reporting(debug):
        found = anyio.run(_store(store).sessions)
    if as_json:
        click.echo(json.dumps([info.to_json() for info in found], indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo("no sessions", err=True)
        return
    click.echo(f"{'SESSION':<24} {'AGENT':<24} {'MESSAGES':>8}  UPDATED")
    for info in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.updated))
        click.echo(f"{info.id:<24} {info.agent or '-':<24} {info.messages:>8}  {when}")


@sessions.command(short_help="Print a session's messages.")
@click.argument("session_id", metavar="ID", callback=check_session)
@store_option
@json_option
@debug_option
def show(session_id: str, store: Path | None, as_json: bool, debug: bool) -> None:
    """Print the messages of session ID, one per line (--json: the messages as stored)."""
    with reporting(debug):
        found = _store(store)
        info = anyio.run(found.info, session_id)
        messages = anyio.run(found.messages, session_id) if info is not None else []
    if info is None:
        fail(f"no session {session_id!r} in {found!r}")
    if as_json:
        click.echo(json.dumps({**info.to_json(), "messages": messages}, indent=2, ensure_ascii=False))
        return
    for message in messages:
        content = message.get("content") or ""
        for call in message.get("tool_calls") or ():
            arguments = json.dumps(call.get("arguments"), ensure_ascii=False, default=str)
            content += f"{' ' if content else ''}→ {call.get('name')} {arguments}"
        click.echo(f"{message.get('role', '?')}: {content}")


@sessions.command(short_help="Delete a session and its messages.")
@click.argument("session_id", metavar="ID", callback=check_session)
@store_option
@debug_option
def delete(session_id: str, store: Path | None, debug: bool) -> None:
    """Delete session ID and its messages."""
    with reporting(debug):
        found = _store(store)
        gone = anyio.run(found.delete, session_id)
    if not gone:
        fail(f"no session {session_id!r} in {found!r}")
    click.echo(f"deleted session {session_id}", err=True)


@click.command(short_help="Continue a run that paused for approval or a question.")
@click.argument("token")
@click.option("--approve", "action", flag_value="approve", help="Run the held call.")
@click.option("--deny", "action", flag_value="deny", help="Do not run it; the model is told why (--reason).")
@click.option("--reason", metavar="TEXT", help="With --deny: what the model (or caller) is told.")
@click.option("--edit", metavar="JSON", help="Run the held call with these arguments instead.")
@click.option("--answer", metavar="TEXT", help="The answer to a paused question: JSON, or plain text when not JSON.")
@store_option
@path_option
@debug_option
def resume(
    token: str,
    action: str | None,
    reason: str | None,
    edit: str | None,
    answer: str | None,
    store: Path | None,
    paths: Sequence[Path],
    debug: bool,
) -> None:
    """Continue the run paused under TOKEN with a decision or an answer, and print its result.

    Search the same --path folders as the run that paused. The held call
    runs at most once: a token works once. When the run holds another call,
    it pauses again: the new token is printed and the exit status is 3.
    A paused question takes --answer (checked against its schema; a wrong
    one keeps the run paused) or --deny; an answer never approves a call.

    \b
    Examples:
      toolcascade resume Xb3k... --approve
      toolcascade resume Xb3k... --deny --reason 'not on Fridays'
      toolcascade resume Xb3k... --edit '{"to": "carol@example.com"}'
      toolcascade resume Xb3k... --answer 'Fahrenheit'
    """
    if [action is not None, edit is not None, answer is not None].count(True) != 1:
        raise click.UsageError("give exactly one of --approve, --deny, --edit JSON or --answer TEXT")
    if reason is not None and action != "deny":
        raise click.UsageError("--reason goes with --deny")
    decision: Any = action
    if answer is not None:
        try:
            decision = Decision.answered(json.loads(answer))
        except json.JSONDecodeError:
            decision = Decision.answered(answer)  # plain text is the answer as written
    elif edit is not None:
        try:
            decision = {"action": "edit", "args": json.loads(edit)}
        except json.JSONDecodeError as exc:
            fail(f"--edit is not valid JSON: {exc.msg} at column {exc.colno}")
    elif action == "deny":
        decision = {"action": "deny", "reason": reason}
    with reporting(debug, resume_options(paths, store)):  # held again: exit 3, printing the new token
        manager = command_manager(paths, sessions=store)
        chosen = Decision.of(decision)
        result, screen = watched(manager, "resume", partial(anyio.run, manager.resume, token, chosen))
    echo_result(printable(result), screen)
    sys.stdout.flush()
