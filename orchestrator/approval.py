"""Human approval of tool calls: decisions, and the decision a resumed run carries.

A ``Decision`` allows a held call, denies it (the model hears ``reason``),
or edits its arguments. ``deciding(decision)`` hands one decision to the
``approval`` middleware of the calls run inside it: a resumed run uses it
instead of asking again, once.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ConfigurationError

ACTIONS = ("approve", "deny", "edit")


@dataclass(frozen=True)
class Decision:
    """What an approver decided about one held call (or one batch of calls)."""

    action: Literal["approve", "deny", "edit"]
    args: Mapping[str, Any] | None = None  # edit: the arguments the call runs with instead
    reason: str | None = None  # deny: what the model (or the caller) is told

    @classmethod
    def of(cls, value: Any) -> Decision:
        """A decision from ``"approve"``, ``"deny"``, ``True``/``False``, a mapping or a Decision.

        Raises:
            ConfigurationError: anything else, or an edit without a mapping of args.
        """
        if isinstance(value, Decision):
            return value
        if value is True or value is False:
            return cls("approve" if value else "deny")
        if isinstance(value, str) and value in ACTIONS and value != "edit":
            return cls(value)  # type: ignore[arg-type]
        if isinstance(value, Mapping) and value.get("action") in ACTIONS:
            args, reason = value.get("args"), value.get("reason")
            if value["action"] == "edit" and not isinstance(args, Mapping):
                raise ConfigurationError("an edit decision needs args: a mapping of the arguments to run with")
            if reason is not None and not isinstance(reason, str):
                raise ConfigurationError("a decision's reason must be a string")
            return cls(value["action"], dict(args) if isinstance(args, Mapping) else None, reason)
        raise ConfigurationError(
            f"a decision is 'approve', 'deny' or {{action: approve|deny|edit, args: {{...}}, reason: '...'}}, "
            f"not {value!r}"[:300]
        )

    def to_json(self) -> dict[str, Any]:
        """The decision as plain JSON (what a session store keeps)."""
        return {
            "action": self.action,
            "args": dict(self.args) if self.args is not None else None,
            "reason": self.reason,
        }


# The decision a resumed run carries for its held call; taken (set to None) by the first use.
_decided: contextvars.ContextVar[list[Decision] | None] = contextvars.ContextVar("toolcascade_decided", default=None)


@contextmanager
def deciding(decision: Decision) -> Iterator[None]:
    """Run the block with ``decision`` waiting for the first call the approval middleware would hold."""
    token = _decided.set([decision])
    try:
        yield
    finally:
        _decided.reset(token)


def take_decision() -> Decision | None:
    """The decision ``deciding`` set, once: later callers get None (the held call runs exactly once)."""
    box = _decided.get()
    if not box:
        return None
    return box.pop()
