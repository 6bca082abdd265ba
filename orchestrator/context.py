"""Context: the state of one invocation, and its bound manager facade.

A Context is created for every invocation, chain entries included. It holds
the effective args, the merged metadata, the chain and the runner's three
pieces of state (position, finished, body ran). ``ctx.manager`` is bound to
it: ``await ctx.manager.next()`` continues *this* context's chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import chain
from .errors import ConfigurationError, SecurityError
from .ordering import Entry
from .registry import SearchPath
from .tool import Tool

if TYPE_CHECKING:
    from .manager import Manager


class Run:
    """What an invocation knows of its run: the shared id and history, its own origin and tool.

    ``history``, ``checked`` (files stat-ed in this run) and ``usage`` (model
    token counts summed over the run: ``prompt_tokens``, ``completion_tokens``,
    ...) and ``state`` (run-local storage for middleware: call counts, a
    breaker's memory; key it by your tool's name) are shared by every
    invocation under one top-level ``Manager.invoke``;
    ``origin`` and ``tool`` describe the tool of this invocation (built when read).
    """

    __slots__ = ("id", "history", "checked", "usage", "state", "_tool")

    def __init__(
        self,
        id: str,
        history: list[dict[str, Any]],
        checked: set[str],
        tool: Tool,
        usage: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.history = history
        self.checked = checked
        self.usage = usage if usage is not None else {}
        self.state = state if state is not None else {}
        self._tool = tool

    @property
    def origin(self) -> dict[str, Any]:
        """``{uri, frontmatter}`` of the tool this invocation runs."""
        return {"uri": self._tool.uri, "frontmatter": self._tool.frontmatter}

    @property
    def tool(self) -> dict[str, Any]:
        """``{name, uri, kind, description}`` of the tool this invocation runs."""
        tool = self._tool
        return {"name": tool.name, "uri": tool.uri, "kind": tool.kind, "description": tool.description}


class Context:
    """One invocation's state (R-INV-3). ``target`` is the context a chain entry serves."""

    __slots__ = (
        "args",
        "locals",
        "nonlocals",
        "meta",
        "run",
        "parent",
        "target",
        "manager",
        "envelope",
        "paths",
        "cwd",
        "depth",
        "tool",
        "chain",
        "pos",
        "finished",
        "body_ran",
        "body",
        "entry",
        "phases",
        "locked",
        "trust",
        "running",
        "_manager",
    )

    def __init__(
        self,
        manager: Manager,
        tool: Tool,
        args: Any,
        run: Run,
        *,
        parent: Context | None,
        target: Context | None,
        envelope: Mapping[str, Any] | None,
        paths: tuple[SearchPath, ...],
        cwd: Path,
    ) -> None:
        self._manager = manager
        self.tool = tool
        self.args = args
        self.run = run
        self.parent = parent
        self.target = target if target is not None else self
        self.entry = target is not None
        self.envelope = envelope if envelope is not None else {}
        self.paths = paths
        self.cwd = cwd
        self.depth: int = parent.depth + 1 if parent is not None else 0
        self.locals: dict[str, Any] = {}
        self.nonlocals: dict[str, Any] = parent.nonlocals if parent is not None else {}
        self.meta: dict[str, Any] = {}
        self.chain: list[Entry] = []
        self.pos = 0
        self.finished = False
        self.body_ran = False
        self.body: Callable[[Context], Awaitable[Any] | Any] | None = None
        self.phases: tuple[str, ...] = ()
        self.locked: frozenset[str] = frozenset()
        self.trust: dict[str, bool] = {}
        self.running = 0  # next() calls of this chain in flight (the runner's concurrency guard)
        self.manager = BoundManager(self)

    def __repr__(self) -> str:
        return f"<Context {self.tool.name} depth={self.depth} pos={self.pos}/{len(self.chain)}>"


class BoundManager:
    """``ctx.manager``: the manager's operations bound to one context."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    async def invoke(self, ref: str, args: Any = None, **options: Any) -> Any:
        """Invoke ``ref`` as an independent pipeline with this context as parent (never a cycle skip)."""
        ctx = self._ctx
        return await ctx._manager._invoke(ref, args, parent=ctx, **options)

    def next(self) -> Awaitable[Any]:
        """Run the next entry of this context's chain; resolves to ``locals['result']`` (R-CHAIN-6/7)."""
        return chain.advance(self._ctx)

    def execute(self) -> Awaitable[Any]:
        """Run this context's body once, storing its value as the result without finishing (R-CHAIN-8)."""
        return chain.execute(self._ctx)

    def finish(self, value: Any = None) -> None:
        """Set the result (unless ``value`` is None) and finish the chain."""
        chain.finish(self._ctx, value)

    def inject(self, entries: Sequence[Entry | Mapping[str, Any]]) -> None:
        """Insert entries right after the current position (R-CHAIN-9)."""
        chain.inject(self._ctx, entries)

    def folder(self, path: str | Path, key: str) -> Path:
        """Resolve ``path`` against the tool's folder, as ``cwd`` and ``paths`` do.

        Raises:
            ConfigurationError: not a folder.
            SecurityError: outside the tool's search path while ``trust.files`` is off.
        """
        ctx = self._ctx
        tool = ctx.tool
        base = tool.path.parent if tool.path else ctx.cwd
        try:
            folder = (base / path).resolve()
            found = folder.is_dir()
        except (OSError, ValueError, TypeError):  # too long, NUL, not encodable, not a path at all
            found = False
        if not found:
            raise ConfigurationError(f"{key}: {str(path)[:200]!r} is not a folder", tool=tool.name, key=key)
        if not ctx.trust.get("files") and tool.root is not None and not folder.is_relative_to(tool.root):
            raise SecurityError(
                f"{key}: {str(folder)!r} is outside the tool's search path and trust.files is off",
                tool=tool.name,
                key=key,
            )
        return folder

    def checkpoint(self) -> chain.Checkpoint:
        """Remember where this context's chain is, for ``rewind`` (retry and fallback middleware)."""
        return chain.Checkpoint(self._ctx)

    def rewind(self, checkpoint: chain.Checkpoint) -> None:
        """Go back to ``checkpoint``: the next ``next()`` runs the rest of the chain (and the body) again."""
        chain.rewind(self._ctx, checkpoint)

    def search_path(self, folder: str | Path) -> SearchPath:
        """A search path for ``folder``, trusted only when the program marked it so."""
        return self._ctx._manager.search_path(folder)

    def find_tool(self, ref: str) -> Tool:
        """Resolve ``ref`` against this context's search paths."""
        ctx = self._ctx
        return ctx._manager.registry.find(ref, ctx.paths, ctx.run.checked)


def ctx_target(ctx: Context) -> Context:
    """The context a middleware serves: ``ctx.target`` (itself when not a chain entry)."""
    return ctx.target
