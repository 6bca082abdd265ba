"""When a middleware has work: the ``when`` a middleware tool declares in its frontmatter (R-CHAIN-12).

Most built-ins have nothing to do for most targets (``validate-args``
without ``params``, ``agent-execute`` for a python tool), yet each entry is a
full invocation. A middleware tool may say when it has work::

    frontmatter = {"when": {"meta": "params"}, ...}     # validate-args

All of its conditions must hold, checked against the target just before the
entry would run, so a change a middleware made earlier at run time (a key
it put in ``ctx.meta``, an entry it injected) counts; when one does not
hold, the entry is passed over without an invocation. The conditions:

- ``meta: key`` (or a list): the target's metadata, or its locals, hold a
  non-null value for each key (``model`` may come from either);
- ``kind: markdown`` (or a list): the target's tool kind;
- ``directives: true``: the target's prompt holds a directive;
- ``next: true``: entries that have work follow this one in the target's
  chain (``execute``: at the bottom the body runs anyway, R-CHAIN-8);
- ``check: NAME``: a function of the middleware's own python file,
  ``NAME(target, args) -> bool``, says whether the entry has work (the
  built-in ``trust`` names ``narrows``: only args that narrow what the
  target was granted need a run). Its docstring's first line is what
  ``show`` says of it. It sees what the other conditions see (below), and
  must only read: it is asked before the entry runs, and may be asked once
  per plan rather than per call.

A condition sees the target's context (or, asked once per plan, a ``Start``
with the same fields: ``tool``, ``locals``, ``meta``, ``trust``, ``chain``,
``pos``) and the entry's args.

**Decided once where nothing can differ.** Before any entry of a chain runs,
what a condition sees is fixed: the merged metadata, the tool's kind and
prompt, its trust, the caller's seeded locals. So the planner asks the
leading entries once per plan (``idle_prefix``) and leaves those without
work out of the chain it runs; ``show`` still lists them as not needed.
Some facts never change at all: a tool's kind and its own prompt. An entry
whose ``kind`` or ``directives`` the tool rules out is left out wherever it
sits (``possible``). From the first entry that has work (or declares no
``when``) on, since a middleware that runs may change what later entries
see, each other condition is checked just before its entry would run.

Your own middleware may declare ``when`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .names import names

if TYPE_CHECKING:
    from .context import Context
    from .ordering import Entry
    from .registry import Tool

Condition = Callable[["Context", Any], bool]
Fixed = Callable[["Tool"], bool]  # the part of a condition only the target tool decides
FIELDS = ("meta", "kind", "directives", "next", "check")


def _names(value: Any, field: str, where: dict[str, Any]) -> tuple[str, ...]:
    found = names(value, f"when.{field}", **where)
    if not found:
        raise ConfigurationError(f"when.{field} must name at least one {field}", **where)
    return found


def _flag(value: Any, field: str, where: dict[str, Any]) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"when.{field} must be true or false, not {value!r}", **where)
    return value


def condition(
    spec: Any, tool: str, path: Path | None = None, fn: Callable[..., Any] | None = None
) -> tuple[Condition, str, Fixed | None] | None:
    """The predicate, a description (``meta params``) and the tool-only part of a middleware's ``when``.

    The third item, when the ``when`` has ``kind`` or ``directives``, says
    whether the target tool itself allows any work (its kind, its own
    prompt's directives: facts nothing changes at run time); None otherwise.
    None in all, without a ``when``. ``fn`` is the middleware's own
    body: ``check`` names a function beside it.

    Raises:
        ConfigurationError: a ``when`` that is not a mapping of the known conditions.
    """
    if spec is None:
        return None
    where: dict[str, Any] = {"tool": tool, "path": path, "key": "when"}
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigurationError(f"when must map conditions ({', '.join(FIELDS)}) to values", **where)
    unknown = [field for field in spec if field not in FIELDS]
    if unknown:
        raise ConfigurationError(f"unknown condition {unknown[0]!r} in when; known: {', '.join(FIELDS)}", **where)
    checks: list[Condition] = []
    said: list[str] = []
    fixed: list[Fixed] = []
    if "kind" in spec:
        kinds = frozenset(_names(spec["kind"], "kind", where))
        checks.append(lambda ctx, _args: ctx.tool.kind in kinds)
        fixed.append(lambda target: target.kind in kinds)
        said.append(f"kind {' or '.join(sorted(kinds))}")
    if "meta" in spec:
        keys = _names(spec["meta"], "meta", where)

        checks.append(_has_one(keys[0]) if len(keys) == 1 else _has_all(keys))
        said.append(f"meta {', '.join(keys)}")
    if "directives" in spec and _flag(spec["directives"], "directives", where):
        checks.append(_has_directives)
        fixed.append(_holds_directives)
        said.append("a directive in the prompt")
    if "next" in spec and _flag(spec["next"], "next", where):
        checks.append(_followed)
        said.append("entries after it")
    if "check" in spec:
        check, says = _check(spec["check"], fn, where)
        checks.append(check)
        said.append(says)
    if not checks:
        return None
    allows = (lambda target: all(check(target) for check in fixed)) if fixed else None
    if len(checks) == 1:
        return checks[0], said[0], allows
    if len(checks) == 2:  # the common pair (``kind`` and one more): no generator per ask
        first, second = checks
        return (lambda ctx, args: first(ctx, args) and second(ctx, args)), ", ".join(said), allows
    return (lambda ctx, args: all(check(ctx, args) for check in checks)), ", ".join(said), allows


# Conditions are asked on every entry that may have work: each is one plain function call, without generators.


def _has_one(key: str) -> Condition:
    def has(ctx: Context, _args: Any) -> bool:
        meta = ctx._meta if ctx._meta is not None else ctx._values  # read without making ctx.meta's copy
        return meta.get(key) is not None or ctx.locals.get(key) is not None

    return has


def _has_all(keys: tuple[str, ...]) -> Condition:
    def has(ctx: Context, _args: Any) -> bool:
        meta = ctx._meta if ctx._meta is not None else ctx._values
        local = ctx.locals
        for key in keys:
            if meta.get(key) is None and local.get(key) is None:
                return False
        return True

    return has


def _followed(ctx: Context, _args: Any) -> bool:
    """Whether an entry after the current one has work (a later ``next`` condition errs towards yes)."""
    chain = ctx.chain
    for index in range(ctx.pos, len(chain)):
        entry = chain[index]
        if entry.when is None or entry.when(ctx, entry.args):
            return True
    return False


def _check(name: Any, fn: Callable[..., Any] | None, where: dict[str, Any]) -> tuple[Condition, str]:
    """The function ``when.check`` names in the middleware's own file, and what ``show`` says of it.

    Raises:
        ConfigurationError: not a name, or no function of that name beside the middleware's body.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigurationError(f"when.check must name a function of the middleware's file, not {name!r}", **where)
    namespace = getattr(fn, "__globals__", None)
    found = namespace.get(name) if isinstance(namespace, Mapping) else None
    if not callable(found):
        raise ConfigurationError(
            f"when.check names {name!r}, which is not a function of this middleware's file"
            + ("" if fn is not None else " (only a python middleware has functions)"),
            **where,
        )
    doc = (getattr(found, "__doc__", None) or "").strip()
    return found, doc.splitlines()[0].rstrip(".") if doc else name


def _has_directives(ctx: Context, _args: Any) -> bool:
    """Whether the target's prompt holds a directive."""
    return _holds_directives(ctx.tool)


def _holds_directives(tool: Tool) -> bool:
    """Whether ``tool``'s own prompt holds a directive (markdown-it is imported only for prompts with a colon)."""
    prompt = tool.prompt
    if not isinstance(prompt, str) or ":" not in prompt:
        return False
    from .directives import find_directives

    return bool(find_directives(prompt))


def possible(entries: Sequence[Entry], tool: Tool, allows: Callable[[str], Fixed | None]) -> tuple[Entry, ...]:
    """``entries`` without those whose ``when`` the tool itself rules out, wherever they sit in the chain.

    ``allows(name)`` is the tool-only part of entry ``name``'s condition
    (``condition``'s third item). A python tool never needs ``directives``
    or ``agent-execute``; a markdown prompt without a directive never needs
    ``directives``: nothing a middleware does at run time changes a tool's
    kind or its own prompt, so such an entry cannot wake later.
    """
    kept = []
    for entry in entries:
        if entry.fn is None and entry.when is not None:
            check = allows(entry.name)
            if check is not None and not check(tool):
                continue
        kept.append(entry)
    return tuple(kept)


class Start:
    """What a condition sees of a target whose chain has not started: the facts a plan fixes.

    It has the fields a condition reads from a ``Context`` (its kind,
    prompt, metadata, trust, chain and position), as a new context of the
    plan would hold them.
    """

    __slots__ = ("tool", "locals", "chain", "pos", "_values", "_meta", "_trust", "_env")

    @property
    def meta(self) -> Mapping[str, Any]:
        """The merged metadata, as the context's chain will start with it (read only)."""
        return self._values

    @property
    def trust(self) -> Mapping[str, bool]:
        """What the target is granted before any entry runs (read only)."""
        return {"env": self._env, "files": self.tool.trusted}

    def __init__(self, tool: Tool, values: Mapping[str, Any], env: bool, chain: Sequence[Entry]) -> None:
        self.tool = tool
        self.locals = {"prompt": tool.prompt}
        self.chain = chain
        self.pos = 0
        self._values = values
        self._meta: Mapping[str, Any] | None = None
        self._trust: dict[str, bool] | None = None
        self._env = env


def idle_prefix(target: Any, chain: Sequence[Entry]) -> int:
    """How many leading entries of ``chain`` have no work for ``target`` as its chain starts.

    ``target`` is a context that has not run an entry yet (or a ``Start``).
    Each condition is asked as the runner would ask it, right after taking
    its entry; the first entry with work, or without a ``when``, ends the
    prefix.
    """
    saved = target.pos
    try:
        for index, entry in enumerate(chain):
            target.pos = index + 1
            if entry.when is None or entry.when(target, entry.args):
                return index
        return len(chain)
    finally:
        target.pos = saved
