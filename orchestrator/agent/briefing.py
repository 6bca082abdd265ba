"""The instructions of one agent run: the files that apply from its start, and those its tool calls bring in.

``agent_instructions`` reads them for an agent whose metadata asks
(``orchestrator.instructions`` finds and judges the files);
``AgentInstructions.weave`` places each tool-triggered one after the tool
results of the turn that brought it in, on every request, so a continued
or resumed run gets it at the same place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..instructions import (
    EVENT,
    Instruction,
    Verdict,
    chosen_hosts,
    discover,
    judge,
    load_instruction,
    matching,
    named_files,
    project_root,
    tool_instructions,
)

if TYPE_CHECKING:
    from ..context import Context


class AgentInstructions:
    """The instructions of one agent run: its system messages, and those its tool calls bring in later.

    ``system`` are the messages of the files that apply from the start
    (``Conversation.begin`` puts them in the preamble). ``weave`` is called
    for every request with the conversation as it stands: after the tool
    results of the turn whose call first brings an instruction in (its
    tool, or a file its arguments name that a glob matches) it inserts that
    instruction as a system message. So a continued session or a resumed
    run gets them at the same places; one whose call a rewrite (``compact``)
    removed stays, ahead of the conversation.
    """

    def __init__(
        self,
        system: list[Instruction],
        pending: list[Instruction],
        cwd: Path,
        root: Path,
        refs: Mapping[str, str],
        announce: Callable[[list[Verdict]], None],
    ) -> None:
        self.system = [_message(i) for i in system]
        self.pending = pending
        self.cwd = cwd
        self.root = root
        self.refs = refs  # wire name -> tool ref
        self.announce = announce
        self.announced: set[str] = set()
        self._brought: dict[str, list[tuple[Instruction, str]]] = {}

    def weave(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with each pending instruction after the tool results of the turn that brought it in."""
        if not self.pending:
            return list(messages)
        out: list[dict[str, Any]] = []
        added: set[str] = set()
        fresh: list[Verdict] = []
        kept = [i for i in self.pending if i.file in self.announced]  # brought in earlier in this run
        index = 0
        while index < len(messages):
            message = messages[index]
            out.append(message)
            index += 1
            calls = message.get("tool_calls") if message.get("role") == "assistant" else None
            if not calls:
                continue
            while index < len(messages) and messages[index].get("role") == "tool":
                out.append(messages[index])
                index += 1
            for instruction, reason in self._bring(calls):
                if instruction.file in added:
                    continue
                added.add(instruction.file)
                out.append(_message(instruction))
                if instruction.file not in self.announced:
                    self.announced.add(instruction.file)
                    fresh.append(Verdict(instruction.file, instruction.host, True, reason, "after-call"))
        if fresh:
            self.announce(fresh)
        # a call rewritten away (compact) keeps what it brought in, ahead of the conversation
        return [*(_message(i) for i in kept if i.file not in added), *out]

    def _bring(self, calls: Sequence[Mapping[str, Any]]) -> list[tuple[Instruction, str]]:
        """The pending instructions a turn's calls bring in, each with why (memoised by call)."""
        brought: list[tuple[Instruction, str]] = []
        for call in calls:
            wire = str(call.get("name"))
            key = json.dumps([wire, call.get("arguments")], sort_keys=True, default=str)
            if key not in self._brought:
                ref = self.refs.get(wire, wire)
                arguments = call.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments or "{}")
                    except ValueError:
                        arguments = None
                files = named_files(arguments, self.cwd, self.root)
                why = ((i, _called(i, ref, wire, files)) for i in self.pending)
                self._brought[key] = [(i, reason) for i, reason in why if reason is not None]
            brought += self._brought[key]
        return brought


def _called(instruction: Instruction, ref: str, wire: str, files: Sequence[str]) -> str | None:
    """Why a call to ``ref`` naming ``files`` brings ``instruction`` in; None when it does not."""
    if ref in instruction.tools or wire in instruction.tools:
        return f"the agent called {ref}"
    hit = matching(instruction.globs, files) if instruction.globs and files else None
    if hit is None:
        return None
    return f"{instruction.glob_key} {hit[0]!r} matched {hit[1]}, named in a call to {ref}"


def _message(instruction: Instruction) -> dict[str, Any]:
    """The system message that carries an instruction file."""
    return {"role": "system", "content": f"Instructions from {instruction.file}:\n\n{instruction.text}"}


def agent_instructions(ctx: Context, wire: Mapping[str, Mapping[str, Any]]) -> AgentInstructions | None:
    """The instructions of the agent of ``ctx`` (None when its metadata reads none); emits their verdicts.

    ``wire`` maps the names the model calls tools by to the offered tools (their ``ref``).

    Raises:
        ConfigurationError: a malformed ``instructions`` key; wcmatch missing when a glob is matched.
    """
    hosts = chosen_hosts(ctx.meta, ctx.tool.name)
    given = tool_instructions(ctx.meta, ctx.tool.name, ctx.tool.path)
    if not hosts and not given:
        return None
    owner = ctx.owner
    root = project_root(ctx.cwd, (Path(sp.root) for sp in owner.paths))
    files = named_files(ctx.args, Path(ctx.cwd), root)
    system, pending, verdicts = [], [], []
    read = [load_instruction(host, path, root, owner.limits) for host, path in discover(ctx.cwd, root) if host in hosts]
    for instruction in [*read, *given]:
        verdict = judge(instruction, files)
        verdicts.append(verdict)
        if verdict.applied:
            system.append(instruction)
        elif verdict.when == "after-call":
            pending.append(instruction)

    def announce(found: list[Verdict]) -> None:
        owner.emit(EVENT, ctx, None, files=[asdict(v) for v in found])

    if verdicts:
        announce(verdicts)
    refs = {name: str(tool["ref"]) for name, tool in wire.items()}
    return AgentInstructions(system, pending, Path(ctx.cwd), root, refs, announce)
