"""Explanation: why every key of a tool has its value, and how its chain is ordered (R-CAS-9)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .frozen import thaw
from .ordering import Entry
from .planner import replaced_builtin

if TYPE_CHECKING:
    from .cascade import Merged, Plan
    from .context import Context
    from .errors import OrderCycleError
    from .tool import Tool


@dataclass(frozen=True, slots=True)
class KeyExplanation:
    """One merged key: its value, the level that set it, the policy, and its verdict."""

    key: str
    value: Any
    level: str
    level_kind: str
    policy: str
    levels: tuple[str, ...]
    verdict: str  # 'middleware' | 'data'
    reason: str


@dataclass(frozen=True, slots=True)
class EntryExplanation:
    """One chain entry in sorted order, with its constraints and phase."""

    name: str
    args: Any
    before: tuple[str, ...]
    after: tuple[str, ...]
    phase: str
    origin: str  # 'metadata' | 'extra' | 'override'
    locked: bool
    when: str | None = None  # the tool's own ``when`` (R-CHAIN-12), described
    needed: bool = True  # False: with the facts known now, the runner passes over it
    description: str | None = None  # what the entry's tool says it does (None for an injected function)


@dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``toolcascade show`` prints for a tool."""

    tool: str
    uri: str
    kind: str
    frontmatter: dict[str, Any]
    authorities: tuple[str, ...]
    levels: tuple[tuple[str, str], ...]
    phases: tuple[str, ...]
    keys: tuple[KeyExplanation, ...]
    removed: dict[str, str]
    annotations: dict[str, Any]
    chain: tuple[EntryExplanation, ...]
    prompt: str | None = None  # as written, or rendered when args were given
    rendered: bool = False
    cycle: tuple[str, ...] | None = None  # an $order cycle: the chain is then unsorted
    format: str | None = None  # the format the file was read from (orchestrator.formats), None for ours
    mapping: tuple[dict[str, Any], ...] = ()  # how each of its fields was mapped: source, target, note, lossless
    host_tools: tuple[str, ...] = ()  # tool names of the format's host, kept as data: never offered, never run
    problems: tuple[tuple[int | None, str], ...] = ()  # what the adapter found unsupported (line, message)
    replaces: str | None = None  # the built-in this tool takes the place of ("built-in execute.py"), if any
    files: dict[str, str] = field(default_factory=dict)  # each level's file by level name (user, managed, local ...)
    partials: tuple[dict[str, Any], ...] = ()  # each partial its templates name: name, level, line, path or error
    schemas: dict[str, Any] = field(default_factory=dict)  # params/returns written as shorthand, as JSON Schema
    instructions: tuple[dict[str, Any], ...] = ()  # an agent's instruction files for these args: applied and why

    def key(self, name: str) -> KeyExplanation:
        """The explanation of one key.

        Raises:
            KeyError: the key is not in the merged metadata.
        """
        for item in self.keys:
            if item.key == name:
                return item
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain data; values that JSON cannot hold are shown with ``repr``."""
        data = asdict(self)
        return json.loads(json.dumps(data, default=repr))


def phases_of(chain: Iterable[Entry], phases: tuple[str, ...]) -> dict[str, str]:
    """Each entry's real phase: the latest phase it comes after, directly or through the entries it follows.

    An entry with only ``after: [m2]`` is in ``m2``'s phase; one with no
    constraints of its own is in ``$configure`` (its default, R-CHAIN-1).
    """
    rank = {phase: i for i, phase in enumerate(phases)}
    entries = {e.name: e for e in chain}
    found: dict[str, str] = {}

    def phase(name: str, seen: frozenset[str]) -> str:
        if name in found:
            return found[name]
        entry = entries[name]
        afters = entry.after if entry.constrained else ("$configure",)
        best = "$configure"
        for item in afters:
            if item in rank:
                candidate = item
            elif item in entries and item not in seen:
                candidate = phase(item, seen | {name})
            else:
                continue
            if rank.get(candidate, 0) > rank.get(best, 0):
                best = candidate
        found[name] = best
        return best

    for name in entries:
        phase(name, frozenset())
    return found


def explanation(
    ctx: Context,
    plan: Plan,
    merged: Merged,
    verdicts: Iterable[tuple[str, bool, str]],
    origins: Mapping[str, str],
    *,
    cycle: OrderCycleError | None = None,
    render: bool = True,
    conditions: Mapping[str, Any] | None = None,
) -> Explanation:
    """Build the Explanation of a prepared (not yet run) context.

    The prompt is rendered (metadata and args in scope, directives left as
    written) when ``render`` and the tool has args; a prompt that fails to
    render is shown as written.
    """
    keys = _keys(merged, verdicts)
    entries = _entries(ctx, plan, merged, origins, conditions or {})
    prompt, rendered = _prompt(ctx, render)
    return Explanation(
        tool=ctx.tool.name,
        uri=ctx.tool.uri,
        kind=ctx.tool.kind,
        frontmatter=dict(ctx.tool.frontmatter),
        authorities=plan.authorities,
        levels=tuple((level.name, level.kind) for level in plan.levels),
        files={level.name: str(level.path) for level in plan.levels if level.path is not None},
        phases=plan.phases,
        keys=keys,
        removed=dict(merged.removed),
        annotations=_annotations(plan, merged),
        chain=entries,
        prompt=prompt,
        rendered=rendered,
        cycle=tuple(cycle.cycle) if cycle is not None else None,
        format=ctx.tool.format,
        mapping=tuple(_mapped(item) for item in ctx.tool.mapping),
        host_tools=tuple(_names(thaw(ctx.tool.metadata.get("host-tools")))),
        problems=tuple(ctx.tool.problems),
        replaces=_replaces(ctx.tool),
    )


def _keys(merged: Merged, verdicts: Iterable[tuple[str, bool, str]]) -> tuple[KeyExplanation, ...]:
    """Each merged key with where its value came from and whether it runs as middleware."""
    return tuple(
        KeyExplanation(
            key=key,
            value=merged.values[key],
            level=merged.sources[key].level,
            level_kind=merged.sources[key].kind,
            policy=merged.sources[key].policy,
            levels=merged.sources[key].levels,
            verdict="middleware" if middleware_ else "data",
            reason=reason,
        )
        for key, middleware_, reason in verdicts
    )


def _entries(
    ctx: Context, plan: Plan, merged: Merged, origins: Mapping[str, str], conditions: Mapping[str, Any]
) -> tuple[EntryExplanation, ...]:
    """The sorted chain's entries, each with its phase, origin and whether its ``when`` holds for this call."""
    real = phases_of(ctx.chain, plan.phases)
    needed: dict[str, bool] = {}
    for index, e in enumerate(ctx.chain):
        found = conditions.get(e.name)
        if found is not None:
            position, ctx.pos = ctx.pos, index + 1  # as the runner sees it, right after taking the entry
            try:
                needed[e.name] = bool(found[0](ctx, e.args))
            finally:
                ctx.pos = position
    return tuple(
        EntryExplanation(
            name=e.name,
            args=e.args,
            before=e.before,
            after=e.after,
            phase=real[e.name],
            origin=origins.get(e.name, "metadata"),
            locked=e.name in merged.locked,
            when=conditions[e.name][1] if conditions.get(e.name) is not None else None,
            needed=needed.get(e.name, True),
            description=_description(ctx, e),
        )
        for e in ctx.chain
    )


def _annotations(plan: Plan, merged: Merged) -> dict[str, Any]:
    """The merged annotations as ``explain`` shows them."""
    # Private keys that apply to this tool: its own level's, and its nearest authority's (R-CAS-2).
    nearest = [lv for lv in plan.levels if lv.kind == "authority"][-1:]
    own = [lv for lv in plan.levels if lv.kind == "tool"]
    private = sorted({name for lv in (*nearest, *own) for name in _names(lv.annotations.get("$private"))})
    annotations: dict[str, Any] = {
        "$order": dict(merged.order),
        "$static": sorted(merged.static),
        "$dynamic": sorted(merged.dynamic),
        "$locked": sorted(merged.locked),
        "$private": private,
    }
    if merged.attach_level is not None:
        annotations["$attach"] = f"{merged.attach} (set by {merged.attach_level})"
    return annotations


def _prompt(ctx: Context, render: bool) -> tuple[str | None, bool]:
    """The prompt rendered with the call's args (and True), or as written when there are none or it fails."""
    prompt, rendered = ctx.tool.prompt, False
    if render and prompt and ctx.args not in (None, {}):
        from .errors import OrchestratorError
        from .prompt import shown_prompt

        try:
            prompt, rendered = shown_prompt(ctx), True
        except OrchestratorError:
            pass  # shown as written
    return prompt, rendered


# The conditions of a ``when`` (orchestrator.conditions describes each), in plain words:
# what holds when the entry runs, and what is true when that one condition does not hold.
SAID = {
    "a directive in the prompt": ("the prompt has a directive", "the prompt has no directive"),
    "entries after it": (
        "an entry after it has work",
        "no entry after it has work; the body runs at the end of the chain",
    ),
    "args that narrow the trust": ("its args narrow the tool's trust", "its args leave the tool's trust as it is"),
    "args that declare a default": ("its args declare a default", "its args declare no default"),
}


def when_words(when: str, needed: bool, kind: str | None = None) -> str:
    """An entry's ``when`` (``EntryExplanation.when``) in plain words, for a person reading ``show``.

    For an entry that runs, what holds (``the tool has params``); for one
    skipped, why (``the tool has no returns``). ``kind``, the explained
    tool's kind, settles the conditions on kind: one that fails is the
    reason, and those that hold are left out, so a skip names what does not
    hold (all conditions must hold for the entry to run).
    """
    parts = _conditions(when)
    if needed:
        return " and ".join(map(_holds, parts))
    kinds = [names for field, names in parts if field == "kind"]
    wrong = [names for names in kinds if kind is not None and kind not in names.split(" or ")]
    if wrong:  # the tool's kind alone rules the entry out
        return f"the tool is not {wrong[0]}"
    unmet = [(field, names) for field, names in parts if field != "kind" or kind is None] or parts
    if len(unmet) > 1 or (unmet[0][0] == "meta" and ", " in unmet[0][1]):
        return "it runs only when " + " and ".join(map(_holds, unmet))
    field, names = unmet[0]
    if field == "meta":
        return f"the tool has no {names}"
    if field == "kind":
        return f"the tool is not {names}"
    return SAID[field][1] if field in SAID else f"it runs only when {field}"


def _conditions(when: str) -> list[tuple[str, str]]:
    """The parts of a ``when`` description (``kind markdown, meta model``) as (condition, the names it takes).

    The description joins both its parts and a ``meta`` list's names with
    ", ": a part that is no known condition belongs to the ``meta`` before it.
    """
    parts: list[tuple[str, str]] = []
    for part in when.split(", "):
        field, _, names = part.partition(" ")
        if field in ("meta", "kind") and names:
            parts.append((field, names))
        elif part not in SAID and parts and parts[-1][0] == "meta":
            parts[-1] = ("meta", f"{parts[-1][1]}, {part}")
        else:
            parts.append((part, ""))
    return parts


def _holds(condition: tuple[str, str]) -> str:
    field, names = condition
    if field == "meta":
        return "the tool has " + " and ".join(names.split(", "))
    if field == "kind":
        return f"the tool is {names}"
    return SAID[field][0] if field in SAID else field


def _replaces(tool: Tool) -> str | None:
    """``built-in execute.py`` when ``tool`` takes a built-in's place in the search paths (``show`` marks it)."""
    if tool.kind != "function" and (tool.path is None or tool.root is None or tool.path.parent != tool.root):
        return None  # a tool in a subfolder (team/log) takes no built-in's name
    found = replaced_builtin(tool.name, tool.path)
    return f"built-in {found.name}" if found is not None else None


def _description(ctx: Context, entry: Entry) -> str | None:
    """The description of the tool ``entry`` runs, found as the runner would find it; None for a function."""
    if entry.fn is not None:
        return None
    from .errors import OrchestratorError

    try:
        return ctx.manager.find_tool(entry.name).description
    except OrchestratorError:  # a missing tool: show explains the rest, the run reports it
        return None


def _mapped(item: Any) -> dict[str, Any]:
    """A ``formats.Mapped`` as plain data."""
    return {
        "source": getattr(item, "source", str(item)),
        "target": getattr(item, "target", None),
        "note": getattr(item, "note", ""),
        "lossless": getattr(item, "lossless", True),
    }


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value or () if isinstance(v, str)] if isinstance(value, list) else []
