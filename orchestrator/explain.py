"""Explanation: why every key of a tool has its value, and how its chain is ordered (R-CAS-9)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


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
