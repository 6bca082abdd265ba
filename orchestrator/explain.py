"""Explanation: why every key of a tool has its value, and how its chain is ordered (R-CAS-9)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cascade import Merged, Plan
    from .context import Context


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


def explanation(
    ctx: Context, plan: Plan, merged: Merged, verdicts: Iterable[tuple[str, bool, str]], origins: Mapping[str, str]
) -> Explanation:
    """Build the Explanation of a prepared (not yet run) context."""
    keys = tuple(
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
    rank = {phase: i for i, phase in enumerate(plan.phases)}
    entries = tuple(
        EntryExplanation(
            name=e.name,
            args=e.args,
            before=e.before,
            after=e.after,
            phase=max(
                (s for s in (e.after if e.constrained else ("$configure",)) if s in rank),
                key=rank.__getitem__,
                default="$configure",
            ),
            origin=origins.get(e.name, "metadata"),
            locked=e.name in merged.locked,
        )
        for e in ctx.chain
    )
    annotations = {
        "$order": dict(merged.order),
        "$static": sorted(merged.static),
        "$dynamic": sorted(merged.dynamic),
        "$locked": sorted(merged.locked),
    }
    return Explanation(
        tool=ctx.tool.name,
        uri=ctx.tool.uri,
        kind=ctx.tool.kind,
        frontmatter=dict(ctx.tool.frontmatter),
        authorities=plan.authorities,
        levels=tuple((level.name, level.kind) for level in plan.levels),
        phases=plan.phases,
        keys=keys,
        removed=dict(merged.removed),
        annotations=annotations,
        chain=entries,
    )
